//! Batch resources per NUMA zone (Koordinator's `calculateOnNUMALevel`): the node's batch
//! formula once per zone of its NodeResourceTopology, with the zone's allocatable as its
//! capacity, the node's reservation and system usage split evenly over the zones (NUMA-level
//! system usage is not reported), and each high-priority pod counted on the NUMA nodes the
//! scheduler gave it (`resource-status`), or evenly over all zones when it has none.

use k8s_openapi::api::core::v1::Pod;

pub use super::calc::ZoneBatch;
use super::calc::{BatchTerms, Inputs, Res, by_policy, is_active, key, node_basics};
use crate::api::extension::priority::{PriorityClass, pod_priority_class_with_default};
use crate::api::extension::qos::{QoSClass, pod_qos_class_with_default};
use crate::api::extension::resources::{CPU, MEMORY};
use crate::api::pod::{amount, pod_requests};
use crate::api::slo::nodemetric::NodeMetric;
use crate::api::sloconfig::CalculatePolicy;
use crate::api::topology::NodeResourceTopology;

/// Every zone's batch resources, in the NodeResourceTopology's zone order; none without a
/// NodeResourceTopology whose zones report cpu or memory.
pub fn batch_zones(
    inp: &Inputs<'_>,
    metric: &NodeMetric,
    nrt: Option<&NodeResourceTopology>,
) -> Vec<ZoneBatch> {
    let Some(nrt) = nrt.filter(|n| has_zone_resources(n)) else {
        return Vec::new();
    };
    let s = inp.strategy;
    let n = nrt.spec.zones.len() as i64;
    let (_, kubelet, anno) = node_basics(inp.node);
    let system = super::calc::system_used(metric, PriorityClass::Batch).ceil_div(n);
    let reserved = kubelet.max(anno).ceil_div(n);
    let reclaim = Res {
        cpu: s.cpu_reclaim_threshold_percent.unwrap_or(60),
        memory: s.memory_reclaim_threshold_percent.unwrap_or(65),
    };
    let mut zones: Vec<BatchTerms> = nrt
        .spec
        .zones
        .iter()
        .map(|z| {
            let capacity = zone_allocatable(z);
            BatchTerms {
                capacity,
                reclaim_threshold_percent: reclaim,
                safety_margin: capacity.percent(100 - reclaim.cpu, 100 - reclaim.memory),
                node_reserved: reserved,
                system_used: system,
                system_or_reserved: system.max(reserved),
                cpu_policy: CalculatePolicy::parse(s.cpu_calculate_policy.as_deref()),
                memory_policy: CalculatePolicy::parse(s.memory_calculate_policy.as_deref()),
                ..Default::default()
            }
        })
        .collect();
    count_pods(inp, metric, &mut zones);
    nrt.spec
        .zones
        .iter()
        .zip(zones)
        .map(|(z, mut terms)| {
            by_policy(&mut terms, s);
            ZoneBatch {
                zone: z.name.clone(),
                terms,
            }
        })
        .collect()
}

/// Koordinator's `isNRTResourcesCreated`: some zone reports cpu or memory.
fn has_zone_resources(nrt: &NodeResourceTopology) -> bool {
    nrt.spec
        .zones
        .iter()
        .flat_map(|z| z.resources.iter().flatten())
        .any(|r| r.name == CPU || r.name == MEMORY)
}

fn zone_allocatable(z: &crate::api::topology::Zone) -> Res {
    let get = |name: &str| {
        z.resources
            .iter()
            .flatten()
            .find(|r| r.name == name)
            .map_or(0, |r| amount(name, &r.allocatable))
    };
    Res {
        cpu: get(CPU),
        memory: get(MEMORY),
    }
}

/// The high-priority pods' requests and usage on each zone, and the usage of reported pods
/// the list does not show (split evenly).
fn count_pods(inp: &Inputs<'_>, metric: &NodeMetric, zones: &mut [BatchTerms]) {
    let n = zones.len();
    let usage = super::calc::pod_metric_index(metric);
    let mut matched = std::collections::HashSet::new();
    for pod in inp.pods.iter().filter(|p| is_active(p)) {
        let k = key(
            pod.metadata.namespace.as_deref(),
            pod.metadata.name.as_deref(),
        );
        let used = usage.get(&k).copied();
        matched.insert(k);
        if matches!(
            pod_priority_class_with_default(pod),
            PriorityClass::Batch | PriorityClass::Free
        ) {
            continue;
        }
        let request = Res::from_amounts(&pod_requests(pod));
        let on = numa_nodes(pod, n);
        let share = |r: Res, z: usize| match on.is_empty() {
            true => r.ceil_div(n as i64),
            false if on.contains(&z) => r.ceil_div(on.len() as i64),
            false => Res::default(),
        };
        let lse = pod_qos_class_with_default(pod) == QoSClass::Lse;
        for (z, t) in zones.iter_mut().enumerate() {
            let req = share(request, z);
            let use_ = share(used.unwrap_or(request), z);
            t.pods_counted += 1;
            t.hp_request = t.hp_request.add(req);
            let (counted, max) = match used {
                None => (req, req),
                // LSE pods keep their CPUs: the request counts, not the usage.
                Some(_) if lse => (
                    Res {
                        cpu: req.cpu,
                        ..use_
                    },
                    use_.max(req),
                ),
                Some(_) => (use_, use_.max(req)),
            };
            t.hp_used = t.hp_used.add(counted);
            t.hp_max_used_request = t.hp_max_used_request.add(max);
        }
    }
    for (used, class) in super::calc::dangling(metric, &matched) {
        if matches!(class, PriorityClass::Batch | PriorityClass::Free) {
            continue;
        }
        for t in zones.iter_mut() {
            t.dangling_metrics += 1;
            t.hp_used = t.hp_used.add(used.ceil_div(n as i64));
            t.hp_max_used_request = t.hp_max_used_request.add(used.ceil_div(n as i64));
        }
    }
}

/// The zones (NUMA node ids below `n`) the scheduler placed the pod on; empty: all.
fn numa_nodes(pod: &Pod, n: usize) -> Vec<usize> {
    let Ok(status) = crate::api::extension::resourcestatus::resource_status(pod) else {
        return Vec::new();
    };
    let mut on: Vec<usize> = status
        .numa_node_resources
        .iter()
        .flatten()
        .filter_map(|r| usize::try_from(r.node).ok())
        .filter(|z| *z < n)
        .collect();
    on.sort_unstable();
    on.dedup();
    on
}

#[cfg(test)]
#[path = "zones_tests.rs"]
mod tests;
