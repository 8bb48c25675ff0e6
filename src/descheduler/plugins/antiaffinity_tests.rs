//! sigs.k8s.io/descheduler's `TestPodAntiAffinity`, case for case with its descriptions.
//! koord's pass (like upstream's descheduler loop) does nothing on a one-node cluster, so
//! the cases upstream runs on n1 alone get a bare spare node beside it.

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::descheduler::testkit::*;

fn n1() -> Node {
    node(
        "n1",
        2000,
        3000,
        10,
        json!({"metadata": {"labels": {"region": "main-region"}}}),
    )
}

fn spare() -> Node {
    node("spare", 2000, 3000, 10, json!({}))
}

fn on1(name: &str, extra: Value) -> Pod {
    pod(name, 100, 0, "n1", extra)
}

fn foo_bar() -> Value {
    json!({"metadata": {"labels": {"foo": "bar"}}})
}

/// `buildTestPodWithAntiAffinityForNode1`.
fn repelling(name: &str) -> Pod {
    on1(name, with(&[pod_owner(), anti_affinity("foo", "bar")]))
}

/// `buildTestPodP2ForNode1`.
fn p2() -> Pod {
    on1("p2", with(&[pod_owner(), foo_bar()]))
}

/// `buildTestPodNonEvictableForNode1`.
fn critical() -> Pod {
    on1(
        "non-evict",
        with(&[foo_bar(), json!({"spec": {"priority": 2_000_000_000}})]),
    )
}

fn four() -> Vec<Pod> {
    vec![repelling("p1"), p2(), repelling("p3"), repelling("p4")]
}

fn prioritized(name: &str, labels: Value, anti: Value, priority: i32) -> Pod {
    on1(
        name,
        with(&[
            pod_owner(),
            labels,
            anti,
            json!({"spec": {"priority": priority}}),
        ]),
    )
}

#[test]
fn pod_anti_affinity() {
    let terminating = |name: &str| {
        on1(
            name,
            with(&[
                pod_owner(),
                anti_affinity("foo", "bar"),
                json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            ]),
        )
    };
    let west = json!({"spec": {"nodeSelector": {"datacenter": "west"}}});
    let foo1 = json!({"metadata": {"labels": {"foo1": "bar1"}}});
    let limits = |node: Option<u32>, ns: Option<u32>, total: Option<u32>| json!({"maxNoOfPodsToEvictPerNode": node, "maxNoOfPodsToEvictPerNamespace": ns, "maxNoOfPodsToEvictTotal": total});
    let none = limits(None, None, None);
    let cases: Vec<(&str, Value, Vec<Pod>, Vec<Node>, bool, usize)> = vec![
        (
            "Maximum pods to evict - 0",
            none.clone(),
            four(),
            vec![n1(), spare()],
            false,
            3,
        ),
        (
            "Maximum pods to evict - 3",
            limits(Some(3), None, None),
            four(),
            vec![n1(), spare()],
            false,
            3,
        ),
        (
            "Maximum pods to evict (maxPodsToEvictPerNamespace=3) - 3",
            limits(None, Some(3), None),
            four(),
            vec![n1(), spare()],
            false,
            3,
        ),
        (
            "Maximum pods to evict (maxNoOfPodsToEvictTotal)",
            limits(None, Some(3), Some(1)),
            four(),
            vec![n1(), spare()],
            false,
            1,
        ),
        (
            "Evict only 1 pod after sorting",
            none.clone(),
            vec![
                prioritized("p5", foo_bar(), anti_affinity("foo1", "bar1"), 100),
                prioritized("p6", foo_bar(), anti_affinity("foo1", "bar1"), 50),
                prioritized("p7", foo1, anti_affinity("foo", "bar"), 0),
            ],
            vec![n1(), spare()],
            false,
            1,
        ),
        (
            "Evicts pod that conflicts with critical pod (but does not evict critical pod)",
            limits(Some(1), None, None),
            vec![repelling("p1"), critical()],
            vec![n1(), spare()],
            false,
            1,
        ),
        (
            "Won't evict pods because node selectors don't match available nodes",
            limits(Some(1), None, None),
            vec![on1("p8", west.clone()), critical()],
            vec![
                n1(),
                node(
                    "n2",
                    2000,
                    3000,
                    10,
                    json!({"metadata": {"labels": {"datacenter": "east"}}}),
                ),
            ],
            true,
            0,
        ),
        (
            "Won't evict pods because only other node is not schedulable",
            limits(Some(1), None, None),
            vec![on1("p8", west), critical()],
            vec![
                n1(),
                node(
                    "n3",
                    2000,
                    3000,
                    10,
                    json!({"spec": {"unschedulable": true}}),
                ),
            ],
            true,
            0,
        ),
        (
            "No pod to evicted since all pod terminating",
            none.clone(),
            vec![terminating("p9"), terminating("p10")],
            vec![n1(), spare()],
            false,
            0,
        ),
        (
            "Won't evict pods because only other node doesn't have enough resources",
            limits(Some(3), None, None),
            four(),
            vec![n1(), node("n4", 2, 2, 1, json!({}))],
            true,
            0,
        ),
        (
            "Evict pod violating anti-affinity among different node (all pods have anti-affinity)",
            none,
            vec![
                repelling("p1"),
                pod("p11", 100, 0, "n5", with(&[pod_owner(), foo_bar()])),
            ],
            vec![
                n1(),
                node(
                    "n5",
                    200,
                    3000,
                    10,
                    json!({"metadata": {"labels": {"region": "main-region"}}}),
                ),
            ],
            false,
            1,
        ),
    ];
    for (description, top, pods, nodes, node_fit, want) in cases {
        let r = pass_with(
            "RemovePodsViolatingInterPodAntiAffinity",
            "deschedule",
            json!({}),
            json!({"nodeFit": node_fit}),
            top,
            nodes,
            pods,
        );
        assert_eq!(r.evictions.len(), want, "{description}: {r:?}");
    }
}

#[test]
fn the_evicted_pod_and_its_reason() {
    let r = pass(
        "RemovePodsViolatingInterPodAntiAffinity",
        "deschedule",
        json!({}),
        json!({}),
        vec![n1(), spare()],
        vec![repelling("p1"), p2()],
    );
    assert_eq!(evicted(&r), ["p1"]);
    assert_eq!(
        r.evictions[0].reason,
        "pod's required anti-affinity selects default/p2 in its region domain"
    );
    assert_eq!(
        r.evictions[0].plugin,
        "RemovePodsViolatingInterPodAntiAffinity"
    );
}
