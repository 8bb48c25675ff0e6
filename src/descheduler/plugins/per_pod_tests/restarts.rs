//! `TestRemovePodsHavingTooManyRestarts`.

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::{count, spare};
use crate::descheduler::testkit::*;

/// `initPods`: pod-i (i = 0..9) with 5i restarts in its init container and 10i in each of
/// two containers; pod-6 DaemonSet, pod-7 local storage, pod-8 mirror; two CPU consumers.
fn restart_pods(apply: &dyn Fn(usize) -> Value) -> Vec<Pod> {
    let status = |i: i32| {
        let c = |n: &str, r: i32| json!({"name": n, "image": "", "imageID": "", "ready": true, "restartCount": r});
        json!({"status": {"initContainerStatuses": [c("i", 5 * i)], "containerStatuses": [c("a", 10 * i), c("b", 10 * i)]}})
    };
    let hostpath = json!({"spec": {"volumes": [{"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {"sizeLimit": "10"}}]}});
    let mut v: Vec<Pod> = (0..=9)
        .map(|i| {
            let owner = match i {
                6 => ds_owner(),
                7 => with(&[pod_owner(), hostpath.clone()]),
                8 => mirror(),
                _ => pod_owner(),
            };
            pod(
                &format!("pod-{i}"),
                100,
                0,
                "node1",
                with(&[owner, status(i as i32), apply(i)]),
            )
        })
        .collect();
    v.push(pod("CPU-consumer-1", 150, 100, "node4", pod_owner()));
    v.push(pod("CPU-consumer-2", 150, 100, "node5", pod_owner()));
    v
}

#[test]
fn remove_pods_having_too_many_restarts() {
    let n = |name: &str, extra: Value| node(name, 2000, 3000, 10, extra);
    let plain = |_: usize| json!({});
    let one = || vec![n("node1", json!({})), spare()];
    let args =
        |t: i32, init: bool| json!({"podRestartThreshold": t, "includingInitContainers": init});
    let per_node = |m: u32| json!({"maxNoOfPodsToEvictPerNode": m});
    // The first container's state becomes CrashLoopBackOff; the restart counts stay.
    let crash = |i: usize| {
        let r = 10 * i as i32;
        json!({"status": {"containerStatuses": [
            {"name": "a", "image": "", "imageID": "", "ready": false, "restartCount": r, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
            {"name": "b", "image": "", "imageID": "", "ready": true, "restartCount": r}]}})
    };
    let phase = |p: &'static str| move |_: usize| json!({"status": {"phase": p}});
    let cases: Vec<(&str, Value, Vec<Pod>, Vec<Node>, Value, bool, usize)> = vec![
        (
            "All pods have total restarts under threshold, no pod evictions",
            args(10000, true),
            restart_pods(&plain),
            one(),
            json!({}),
            false,
            0,
        ),
        (
            "Some pods have total restarts bigger than threshold",
            args(1, true),
            restart_pods(&plain),
            one(),
            json!({}),
            false,
            6,
        ),
        (
            "Nine pods have total restarts equals threshold(includingInitContainers=true), 6 pod evictions",
            args(25, true),
            restart_pods(&plain),
            one(),
            json!({}),
            false,
            6,
        ),
        (
            "Nine pods have total restarts equals threshold(includingInitContainers=false), 5 pod evictions",
            args(25, false),
            restart_pods(&plain),
            one(),
            json!({}),
            false,
            5,
        ),
        (
            "All pods have total restarts equals threshold(includingInitContainers=true), 6 pod evictions",
            args(20, true),
            restart_pods(&plain),
            one(),
            json!({}),
            false,
            6,
        ),
        (
            "Nine pods have total restarts equals threshold(includingInitContainers=false), 6 pod evictions",
            args(20, false),
            restart_pods(&plain),
            one(),
            json!({}),
            false,
            6,
        ),
        (
            "Five pods have total restarts bigger than threshold(includingInitContainers=true), but only 1 pod eviction",
            args(5 * 25 + 1, true),
            restart_pods(&plain),
            one(),
            json!({}),
            false,
            1,
        ),
        (
            "Five pods have total restarts bigger than threshold(includingInitContainers=false), but only 1 pod eviction",
            args(5 * 20 + 1, false),
            restart_pods(&plain),
            one(),
            json!({}),
            false,
            1,
        ),
        (
            "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3), 3 pod evictions",
            args(1, true),
            restart_pods(&plain),
            one(),
            per_node(3),
            false,
            3,
        ),
        (
            "All pods have total restarts equals threshold(maxNoOfPodsToEvictPerNamespace=3), 3 pod evictions",
            args(1, true),
            restart_pods(&plain),
            one(),
            json!({"maxNoOfPodsToEvictPerNamespace": 3}),
            false,
            3,
        ),
        (
            "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3) but the only other node is tainted, 0 pod evictions",
            args(1, true),
            restart_pods(&plain),
            vec![
                n("node1", json!({})),
                n(
                    "node2",
                    json!({"spec": {"taints": [{"key": "hardware", "value": "gpu", "effect": "NoSchedule"}]}}),
                ),
            ],
            per_node(3),
            true,
            0,
        ),
        (
            "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3) but the only other node is not schedulable, 0 pod evictions",
            args(1, true),
            restart_pods(&plain),
            vec![
                n("node1", json!({})),
                n("node3", json!({"spec": {"unschedulable": true}})),
            ],
            per_node(3),
            true,
            0,
        ),
        (
            "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3) but the only other node does not have enough CPU, 0 pod evictions",
            args(1, true),
            restart_pods(&plain),
            vec![
                n("node1", json!({})),
                node("node4", 200, 3000, 10, json!({})),
            ],
            per_node(3),
            true,
            0,
        ),
        (
            "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3) but the only other node has enough CPU, 3 pod evictions",
            args(1, true),
            restart_pods(&plain),
            vec![n("node1", json!({})), n("node5", json!({}))],
            per_node(3),
            true,
            3,
        ),
        (
            "pods are in CrashLoopBackOff with states=CrashLoopBackOff, 3 pod evictions",
            json!({"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]}),
            restart_pods(&crash),
            vec![n("node1", json!({})), n("node5", json!({}))],
            per_node(3),
            true,
            3,
        ),
        (
            "pods without CrashLoopBackOff with states=CrashLoopBackOff, 0 pod evictions",
            json!({"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]}),
            restart_pods(&plain),
            vec![n("node1", json!({})), n("node5", json!({}))],
            per_node(3),
            true,
            0,
        ),
        (
            "pods running with state=Running, 3 pod evictions",
            json!({"podRestartThreshold": 1, "states": ["Running"]}),
            restart_pods(&phase("Running")),
            one(),
            per_node(3),
            false,
            3,
        ),
        (
            "pods pending with state=Running, 0 pod evictions",
            json!({"podRestartThreshold": 1, "states": ["Running"]}),
            restart_pods(&phase("Pending")),
            one(),
            per_node(3),
            false,
            0,
        ),
    ];
    for (description, a, pods, nodes, top, node_fit, want) in cases {
        let got = count(
            "RemovePodsHavingTooManyRestarts",
            a,
            json!({"nodeFit": node_fit}),
            top,
            nodes,
            pods,
        );
        assert_eq!(got, want, "{description}");
    }
    let e = crate::descheduler::plugins::Upstream::new(
        "RemovePodsHavingTooManyRestarts",
        &json!({"podRestartThreshold": 1, "states": ["Pending"]}),
    );
    assert!(
        e.err()
            .unwrap()
            .to_string()
            .contains("states must be one of [CrashLoopBackOff Running]")
    );
}
