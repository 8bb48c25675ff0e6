//! From a calculation to what the node should carry (the plugins' `Prepare`, e.g.
//! `pkg/slo-controller/noderesource/plugins/batchresource/plugin.go`) and whether the node
//! needs a write (`NeedSync` there and in `noderesource_controller.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::calc::Calculation;
use crate::api::extension::keys::{
    ANNOTATION_NODE_CPU_NORMALIZATION_RATIO, ANNOTATION_NODE_THIRD_PARTY_ALLOCATIONS,
};
use crate::api::extension::resources::{
    BATCH_CPU, BATCH_MEMORY, GPU_RESOURCES, MID_CPU, MID_MEMORY, RDMA,
};
use crate::api::quantity::q_milli;

/// The extended resources the controller manages: batch, mid, then the device plugins'.
pub const MANAGED: [&str; 13] = [
    BATCH_CPU,
    BATCH_MEMORY,
    MID_CPU,
    MID_MEMORY,
    GPU_RESOURCES[0],
    GPU_RESOURCES[1],
    GPU_RESOURCES[2],
    GPU_RESOURCES[3],
    GPU_RESOURCES[4],
    GPU_RESOURCES[5],
    GPU_RESOURCES[6],
    GPU_RESOURCES[7],
    RDMA,
];

/// Resource name → value to write (`*-cpu` milli-cores, `*-memory` bytes); a managed
/// resource that is absent is removed from the node.
pub type Desired = BTreeMap<&'static str, i64>;

/// What the controller would write: normalization ratio on batch-cpu, then batch
/// allocations of third parties subtracted. Also returns the origin values recorded in
/// `node.koordinator.sh/originExtendedAllocatable` (before the subtraction).
pub fn desired(calc: &Calculation, node: &Node) -> (Desired, Desired) {
    let mut out = Desired::new();
    if let Some(b) = &calc.batch {
        let ratio = normalization_ratio(node);
        let cpu = if ratio > 1.0 {
            (b.result.cpu as f64 * ratio) as i64
        } else {
            b.result.cpu
        };
        out.insert(BATCH_CPU, cpu);
        out.insert(BATCH_MEMORY, b.result.memory);
    }
    if let Some(m) = &calc.mid {
        out.insert(MID_CPU, m.result.cpu);
        out.insert(MID_MEMORY, m.result.memory);
    }
    let origin: Desired = out
        .iter()
        .filter(|(k, _)| **k == BATCH_CPU || **k == BATCH_MEMORY)
        .map(|(k, v)| (*k, (*v).max(0)))
        .collect();
    for (name, used) in third_party_batch(node) {
        if let Some(v) = out.get_mut(name) {
            *v = (*v - used).max(0);
        }
    }
    (out, origin)
}

fn normalization_ratio(node: &Node) -> f64 {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_CPU_NORMALIZATION_RATIO))
        .and_then(|r| r.trim().parse::<f64>().ok())
        .filter(|r| r.is_finite())
        .unwrap_or(1.0)
}

/// Σ batch resources of `koord-batch` entries in `node.koordinator.sh/thirdPartyAllocations`.
fn third_party_batch(node: &Node) -> Vec<(&'static str, i64)> {
    #[derive(serde::Deserialize)]
    struct Allocations {
        allocations: Option<Vec<Allocation>>,
    }
    #[derive(serde::Deserialize)]
    struct Allocation {
        priority: Option<String>,
        resources: Option<BTreeMap<String, Quantity>>,
    }
    let raw = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_THIRD_PARTY_ALLOCATIONS));
    let Some(parsed) = raw.and_then(|r| serde_json::from_str::<Allocations>(r).ok()) else {
        return Vec::new();
    };
    let mut sums = Vec::new();
    for name in [BATCH_CPU, BATCH_MEMORY] {
        let total: i64 = parsed
            .allocations
            .iter()
            .flatten()
            .filter(|a| a.priority.as_deref() == Some("koord-batch"))
            .filter_map(|a| a.resources.as_ref()?.get(name))
            .map(|q| q_milli(q) / 1000)
            .sum();
        if total > 0 {
            sums.push((name, total));
        }
    }
    sums
}

/// The managed resources as the node's allocatable has them now.
pub fn current(node: &Node) -> Desired {
    let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    MANAGED
        .iter()
        .filter_map(|name| {
            alloc
                .and_then(|a| a.get(*name))
                .map(|q| (*name, q_milli(q) / 1000))
        })
        .collect()
}

/// Whether the change is worth a write: presence changed, or a value moved by more than
/// `threshold` of its old value (strict, so old 0 and new ≠ 0 is a change).
pub fn differs(old: &Desired, new: &Desired, threshold: f64) -> bool {
    MANAGED
        .iter()
        .any(|name| match (old.get(name), new.get(name)) {
            (None, None) => false,
            (Some(_), None) | (None, Some(_)) => true,
            (Some(o), Some(n)) => ((n - o).abs() as f64) > (*o as f64) * threshold,
        })
}

/// The JSON merge patch for `nodes/<name>/status` that makes capacity and allocatable
/// carry exactly `want` for the managed resources.
pub fn status_patch(want: &Desired) -> serde_json::Value {
    let mut list = serde_json::Map::new();
    for name in MANAGED {
        let v = want
            .get(name)
            .map_or(serde_json::Value::Null, |v| v.to_string().into());
        list.insert(name.to_string(), v);
    }
    serde_json::json!({"status": {"capacity": list.clone(), "allocatable": list}})
}
