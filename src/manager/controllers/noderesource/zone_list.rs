//! The NUMA zones' batch resources written into the node's NodeResourceTopology (Koordinator's
//! `UpdateNRTZoneListIfNeeded`): `kubernetes.io/batch-cpu` (milli-cores, amplified by the
//! node's CPU normalization ratio above 1) and `kubernetes.io/batch-memory` set as capacity,
//! allocatable and available of each zone — changed only where they differ by more than the
//! `resourceDiffThreshold`, added where missing (resources kept in name order), and set to
//! zero on a zone without a result.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::calc::ZoneBatch;
use crate::api::extension::resources::{BATCH_CPU, BATCH_MEMORY};
use crate::api::topology::{ResourceInfo, Zone};

/// The zones with the batch resources of `batch`, when any of them changed enough to write.
pub fn updated(
    zones: &[Zone],
    batch: &[ZoneBatch],
    ratio: f64,
    threshold: f64,
) -> Option<Vec<Zone>> {
    let mut out = zones.to_vec();
    let mut changed = false;
    for zone in &mut out {
        let wanted = batch.iter().find(|b| b.zone == zone.name).map(|b| {
            let cpu = b.terms.result.cpu;
            let cpu = if ratio > 1.0 {
                (cpu as f64 * ratio) as i64
            } else {
                cpu
            };
            [
                (BATCH_CPU, cpu * 1000),
                (BATCH_MEMORY, b.terms.result.memory * 1000),
            ]
        });
        changed |= match wanted {
            Some(w) => set(zone, w, threshold),
            None => reset(zone),
        };
    }
    changed.then_some(out)
}

/// `(resource, milli-value)` pairs into the zone; whether any moved.
fn set(zone: &mut Zone, wanted: [(&str, i64); 2], threshold: f64) -> bool {
    let list = zone.resources.get_or_insert_with(Vec::new);
    let mut changed = false;
    for (name, milli) in wanted {
        let q = quantity(milli);
        match list.iter_mut().find(|r| r.name == name) {
            Some(r) => {
                for field in [&mut r.capacity, &mut r.allocatable, &mut r.available] {
                    if differs(field, milli, threshold) {
                        *field = q.clone();
                        changed = true;
                    }
                }
            }
            None => {
                list.push(ResourceInfo {
                    name: name.to_string(),
                    capacity: q.clone(),
                    allocatable: q.clone(),
                    available: q,
                });
                list.sort_by(|a, b| a.name.cmp(&b.name));
                changed = true;
            }
        }
    }
    changed
}

/// The zone's batch resources at zero (Koordinator zeroes them rather than removing them).
fn reset(zone: &mut Zone) -> bool {
    let mut changed = false;
    for r in zone.resources.iter_mut().flatten() {
        if r.name != BATCH_CPU && r.name != BATCH_MEMORY {
            continue;
        }
        for field in [&mut r.capacity, &mut r.allocatable, &mut r.available] {
            if milli_of(field) != 0 {
                *field = Quantity("0".into());
                changed = true;
            }
        }
    }
    changed
}

/// Koordinator's `IsQuantityDiff`: |new − old| > old × threshold, in milli-units.
fn differs(old: &Quantity, new_milli: i64, threshold: f64) -> bool {
    let old = milli_of(old);
    (new_milli - old).abs() as f64 > old as f64 * threshold
}

fn milli_of(q: &Quantity) -> i64 {
    crate::api::quantity::milli(&q.0).unwrap_or(0)
}

/// A whole-unit quantity as Koordinator writes these (`NewQuantity(v, DecimalSI)`), or
/// milli-units when there is a fraction.
fn quantity(milli: i64) -> Quantity {
    match milli % 1000 {
        0 => Quantity((milli / 1000).to_string()),
        _ => Quantity(format!("{milli}m")),
    }
}

#[cfg(test)]
#[path = "zone_list_tests.rs"]
mod tests;
