//! The device allocator (`device_allocator.go`, `allocator_gpu.go`, `scoring.go`): for each
//! requested type, the devices whose free amount covers the per-device request, ordered
//! reservation's first, then by the scorer (LeastAllocated spreads, MostAllocated packs),
//! then by minor. A multi-GPU request is kept inside one PCIe switch, else one NUMA node,
//! when one has room (choosing the tightest such group, to leave whole groups free); a
//! joint allocation puts the secondary types (RDMA) on the primary's PCIe switches.

use super::error::DeviceError;
use std::collections::{BTreeMap, BTreeSet};

use super::hint::Hints;
use super::request::{JointAllocate, Need, Request};
use crate::api::extension::resources::{GPU_MEMORY, GPU_MEMORY_RATIO};
use crate::scheduler::model::devices::{Allocations, Dev, DevRes, Granted, NodeDevices, Used};

pub use super::error::ERR_JOINT;

/// `DeviceShareArgs.scoringStrategy`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scorer {
    pub most_allocated: bool,
    pub weights: Vec<(String, i64)>,
}

impl Scorer {
    /// 0–100 for `requested` of `total` summed per resource, weighted.
    fn score_sums(&self, parts: impl Fn(&str) -> Option<(i64, i64)>) -> i64 {
        let (mut sum, mut weights) = (0i64, 0i64);
        for (name, w) in &self.weights {
            let Some((requested, total)) = parts(name).filter(|(_, t)| *t > 0) else {
                continue;
            };
            let s = if self.most_allocated {
                requested.min(total) * 100 / total
            } else if requested > total {
                0
            } else {
                (total - requested) * 100 / total
            };
            sum += s * w;
            weights += w;
        }
        if weights == 0 { 0 } else { sum / weights }
    }

    /// One device: requested = (total − free) + this request.
    pub fn device(&self, req: &DevRes, total: &DevRes, free: &DevRes) -> i64 {
        self.score_sums(|n| {
            let t = *total.get(n)?;
            let f = free.get(n).copied().unwrap_or(0);
            Some(((t - f).max(0) + req.get(n).copied().unwrap_or(0), t))
        })
    }

    /// A node: the same over its devices' sums.
    pub fn node(&self, req: &DevRes, totals: &[&DevRes], frees: &[DevRes]) -> i64 {
        self.score_sums(|n| {
            let t: i64 = totals.iter().filter_map(|r| r.get(n)).sum();
            let f: i64 = frees.iter().filter_map(|r| r.get(n)).sum();
            Some(((t - f).max(0) + req.get(n).copied().unwrap_or(0), t))
        })
    }
}

/// What one allocation reads: the node's devices, what others hold, and what the pod's
/// usable reservations hold (free for it, and preferred).
pub struct Ctx<'a> {
    pub devices: &'a NodeDevices,
    pub used: &'a Used,
    pub reserved: &'a Used,
    pub scorer: &'a Scorer,
    /// The pod's `device-allocate-hint`.
    pub hints: &'a Hints,
    /// Virtual functions other pods hold: (type, minor, bus id).
    pub vfs_used: &'a BTreeSet<(String, i32, String)>,
    /// The NUMA nodes NodeNUMAResource chose (a bit per node): only devices there.
    pub numa: Option<u64>,
}

impl Ctx<'_> {
    /// `d` may be given under the NUMA affinity (no topology: not under any).
    fn on_numa(&self, d: &Dev) -> bool {
        let Some(mask) = self.numa else {
            return true;
        };
        match d.numa {
            Some(n) => (0..64).contains(&n) && mask & (1u64 << n) != 0,
            None => d.numa_unknown,
        }
    }

    pub fn free(&self, kind: &str, d: &Dev) -> DevRes {
        let key = (kind.to_string(), d.minor);
        let used = self.used.get(&key);
        d.total
            .iter()
            .map(|(k, t)| {
                let u = used.and_then(|u| u.get(k)).copied().unwrap_or(0);
                (k.clone(), t - u)
            })
            .collect()
    }

    fn reserved_here(&self, kind: &str, minor: i32) -> bool {
        self.reserved.contains_key(&(kind.to_string(), minor))
    }

    /// `allocateVF`: with a `vfSelector` for `kind`, the free VF (lowest bus id) of a group
    /// it selects on `d` — `Some(None)` when none is needed, `None` when none is left.
    fn vf(&self, kind: &str, d: &Dev) -> Option<Option<(String, i32)>> {
        let Some(sel) = self.hints.get(kind).and_then(|h| h.vf_selector.as_ref()) else {
            return Some(None);
        };
        d.vf_groups
            .iter()
            .filter(|(labels, _)| sel.matches(labels))
            .flat_map(|(_, vfs)| vfs.iter())
            .filter(|(bus, _)| {
                !self
                    .vfs_used
                    .contains(&(kind.to_string(), d.minor, bus.clone()))
            })
            .min_by(|a, b| a.0.cmp(&b.0))
            .cloned()
            .map(Some)
    }
}

/// The per-device request on `d`: gpu-memory and gpu-memory-ratio filled in from the
/// device's memory (ratio = ⌊bytes·100/total⌋, bytes = ratio·total/100).
pub fn fill(kind: &str, per: &DevRes, d: &Dev) -> DevRes {
    let mut out = per.clone();
    let total = d.total.get(GPU_MEMORY).copied().unwrap_or(0);
    if kind != "gpu" || total <= 0 {
        return out;
    }
    match (per.get(GPU_MEMORY_RATIO), per.get(GPU_MEMORY)) {
        (Some(r), None) => {
            out.insert(GPU_MEMORY.into(), (*r as i128 * total as i128 / 100) as i64);
        }
        (None, Some(m)) => {
            out.insert(
                GPU_MEMORY_RATIO.into(),
                (*m as i128 * 100 / total as i128) as i64,
            );
        }
        _ => {}
    }
    out
}

fn fits(req: &DevRes, free: &DevRes) -> bool {
    req.iter()
        .all(|(k, v)| free.get(k).copied().unwrap_or(0) >= *v)
}

/// A candidate device with its request, the VF it would get and order keys.
struct Cand<'a> {
    dev: &'a Dev,
    req: DevRes,
    vf: Option<(String, i32)>,
    reserved: bool,
    score: i64,
}

fn candidates<'a>(ctx: &Ctx<'a>, kind: &str, need: &Need) -> Vec<Cand<'a>> {
    let Some(devs) = ctx.devices.by_type.get(kind) else {
        return Vec::new();
    };
    let hint = ctx.hints.get(kind);
    let selector = hint.and_then(|h| h.selector.as_ref());
    let pcie_level = hint.is_some_and(|h| h.exclusive.as_deref() == Some(super::hint::PCIE_LEVEL));
    let mut out: Vec<Cand> = devs
        .iter()
        .filter(|d| d.total.values().any(|v| *v > 0))
        .filter(|d| ctx.on_numa(d))
        .filter(|d| selector.is_none_or(|s| s.matches(&d.labels)))
        .filter(|d| !pcie_level || pcie_wholly_free(ctx, kind, devs, d))
        .filter_map(|d| {
            let req = fill(kind, &need.per, d);
            let free = ctx.free(kind, d);
            if !fits(&req, &free) {
                return None;
            }
            let vf = ctx.vf(kind, d)?;
            // Scored on the request as the pod gave it (Koordinator does not add the
            // memory a ratio implies before scoring).
            Some(Cand {
                score: ctx.scorer.device(&need.per, &d.total, &free),
                reserved: ctx.reserved_here(kind, d.minor),
                dev: d,
                req,
                vf,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.reserved
            .cmp(&a.reserved)
            .then(b.score.cmp(&a.score))
            .then(a.dev.minor.cmp(&b.dev.minor))
    });
    out
}

/// `filterFreeDevicesByPCIe` (exclusivePolicy PCIeLevel): every device of the type on
/// `d`'s PCIe switch is wholly free.
fn pcie_wholly_free(ctx: &Ctx, kind: &str, devs: &[Dev], d: &Dev) -> bool {
    let Some(pcie) = &d.pcie else {
        return false;
    };
    devs.iter()
        .filter(|o| o.pcie.as_ref() == Some(pcie))
        .all(|o| ctx.free(kind, o) == o.total)
}

/// The tightest PCIe switch, else NUMA node, holding `count` candidates, as positions into
/// `cands` (None: no single group can, or the request is for one device).
fn aligned(cands: &[Cand], count: usize) -> Option<Vec<usize>> {
    if count < 2 {
        return None;
    }
    let scopes: [fn(&Dev) -> Option<String>; 2] =
        [|d| d.pcie.clone(), |d| d.numa.map(|n| n.to_string())];
    for scope in scopes {
        let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, c) in cands.iter().enumerate() {
            if let Some(g) = scope(c.dev) {
                groups.entry(g).or_default().push(i);
            }
        }
        let best = groups
            .into_values()
            .filter(|g| g.len() >= count)
            .min_by_key(|g| (g.len(), g[0]));
        if best.is_some() {
            return best;
        }
    }
    None
}

/// Round-robin over the preferred PCIe switches (one device from each before a second
/// from any), then the rest, keeping each group's order.
fn by_pcie<'a>(cands: Vec<Cand<'a>>, pcies: &BTreeSet<String>) -> Vec<Cand<'a>> {
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut rest = Vec::new();
    for (i, c) in cands.iter().enumerate() {
        match c.dev.pcie.as_deref().filter(|p| pcies.contains(*p)) {
            Some(p) => groups.entry(p).or_default().push(i),
            None => rest.push(i),
        }
    }
    let depth = groups.values().map(Vec::len).max().unwrap_or(0);
    let mut order = Vec::with_capacity(cands.len());
    for level in 0..depth {
        let mut row: Vec<usize> = groups
            .values()
            .filter_map(|g| g.get(level).copied())
            .collect();
        row.sort();
        order.extend(row);
    }
    order.extend(rest);
    let mut slots: Vec<Option<Cand>> = cands.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

fn grant(c: &Cand) -> Granted {
    Granted {
        minor: c.dev.minor,
        id: c.dev.uuid.clone(),
        resources: c.req.clone(),
        vfs: c.vf.clone().into_iter().collect(),
        template: None,
    }
}

/// Devices of one type: at least `need.count`, up to one per preferred PCIe switch.
fn allocate_type(
    ctx: &Ctx,
    kind: &str,
    need: &Need,
    pcies: &BTreeSet<String>,
    at_least: usize,
) -> Result<Vec<Granted>, DeviceError> {
    let wants_vf = ctx.hints.get(kind).is_some_and(|h| h.vf_selector.is_some());
    let has_vfs = ctx
        .devices
        .by_type
        .get(kind)
        .is_some_and(|d| d.iter().any(|d| !d.vf_groups.is_empty()));
    if wants_vf && !has_vfs {
        return Err(DeviceError::Insufficient {
            kind: kind.to_string(),
            what: "VirtualFunctions",
        });
    }
    let mut cands = candidates(ctx, kind, need);
    let want = need.count.max(at_least);
    let most = want.max(pcies.len());
    let reserved_first = cands.first().is_some_and(|c| c.reserved);
    if !pcies.is_empty() {
        cands = by_pcie(cands, pcies);
    } else if !reserved_first && let Some(group) = aligned(&cands, want) {
        let mut slots: Vec<Option<Cand>> = cands.into_iter().map(Some).collect();
        cands = group.into_iter().filter_map(|i| slots[i].take()).collect();
    }
    if cands.len() < want {
        return Err(DeviceError::Insufficient {
            kind: kind.to_string(),
            what: "devices",
        });
    }
    Ok(cands.iter().take(most).map(grant).collect())
}

fn pcies_of(devices: &NodeDevices, kind: &str, granted: &[Granted]) -> BTreeSet<String> {
    granted
        .iter()
        .filter_map(|g| devices.get(kind, g.minor)?.pcie.clone())
        .collect()
}

/// `allocateStrategy: ApplyForAll` (a request for one device's share): one per device of
/// the type on this node that the hint's selector picks; none there is too few.
fn every_device(ctx: &Ctx, kind: &str, need: &Need) -> Result<Need, DeviceError> {
    let Some(h) = ctx
        .hints
        .get(kind)
        .filter(|h| h.is(super::hint::APPLY_FOR_ALL))
    else {
        return Ok(need.clone());
    };
    if need.count > 1 || kind == "gpu" {
        return Ok(need.clone());
    }
    let devs = ctx
        .devices
        .by_type
        .get(kind)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let count = devs
        .iter()
        .filter(|d| h.selector.as_ref().is_none_or(|s| s.matches(&d.labels)))
        .count();
    if count == 0 {
        return Err(DeviceError::Insufficient {
            kind: kind.to_string(),
            what: "devices",
        });
    }
    Ok(Need {
        per: need.per.clone(),
        count,
    })
}

/// The pod's devices on this node, or why it cannot have them there.
pub fn allocate(
    ctx: &Ctx,
    req: &Request,
    joint: Option<&JointAllocate>,
) -> Result<Allocations, DeviceError> {
    let mut out = Allocations::new();
    let for_all = |t: &str| {
        ctx.hints
            .get(t)
            .is_some_and(|h| h.is(super::hint::APPLY_FOR_ALL))
    };
    // A type given every device (ApplyForAll) takes no part in a joint allocation.
    let types: Vec<&String> = joint
        .map(|j| {
            j.device_types
                .iter()
                .filter(|t| req.by_type.contains_key(*t) && !for_all(t))
                .collect()
        })
        .unwrap_or_default();
    if types.len() > 1 {
        let j = joint.expect("types come from the joint rule");
        let primary = types[0];
        let granted = allocate_type(ctx, primary, &req.by_type[primary], &BTreeSet::new(), 0)?;
        let pcies = pcies_of(ctx.devices, primary, &granted);
        out.insert(primary.clone(), granted);
        for kind in &types[1..] {
            let at_least = if j.same_pcie() { pcies.len() } else { 0 };
            let g = allocate_type(ctx, kind, &req.by_type[*kind], &pcies, at_least)?;
            if j.same_pcie() && pcies_of(ctx.devices, kind, &g) != pcies {
                return Err(DeviceError::Joint);
            }
            out.insert((*kind).clone(), g);
        }
    }
    for (kind, need) in &req.by_type {
        if !out.contains_key(kind) {
            let need = every_device(ctx, kind, need)?;
            let g = allocate_type(ctx, kind, &need, &BTreeSet::new(), 0)?;
            out.insert(kind.clone(), g);
        }
    }
    Ok(out)
}

/// The node's device score for this request (before normalisation), summed over types.
pub fn node_score(ctx: &Ctx, req: &Request) -> i64 {
    req.by_type
        .iter()
        .map(|(kind, need)| {
            let Some(devs) = ctx.devices.by_type.get(kind) else {
                return 0;
            };
            let totals: Vec<&DevRes> = devs.iter().map(|d| &d.total).collect();
            let frees: Vec<DevRes> = devs.iter().map(|d| ctx.free(kind, d)).collect();
            ctx.scorer.node(&need.per, &totals, &frees)
        })
        .sum()
}
