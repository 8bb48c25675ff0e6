//! What Koordinator's scheduler does to nodes and pods as its informers receive them
//! (`pkg/util/transformer`): a node's allocatable less what its
//! `node.koordinator.sh/reservation` annotation holds back, and deprecated resource names
//! (`koordinator.sh/batch-cpu`, `kubernetes.io/gpu-core`, …) renamed to today's, and a pod's
//! `scheduling.koordinator.sh/scheduler-name` label taking the place of its
//! `spec.schedulerName`. Applied in `ClusterState` (and to each pod as it arrives), so the
//! live scheduler and `koord explain` see the same objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::extension::keys;
use crate::api::extension::nodereservation::NodeReservation;
use crate::api::extension::resources::{
    BATCH_CPU, BATCH_MEMORY, FPGA, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, KOORD_GPU, RDMA,
};
use crate::api::pod::{amount, resource_list};

/// Deprecated name → today's (`DeprecatedBatchResourcesMapper`, `DeprecatedDeviceResourcesMapper`).
pub const DEPRECATED: [(&str, &str); 8] = [
    ("koordinator.sh/batch-cpu", BATCH_CPU),
    ("koordinator.sh/batch-memory", BATCH_MEMORY),
    ("kubernetes.io/rdma", RDMA),
    ("kubernetes.io/fpga", FPGA),
    ("kubernetes.io/gpu", KOORD_GPU),
    ("kubernetes.io/gpu-core", GPU_CORE),
    ("kubernetes.io/gpu-memory", GPU_MEMORY),
    ("kubernetes.io/gpu-memory-ratio", GPU_MEMORY_RATIO),
];

/// `replaceAndEraseResource` for every mapping: the old name's amount moves to the new one
/// unless the new one is there already. True when something moved.
pub fn rename_deprecated<V>(list: &mut BTreeMap<String, V>) -> bool {
    let mut changed = false;
    for (from, to) in DEPRECATED {
        if list.contains_key(to) {
            continue;
        }
        if let Some(v) = list.remove(from) {
            list.insert(to.to_string(), v);
            changed = true;
        }
    }
    changed
}

fn has_deprecated<V>(list: Option<&BTreeMap<String, V>>) -> bool {
    list.is_some_and(|l| DEPRECATED.iter().any(|(from, _)| l.contains_key(*from)))
}

/// Whether [`transform_node`] would change the node (so an unchanged one is not copied).
pub fn node_needs(node: &Node) -> bool {
    let status = node.status.as_ref();
    has_deprecated(status.and_then(|s| s.allocatable.as_ref()))
        || has_deprecated(status.and_then(|s| s.capacity.as_ref()))
        || NodeReservation::parse(node.metadata.annotations.as_ref()).is_some()
}

/// `TransformNodeWithNodeReservation` and the deprecated-name transformers.
pub fn transform_node(node: &mut Node) {
    let reservation = NodeReservation::parse(node.metadata.annotations.as_ref());
    let Some(status) = node.status.as_mut() else {
        return;
    };
    for list in [status.allocatable.as_mut(), status.capacity.as_mut()]
        .into_iter()
        .flatten()
    {
        rename_deprecated(list);
    }
    let trims = reservation.filter(|r| {
        r.apply_policy
            .as_deref()
            .is_none_or(|p| p.is_empty() || p == "Default")
    });
    if let (Some(r), Some(alloc)) = (trims, status.allocatable.as_mut()) {
        trim(alloc, &r);
    }
}

/// Allocatable less the reserved resources, floored at 0; batch resources are kept (the
/// manager already subtracted the reservation from them).
fn trim(alloc: &mut BTreeMap<String, Quantity>, r: &NodeReservation) {
    for (name, held) in r.resources() {
        if name == BATCH_CPU || name == BATCH_MEMORY {
            continue;
        }
        let Some(q) = alloc.get(&name) else {
            continue;
        };
        let left = (amount(&name, q) - held).max(0);
        let one = BTreeMap::from([(name.clone(), left)]);
        if let Some(q) = resource_list(&one).remove(&name) {
            alloc.insert(name, q);
        }
    }
}

/// The scheduler profile a pod asks for: its `scheduling.koordinator.sh/scheduler-name`
/// label when it has one, else `spec.schedulerName` (Koordinator's `GetSchedulerName`).
pub fn scheduler_name(pod: &Pod) -> &str {
    let label = pod.metadata.labels.as_ref();
    if let Some(name) = label.and_then(|l| l.get(keys::LABEL_SCHEDULER_NAME)) {
        return name;
    }
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler")
}

fn spec_scheduler_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref())
}

/// `TransformSchedulerName`: the label's profile in `spec.schedulerName`, the original kept
/// in `internal.scheduling.koordinator.sh/original-scheduler-name` when they differ.
fn transform_scheduler_name(pod: &mut Pod) {
    let wanted = scheduler_name(pod).to_string();
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if spec.scheduler_name.as_deref() == Some(wanted.as_str()) {
        return;
    }
    let original = spec.scheduler_name.replace(wanted).unwrap_or_default();
    let annotations = pod.metadata.annotations.get_or_insert_default();
    annotations.insert(
        keys::ANNOTATION_ORIGINAL_SCHEDULER_NAME.to_string(),
        original,
    );
}

/// A pod as JSON the way the API server holds it: `TransformSchedulerName` undone (the
/// original `spec.schedulerName` back, its annotation gone, and an annotation map left
/// empty by that removed), so a patch computed between two cached copies applies there.
pub fn untransformed(pod: &mut serde_json::Value) {
    let meta = &mut pod["metadata"];
    let Some(annotations) = meta.get_mut("annotations").and_then(|a| a.as_object_mut()) else {
        return;
    };
    let Some(original) = annotations.remove(keys::ANNOTATION_ORIGINAL_SCHEDULER_NAME) else {
        return;
    };
    if annotations.is_empty() {
        meta.as_object_mut().map(|m| m.remove("annotations"));
    }
    if let Some(spec) = pod.get_mut("spec").and_then(|s| s.as_object_mut()) {
        spec.insert("schedulerName".into(), original);
    }
}

/// Whether [`transform_pod`] would change the pod.
pub fn pod_needs(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let label = pod.metadata.labels.as_ref();
    if label
        .and_then(|l| l.get(keys::LABEL_SCHEDULER_NAME))
        .is_some_and(|n| spec_scheduler_name(pod) != Some(n.as_str()))
    {
        return true;
    }
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .filter_map(|c| c.resources.as_ref())
        .any(|r| has_deprecated(r.requests.as_ref()) || has_deprecated(r.limits.as_ref()))
        || has_deprecated(spec.overhead.as_ref())
}

/// `TransformDeprecatedBatchResources` / `TransformDeprecatedDeviceResources` on the
/// containers' requests and limits and the overhead; `TransformSchedulerName`.
pub fn transform_pod(pod: &mut Pod) {
    transform_scheduler_name(pod);
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        if let Some(r) = c.resources.as_mut() {
            r.requests.as_mut().map(rename_deprecated);
            r.limits.as_mut().map(rename_deprecated);
        }
    }
    spec.overhead.as_mut().map(rename_deprecated);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_reservation_and_deprecated_names() {
        let mut node: Node = serde_json::from_value(json!({"metadata": {"name": "n", "annotations": {
            "node.koordinator.sh/reservation": r#"{"resources": {"cpu": "2", "memory": "1Gi"}}"#}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "koordinator.sh/batch-cpu": "4000",
                "kubernetes.io/gpu-core": "200"}}})).unwrap();
        assert!(node_needs(&node));
        transform_node(&mut node);
        let a = node.status.unwrap().allocatable.unwrap();
        assert_eq!(amount("cpu", &a["cpu"]), 6000, "8 − 2 held back");
        assert_eq!(amount("memory", &a["memory"]), 15 << 30);
        assert_eq!(
            amount(BATCH_CPU, &a[BATCH_CPU]),
            4000,
            "renamed, not trimmed"
        );
        assert_eq!(amount(GPU_CORE, &a[GPU_CORE]), 200);
        assert!(!a.contains_key("kubernetes.io/gpu-core"));
        let mut cpus_only: Node = serde_json::from_value(json!({"metadata": {"name": "n", "annotations": {
            "node.koordinator.sh/reservation": r#"{"reservedCPUs": "0-1", "applyPolicy": "ReservedCPUsOnly"}"#}},
            "status": {"allocatable": {"cpu": "8"}}})).unwrap();
        transform_node(&mut cpus_only);
        let a = cpus_only.status.unwrap().allocatable.unwrap();
        assert_eq!(
            amount("cpu", &a["cpu"]),
            8000,
            "ReservedCPUsOnly does not trim"
        );
    }

    /// Koordinator's TestTransformSchedulerName.
    #[test]
    fn transform_scheduler_name() {
        let label = keys::LABEL_SCHEDULER_NAME;
        let original = keys::ANNOTATION_ORIGINAL_SCHEDULER_NAME;
        for (name, labels, want, saved) in [
            (
                "label overrides spec, saves original",
                json!({label: "koord-scheduler"}),
                "koord-scheduler",
                Some("default-scheduler"),
            ),
            (
                "no label, no change, no annotation",
                json!(null),
                "default-scheduler",
                None,
            ),
            (
                "label same as spec, no annotation needed",
                json!({label: "default-scheduler"}),
                "default-scheduler",
                None,
            ),
        ] {
            let mut pod: Pod =
                serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels},
                "spec": {"schedulerName": "default-scheduler", "containers": []}}))
                .unwrap();
            assert_eq!(scheduler_name(&pod), want, "{name}");
            assert_eq!(pod_needs(&pod), saved.is_some(), "{name}");
            transform_pod(&mut pod);
            assert_eq!(spec_scheduler_name(&pod), Some(want), "{name}");
            let kept = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(original));
            assert_eq!(kept.map(String::as_str), saved, "{name}");
            assert!(!pod_needs(&pod), "{name}: once is enough");
        }
    }

    #[test]
    fn a_patch_between_cached_copies_applies_to_the_stored_pod() {
        let stored = json!({"metadata": {"name": "p", "labels": {keys::LABEL_SCHEDULER_NAME: "koord-scheduler"}},
            "spec": {"schedulerName": "default-scheduler", "containers": []}});
        let mut cached: Pod = serde_json::from_value(stored.clone()).unwrap();
        transform_pod(&mut cached);
        let mut before = serde_json::to_value(&cached).unwrap();
        let mut after = before.clone();
        after["metadata"]["annotations"]["x"] = "y".into();
        untransformed(&mut before);
        untransformed(&mut after);
        let stored: Pod = serde_json::from_value(stored).unwrap();
        assert_eq!(before, serde_json::to_value(&stored).unwrap());
        let mut patched = before.clone();
        json_patch::patch(&mut patched, &json_patch::diff(&before, &after)).unwrap();
        assert_eq!(patched["metadata"]["annotations"], json!({"x": "y"}));
        assert_eq!(patched["spec"]["schedulerName"], "default-scheduler");
    }

    #[test]
    fn pods_keep_the_new_name_when_both_are_given() {
        let mut pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "resources": {"requests": {"koordinator.sh/batch-cpu": "1000", "kubernetes.io/rdma": "100"}}},
            {"name": "b", "resources": {"requests": {"koordinator.sh/batch-cpu": "1", BATCH_CPU: "2"}}}]}}))
        .unwrap();
        assert!(pod_needs(&pod));
        transform_pod(&mut pod);
        let spec = pod.spec.unwrap();
        let req = |i: usize| {
            spec.containers[i]
                .resources
                .clone()
                .unwrap()
                .requests
                .unwrap()
        };
        assert_eq!(req(0).keys().collect::<Vec<_>>(), [RDMA, BATCH_CPU]);
        assert_eq!(req(1)[BATCH_CPU].0, "2", "the new name wins; the old stays");
        assert!(req(1).contains_key("koordinator.sh/batch-cpu"));
    }
}
