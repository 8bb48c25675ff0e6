//! NodeResource controller (`pkg/slo-controller/noderesource/`): batch and mid resources on each node's status.

pub mod calc;
pub mod device;
pub mod normalization;
pub mod prepare;
pub mod zone_list;
pub mod zones;

#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::api::extension::keys::ANNOTATION_NODE_ORIGIN_EXTENDED_ALLOCATABLE;
use crate::api::slo::NodeMetric;
use crate::api::sloconfig::SloConfig;
pub use calc::{Calculation, Inputs, calculate};
pub use device::DeviceInputs;
pub use prepare::{Desired, current, desired, differs, status_patch};

/// What to write for one node, if anything.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub calc: Calculation,
    pub want: Desired,
    /// Merge patch for `nodes/<name>/status`, when the status needs a write.
    pub status: Option<serde_json::Value>,
    /// Merge patch for the node's metadata (origin annotation, GPU labels), when it changed.
    pub meta: Option<serde_json::Value>,
    /// The NodeResourceTopology's zones with their batch resources, when they changed
    /// beyond the diff threshold: (resourceVersion read, zones).
    pub nrt_zones: Option<(Option<String>, Vec<crate::api::topology::Zone>)>,
}

/// Decides one node: the calculation, then the diff/forced-refresh rules (`NeedSync` in
/// `pkg/slo-controller/noderesource/`).
/// `last_sync_ms` is when this node's status was last written successfully.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    node: &Node,
    pods: &[&Pod],
    metric: Option<&NodeMetric>,
    devices: &DeviceInputs,
    nrt: Option<&crate::api::topology::NodeResourceTopology>,
    cfg: &SloConfig,
    now_ms: i64,
    last_sync_ms: Option<i64>,
) -> Plan {
    let s = cfg.colocation.for_node(node);
    let inputs = Inputs {
        node,
        pods,
        metric,
        config: &cfg.colocation,
        strategy: &s,
        now_ms,
    };
    let mut calc = calculate(&inputs);
    if calc.batch.is_some()
        && let Some(m) = metric
    {
        calc.batch_zones = zones::batch_zones(&inputs, m, nrt);
    }
    let (mut want, origin) = desired(&calc, node);
    want.extend(device::desired(devices));
    let threshold = s.resource_diff_threshold.unwrap_or(0.1);
    let refresh_ms = s.update_time_threshold_seconds.unwrap_or(300) * 1000;
    let stale = last_sync_ms.is_none_or(|t| now_ms - t > refresh_ms);
    let status = (stale || differs(&current(node), &want, threshold)).then(|| status_patch(&want));
    let meta = meta_patch(
        origin_annotation(node, &origin),
        device::labels_to_set(devices, node),
        normalization::meta_changes(node, nrt, cfg),
    );
    let nrt_zones = nrt_zones(node, nrt, &calc, threshold);
    Plan {
        calc,
        want,
        status,
        meta,
        nrt_zones,
    }
}

/// The NodeResourceTopology's zones to write, when the zone results moved (Koordinator
/// leaves the NodeResourceTopology alone when no zone was calculated).
fn nrt_zones(
    node: &Node,
    nrt: Option<&crate::api::topology::NodeResourceTopology>,
    calc: &Calculation,
    threshold: f64,
) -> Option<(Option<String>, Vec<crate::api::topology::Zone>)> {
    let nrt = nrt.filter(|_| !calc.batch_zones.is_empty())?;
    let ratio = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::api::extension::keys::ANNOTATION_NODE_CPU_NORMALIZATION_RATIO))
        .and_then(|r| r.parse::<f64>().ok())
        .unwrap_or(-1.0);
    let zones = zone_list::updated(&nrt.spec.zones, &calc.batch_zones, ratio, threshold)?;
    Some((nrt.metadata.resource_version.clone(), zones))
}

/// The node's metadata merge patch: annotations set (or removed: null) and labels.
fn meta_patch(
    origin: Option<String>,
    labels: std::collections::BTreeMap<String, String>,
    annotations: std::collections::BTreeMap<&'static str, Option<String>>,
) -> Option<serde_json::Value> {
    if origin.is_none() && labels.is_empty() && annotations.is_empty() {
        return None;
    }
    let mut meta = serde_json::Map::new();
    let mut set: serde_json::Map<String, serde_json::Value> = annotations
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
        .collect();
    if let Some(v) = origin {
        set.insert(ANNOTATION_NODE_ORIGIN_EXTENDED_ALLOCATABLE.into(), v.into());
    }
    if !set.is_empty() {
        meta.insert("annotations".into(), serde_json::Value::Object(set));
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), serde_json::json!(labels));
    }
    Some(serde_json::json!({ "metadata": meta }))
}

/// The new `originExtendedAllocatable` value, when it changed.
fn origin_annotation(node: &Node, origin: &Desired) -> Option<String> {
    if origin.is_empty() {
        return None;
    }
    let resources: serde_json::Map<String, serde_json::Value> = origin
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string().into()))
        .collect();
    let wanted = serde_json::json!({ "resources": resources });
    let value = wanted.to_string();
    let old = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_ORIGIN_EXTENDED_ALLOCATABLE));
    let same = old
        .and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
        .is_some_and(|o| o == wanted);
    (!same).then_some(value)
}
