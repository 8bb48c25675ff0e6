//! `TestDeletePodsViolatingNodeTaints`.

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::{count, spare};
use crate::descheduler::testkit::*;

/// Upstream's `createNoScheduleTaint` ignores its key and value: every taint it makes is
/// `testTaint<i>=test<i>`; so is `withTestingTaint1`'s.
fn taint(effect: &str) -> Value {
    json!({"spec": {"taints": [{"key": "testTaint1", "value": "test1", "effect": effect}]}})
}

/// `addTolerationToPod(pod, key, value, index, effect)` (replaces the pod's tolerations).
fn toleration(key: &str, value: &str, index: u32, effect: &str) -> Value {
    json!({"spec": {"tolerations": [{"key": format!("{key}{index}"), "value": format!("{value}{index}"), "effect": effect}]}})
}

#[test]
fn delete_pods_violating_node_taints() {
    let n = |name: &str, extra: Value| node(name, 2000, 3000, 10, extra);
    let p =
        |name: &str, node: &str, extra: Value| pod(name, 100, 0, node, with(&[pod_owner(), extra]));
    let tol1 = || toleration("testTaint", "test", 1, "NoSchedule");
    let tol_x = || toleration("testTaintX", "testX", 1, "NoSchedule");
    let critical =
        || json!({"metadata": {"namespace": "kube-system"}, "spec": {"priority": 2_000_000_000}});
    let local = || json!({"spec": {"volumes": [{"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {"sizeLimit": "10"}}]}});
    let ds = |name: &str, node: &str| pod(name, 100, 0, node, ds_owner());
    let tainted = |name: &str| n(name, taint("NoSchedule"));
    let trio = || {
        vec![
            p("p1", "n1", tol1()),
            p("p5", "n1", json!({})),
            p("p6", "n1", json!({})),
        ]
    };
    let critical_set = |extra: Vec<Pod>| {
        let mut v = vec![
            p("p7", "n2", critical()),
            ds("p8", "n2"),
            p("p9", "n2", local()),
            p("p10", "n2", mirror()),
        ];
        v.extend(extra);
        v
    };
    let limits = |node: Option<u32>, ns: Option<u32>, total: Option<u32>| json!({"maxNoOfPodsToEvictPerNode": node, "maxNoOfPodsToEvictPerNamespace": ns, "maxNoOfPodsToEvictTotal": total});
    let no = || json!({});
    // (description, pods, nodes, evictor args, limits, plugin args, want)
    let cases: Vec<(&str, Vec<Pod>, Vec<Node>, Value, Value, Value, usize)> = vec![
        (
            "Pods not tolerating node taint should be evicted",
            vec![
                p("p1", "n1", tol1()),
                p("p2", "n1", no()),
                p("p3", "n1", tol1()),
            ],
            vec![tainted("n1"), spare()],
            no(),
            no(),
            no(),
            1,
        ),
        (
            "Pods with tolerations but not tolerating node taint should be evicted",
            vec![
                p("p1", "n1", tol1()),
                p("p3", "n1", tol1()),
                p("p4", "n1", tol_x()),
            ],
            vec![tainted("n1"), spare()],
            no(),
            no(),
            no(),
            1,
        ),
        (
            "Only <maxNoOfPodsToEvictTotal> number of Pods not tolerating node taint should be evicted",
            trio(),
            vec![tainted("n1"), spare()],
            no(),
            limits(Some(2), None, Some(1)),
            no(),
            1,
        ),
        (
            "Only <maxPodsToEvictPerNode> number of Pods not tolerating node taint should be evicted",
            trio(),
            vec![tainted("n1"), spare()],
            no(),
            limits(Some(1), None, None),
            no(),
            1,
        ),
        (
            "Only <maxNoOfPodsToEvictPerNamespace> number of Pods not tolerating node taint should be evicted",
            trio(),
            vec![tainted("n1"), spare()],
            no(),
            limits(None, Some(1), None),
            no(),
            1,
        ),
        (
            "Critical pods not tolerating node taint should not be evicted",
            critical_set(vec![]),
            vec![tainted("n2"), spare()],
            no(),
            no(),
            no(),
            0,
        ),
        (
            "Critical pods except storage pods not tolerating node taint should not be evicted",
            critical_set(vec![]),
            vec![tainted("n2"), spare()],
            json!({"evictLocalStoragePods": true}),
            no(),
            no(),
            1,
        ),
        (
            "Critical and non critical pods, only non critical pods not tolerating node taint should be evicted",
            vec![
                p("p7", "n2", critical()),
                ds("p8", "n2"),
                p("p10", "n2", mirror()),
                p("p11", "n2", no()),
            ],
            vec![tainted("n2"), spare()],
            no(),
            no(),
            no(),
            1,
        ),
        (
            "Critical and non critical pods, pods not tolerating node taint should be evicted even if they are critical",
            vec![
                p("p2", "n1", no()),
                p("p7", "n2", critical()),
                p("p9", "n2", local()),
                p("p10", "n2", mirror()),
            ],
            vec![tainted("n1"), tainted("n2")],
            json!({"evictSystemCriticalPods": true}),
            no(),
            no(),
            2,
        ),
        (
            "Pod p2 doesn't tolerate taint on it's node, but also doesn't tolerate taints on other nodes",
            vec![
                p("p1", "n1", tol1()),
                p("p2", "n1", no()),
                p("p3", "n1", tol1()),
            ],
            vec![tainted("n1"), tainted("n2")],
            json!({"nodeFit": true}),
            no(),
            no(),
            0,
        ),
        (
            "Pod p12 doesn't tolerate taint on it's node, but other nodes don't match it's selector",
            vec![
                p("p1", "n1", tol1()),
                p("p3", "n1", tol1()),
                p(
                    "p11",
                    "n2",
                    json!({"spec": {"nodeSelector": {"datacenter": "west"}}}),
                ),
            ],
            vec![
                tainted("n1"),
                n(
                    "n3",
                    json!({"metadata": {"labels": {"datacenter": "east"}}}),
                ),
            ],
            json!({"nodeFit": true}),
            no(),
            no(),
            0,
        ),
        (
            "Pod p2 doesn't tolerate taint on it's node, but other nodes are unschedulable",
            vec![
                p("p1", "n1", tol1()),
                p("p2", "n1", no()),
                p("p3", "n1", tol1()),
            ],
            vec![
                tainted("n1"),
                n("n4", json!({"spec": {"unschedulable": true}})),
            ],
            json!({"nodeFit": true}),
            no(),
            no(),
            0,
        ),
        (
            "Pods not tolerating PreferNoSchedule node taint should not be evicted when not enabled",
            vec![p(
                "p13",
                "n5",
                toleration("testTaint", "test", 0, "PreferNoSchedule"),
            )],
            vec![n("n5", taint("PreferNoSchedule")), spare()],
            no(),
            no(),
            no(),
            0,
        ),
        (
            "Pods not tolerating PreferNoSchedule node taint should be evicted when enabled",
            vec![p(
                "p13",
                "n5",
                toleration("testTaint", "test", 0, "PreferNoSchedule"),
            )],
            vec![n("n5", taint("PreferNoSchedule")), spare()],
            no(),
            no(),
            json!({"includePreferNoSchedule": true}),
            1,
        ),
        (
            "Pods not tolerating excluded node taints (by key) should not be evicted",
            vec![p("p2", "n1", no())],
            vec![tainted("n1"), spare()],
            no(),
            no(),
            json!({"excludedTaints": ["excludedTaint1", "testTaint1"]}),
            0,
        ),
        (
            "Pods not tolerating excluded node taints (by key and value) should not be evicted",
            vec![p("p2", "n1", no())],
            vec![tainted("n1"), spare()],
            no(),
            no(),
            json!({"excludedTaints": ["testTaint1=test1"]}),
            0,
        ),
        (
            "The excluded taint matches the key of node1's taint, but does not match the value",
            vec![p("p2", "n1", no())],
            vec![tainted("n1"), spare()],
            no(),
            no(),
            json!({"excludedTaints": ["testTaint1=test2"]}),
            1,
        ),
        (
            "Critical and non critical pods, pods not tolerating node taint can't be evicted because the only available node does not have enough resources.",
            vec![
                p("p2", "n1", no()),
                p("p7", "n2", critical()),
                p("p9", "n2", local()),
                p("p10", "n2", mirror()),
            ],
            vec![
                tainted("n1"),
                node("n6", 1, 1, 1, taint("PreferNoSchedule")),
            ],
            json!({"evictSystemCriticalPods": true, "nodeFit": true}),
            no(),
            no(),
            0,
        ),
        (
            "Pods tolerating included taints should not get evicted even with other taints present",
            vec![p("p1", "n7", tol1())],
            vec![
                n(
                    "n7",
                    json!({"spec": {"taints": [
                {"key": "testTaint1", "value": "test1", "effect": "NoSchedule"}, {"key": "testTaint1", "value": "test1", "effect": "NoSchedule"}]}}),
                ),
                spare(),
            ],
            no(),
            no(),
            json!({"includedTaints": ["testTaint1=test1"]}),
            0,
        ),
        (
            "Pods not tolerating not included taints should not get evicted",
            vec![
                p("p1", "n1", tol1()),
                p("p2", "n1", no()),
                p("p4", "n1", tol_x()),
            ],
            vec![tainted("n1"), spare()],
            no(),
            no(),
            json!({"includedTaints": ["testTaint2=test2"]}),
            0,
        ),
        (
            "Pods tolerating includedTaint should not get evicted. Pods not tolerating includedTaints should get evicted",
            vec![
                p("p1", "n1", tol1()),
                p("p2", "n1", no()),
                p("p3", "n1", tol1()),
            ],
            vec![tainted("n1"), spare()],
            no(),
            no(),
            json!({"includedTaints": ["testTaint1=test1"]}),
            1,
        ),
        (
            "Pods not tolerating all taints are evicted when includedTaints is empty",
            vec![
                p("p14", "n7", tol1()),
                p(
                    "p15",
                    "n7",
                    toleration("testingTaint", "testing", 1, "NoSchedule"),
                ),
            ],
            vec![
                n(
                    "n7",
                    json!({"spec": {"taints": [
                {"key": "testTaint1", "value": "test1", "effect": "NoSchedule"}, {"key": "testTaint1", "value": "test1", "effect": "NoSchedule"}]}}),
                ),
                spare(),
            ],
            no(),
            no(),
            no(),
            1,
        ),
    ];
    for (description, pods, nodes, evictor, top, a, want) in cases {
        let got = count(
            "RemovePodsViolatingNodeTaints",
            a,
            evictor,
            top,
            nodes,
            pods,
        );
        assert_eq!(got, want, "{description}");
    }
}
