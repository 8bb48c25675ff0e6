//! `TestRemovePodsViolatingNodeAffinity`.

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::{count, spare};
use crate::descheduler::testkit::*;

#[test]
fn remove_pods_violating_node_affinity() {
    const KEY: &str = "kubernetes.io/desiredNode";
    let labelled = || {
        node(
            "nodeWithLabels",
            2000,
            3000,
            10,
            json!({"metadata": {"labels": {KEY: "yes"}}}),
        )
    };
    let bare = || node("nodeWithoutLabels", 2000, 3000, 10, json!({}));
    let term = json!({"matchExpressions": [{"key": KEY, "operator": "In", "values": ["yes"]}]});
    // `addPodsToNode`: the pod with the affinity, and two plain ones, all owned.
    let on = |node_name: &str, deleting: bool, kind: &str| -> Vec<Pod> {
        let affinity = match kind {
            "requiredDuringSchedulingIgnoredDuringExecution" => {
                json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term.clone()]}})
            }
            "preferredDuringSchedulingIgnoredDuringExecution" => {
                json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": term.clone()}]})
            }
            _ => json!({}),
        };
        let del = if deleting {
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
        } else {
            json!({})
        };
        vec![
            pod(
                "podWithNodeAffinity",
                100,
                0,
                node_name,
                with(&[
                    pod_owner(),
                    del.clone(),
                    json!({"spec": {"affinity": {"nodeAffinity": affinity}}}),
                ]),
            ),
            pod("pod1", 100, 0, node_name, with(&[pod_owner(), del.clone()])),
            pod("pod2", 100, 0, node_name, with(&[pod_owner(), del])),
        ]
    };
    let req = "requiredDuringSchedulingIgnoredDuringExecution";
    let pref = "preferredDuringSchedulingIgnoredDuringExecution";
    let args = |t: &str| json!({"nodeAffinityType": [t]});
    let both = || vec![bare(), labelled()];
    let lim = |k: &str, v: u32| json!({k: v});
    // `nodefit: true` (DefaultEvictor's); carried in the limits column, split off below.
    let fit = || json!({"nodeFit": true});
    let unschedulable_labelled = || {
        let extra = json!({"metadata": {"labels": {KEY: "yes"}}, "spec": {"unschedulable": true}});
        node("unschedulableNodeWithLabels", 2000, 3000, 10, extra)
    };
    let cases: Vec<(&str, Value, Vec<Pod>, Vec<Node>, Value, usize)> = vec![
        (
            "Invalid Affinity type, should not evict any pods",
            args("requiredDuringSchedulingRequiredDuringExecution"),
            on(
                "nodeWithoutLabels",
                false,
                "requiredDuringSchedulingRequiredDuringExecution",
            ),
            both(),
            json!({}),
            0,
        ),
        (
            "Pod is correctly scheduled on node, no eviction expected [required affinity]",
            args(req),
            on("nodeWithLabels", false, req),
            vec![labelled(), spare()],
            json!({}),
            0,
        ),
        (
            "Pod is correctly scheduled on node, no eviction expected [preferred affinity]",
            args(pref),
            on("nodeWithLabels", false, pref),
            vec![labelled(), spare()],
            json!({}),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, should be evicted",
            args(req),
            on("nodeWithoutLabels", false, req),
            both(),
            json!({}),
            1,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available with better fit, should be evicted",
            args(pref),
            on("nodeWithoutLabels", false, pref),
            both(),
            json!({}),
            1,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxPodsToEvictPerNode set to 1, should be evicted [required affinity]",
            args(req),
            on("nodeWithoutLabels", false, req),
            both(),
            lim("maxNoOfPodsToEvictPerNode", 1),
            1,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxPodsToEvictPerNode set to 1, should be evicted [preferred affinity]",
            args(pref),
            on("nodeWithoutLabels", false, pref),
            both(),
            lim("maxNoOfPodsToEvictPerNode", 1),
            1,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxPodsToEvictPerNode set to 0, should be not evicted [required affinity]",
            args(req),
            on("nodeWithoutLabels", false, req),
            both(),
            lim("maxNoOfPodsToEvictPerNode", 0),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxPodsToEvictPerNode set to 0, should be not evicted [preferred affinity]",
            args(pref),
            on("nodeWithoutLabels", false, pref),
            both(),
            lim("maxNoOfPodsToEvictPerNode", 0),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxPodsToEvictPerNode set to 1, no pod evicted since pod terminating [required affinity]",
            args(req),
            on("nodeWithoutLabels", true, req),
            both(),
            lim("maxNoOfPodsToEvictPerNode", 1),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxPodsToEvictPerNode set to 1, no pod evicted since pod terminating [preferred affinity]",
            args(pref),
            on("nodeWithoutLabels", true, pref),
            both(),
            lim("maxNoOfPodsToEvictPerNode", 1),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxNoOfPodsToEvictPerNamespace set to 1, should be evicted [required affinity]",
            args(req),
            on("nodeWithoutLabels", false, req),
            both(),
            lim("maxNoOfPodsToEvictPerNamespace", 1),
            1,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxNoOfPodsToEvictTotal set to 0, should not be evicted [required affinity]",
            args(req),
            on("nodeWithoutLabels", false, req),
            both(),
            json!({"maxNoOfPodsToEvictPerNamespace": 1, "maxNoOfPodsToEvictTotal": 0}),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxNoOfPodsToEvictPerNamespace set to 1, should be evicted [preferred affinity]",
            args(pref),
            on("nodeWithoutLabels", false, pref),
            both(),
            lim("maxNoOfPodsToEvictPerNamespace", 1),
            1,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxNoOfPodsToEvictPerNamespace set to 0, should not be evicted [required affinity]",
            args(req),
            on("nodeWithoutLabels", false, req),
            both(),
            lim("maxNoOfPodsToEvictPerNamespace", 0),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxNoOfPodsToEvictPerNamespace set to 0, should not be evicted [preferred affinity]",
            args(pref),
            on("nodeWithoutLabels", false, pref),
            both(),
            lim("maxNoOfPodsToEvictPerNamespace", 0),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxNoOfPodsToEvictPerNamespace set to 1, no pod evicted since pod terminting [required affinity]",
            args(req),
            on("nodeWithoutLabels", true, req),
            both(),
            lim("maxNoOfPodsToEvictPerNamespace", 1),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, another schedulable node available, maxNoOfPodsToEvictPerNamespace set to 1, no pod evicted since pod terminting [preferred affinity]",
            args(pref),
            on("nodeWithoutLabels", true, pref),
            both(),
            lim("maxNoOfPodsToEvictPerNamespace", 1),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, but no node where pod fits is available, should not evict [required affinity]",
            args(req),
            on("nodeWithoutLabels", false, req),
            vec![bare(), unschedulable_labelled()],
            fit(),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, but no node where pod fits is available, should not evict [preferred affinity]",
            args(pref),
            on("nodeWithoutLabels", false, pref),
            vec![bare(), unschedulable_labelled()],
            fit(),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, and unschedulable node where pod could fit is available, should not evict [required affinity]",
            args(req),
            on("nodeWithoutLabels", false, req),
            vec![labelled(), unschedulable_labelled()],
            with(&[fit(), lim("maxNoOfPodsToEvictPerNode", 1)]),
            0,
        ),
        (
            "Pod is scheduled on node without matching labels, and unschedulable node where pod could fit is available, should not evict [preferred affinity]",
            args(pref),
            on("nodeWithoutLabels", false, pref),
            vec![labelled(), unschedulable_labelled()],
            with(&[fit(), lim("maxNoOfPodsToEvictPerNode", 1)]),
            0,
        ),
    ];
    for (description, a, pods, nodes, mut top, want) in cases {
        let node_fit = top.as_object_mut().and_then(|o| o.remove("nodeFit"));
        let evictor = json!({"nodeFit": node_fit.unwrap_or(json!(false))});
        let got = count(
            "RemovePodsViolatingNodeAffinity",
            a,
            evictor,
            top,
            nodes,
            pods,
        );
        assert_eq!(got, want, "{description}");
    }
}
