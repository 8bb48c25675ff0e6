//! kube-scheduler's DefaultPreemption cases (default_preemption_test.go: TestDryRunPreemption's
//! PDB cases, TestSelectBestCandidate's ordering), their names and expectations.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::scheduler::config;
use crate::scheduler::framework::runtime::Scope;
use crate::scheduler::framework::{ClusterState, Nomination};
use crate::scheduler::test_util::{cluster, node_json, pod};

const MID: i32 = 100;
const HIGH: i32 = 1000;

/// A placed pod: `cpu` requested, labels, priority and (optionally) its start time.
fn placed(
    c: &mut ClusterState,
    name: &str,
    node: &str,
    cpu: &str,
    labels: Value,
    prio: i32,
    started: Option<&str>,
) {
    let mut p = json!({"metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels},
        "spec": {"nodeName": node, "priority": prio,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}});
    if let Some(t) = started {
        p["status"] = json!({"startTime": t});
    }
    c.upsert_pod(Arc::new(serde_json::from_value(p).unwrap()));
}

fn pdb(allowed: i32, disrupted: &[&str]) -> Arc<k8s_openapi::api::policy::v1::PodDisruptionBudget> {
    let d: serde_json::Map<String, Value> = disrupted
        .iter()
        .map(|p| (p.to_string(), json!("2026-11-26T00:00:00Z")))
        .collect();
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "pdb", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "foo"}}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": d,
                "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}))
        .unwrap(),
    )
}

/// The default profile's PostFilter for a `cpu` preemptor of high priority.
fn preempt(c: &ClusterState, cpu: &str) -> Option<Nomination> {
    let fw = config::framework(&config::default_config().unwrap().profiles[0]).unwrap();
    let p = pod(
        json!({"metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {"priority": HIGH, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}),
    );
    let r = fw.schedule(&p, c, Scope::Everything);
    assert!(r.node.is_none(), "the preemptor fits nowhere");
    fw.post_filter(&r, &p, c)
}

fn names(n: &Nomination) -> Vec<&str> {
    let mut v: Vec<&str> = n.victims.iter().map(|p| p.name.as_str()).collect();
    v.sort();
    v
}

fn foo() -> Value {
    json!({"app": "foo"})
}

/// (case, disrupted pods in the PDB's status, pods on node1, victims, PDB violations)
type PdbCase = (&'static str, Vec<&'static str>, Vec<&'static str>, usize);

#[test]
fn victims_protected_by_a_pdb_are_counted() {
    let cases: Vec<PdbCase> = vec![
        (
            "preemption with violation of same pdb",
            vec![],
            vec!["p1.1", "p1.2"],
            1,
        ),
        (
            "preemption with violation of the pdb with pod whose eviction was processed, the victim doesn't belong to DisruptedPods",
            vec!["p2"],
            vec!["p1.1", "p1.2"],
            1,
        ),
        (
            "preemption with violation of the pdb with pod whose eviction was processed, the victim belongs to DisruptedPods",
            vec!["p1.2"],
            vec!["p1.1", "p1.2"],
            0,
        ),
        (
            "preemption with violation of the pdb with pod whose eviction was processed, the victim which belongs to DisruptedPods is treated as 'nonViolating'",
            vec!["p1.3"],
            vec!["p1.1", "p1.2", "p1.3"],
            1,
        ),
    ];
    for (name, disrupted, pods, violations) in cases {
        let mut c = cluster(vec![node_json("node1", "4", "8Gi")]);
        let each = if pods.len() == 2 { "2" } else { "1" };
        for p in &pods {
            placed(&mut c, p, "node1", each, foo(), MID, None);
        }
        c.upsert_pdb(pdb(1, &disrupted));
        let n = preempt(&c, "4").unwrap_or_else(|| panic!("{name}: a nomination"));
        assert_eq!(names(&n), pods, "{name}");
        let node = c.node("node1").unwrap();
        let v = super::preemption::select_victims(
            &pod(json!({"metadata": {"name": "p", "namespace": "default"},
                "spec": {"priority": HIGH, "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}})),
            node,
            &c,
            (&|n| n.pods.is_empty(), &|_| true),
        )
        .unwrap();
        assert_eq!(v.pdb_violations, violations, "{name}");
    }
}

#[test]
fn preemption_looks_past_pdb_violating_nodes() {
    // "preemption looks past numCandidates until a non-PDB violating node is found"
    let nodes = (1..=5)
        .map(|i| node_json(&format!("node{i}"), "4", "8Gi"))
        .collect();
    let mut c = cluster(nodes);
    for (i, labels) in [
        (1, foo()),
        (2, foo()),
        (3, json!({})),
        (4, json!({})),
        (5, foo()),
    ] {
        placed(
            &mut c,
            &format!("p{i}"),
            &format!("node{i}"),
            "4",
            labels,
            MID,
            None,
        );
    }
    c.upsert_pdb(pdb(0, &[]));
    let n = preempt(&c, "4").unwrap();
    assert_eq!((n.node.as_str(), names(&n)), ("node3", vec!["p3"]));
}

#[test]
fn pick_one_node_for_preemption_orders_like_upstream() {
    // TestSelectBestCandidate-style cases: (name, [(node, [(pod, cpu, prio, started)])], want)
    type Pods = Vec<(&'static str, &'static str, i32, Option<&'static str>)>;
    type Case = (&'static str, Vec<(&'static str, Pods)>, &'static str);
    let cases: Vec<Case> = vec![
        (
            "a pod that fits on both nodes when lower priority pods are preempted",
            vec![
                ("node1", vec![("p1", "4", MID, None)]),
                ("node2", vec![("p2", "4", MID, None)]),
            ],
            "node1",
        ),
        (
            "the node whose victims have the lowest priority",
            vec![
                ("node1", vec![("p1", "4", MID, None)]),
                (
                    "node2",
                    vec![("p2.1", "2", 10, None), ("p2.2", "2", 10, None)],
                ),
            ],
            "node2",
        ),
        (
            "mixed priority pods are preempted, pick the node with the lowest highest victim",
            vec![
                (
                    "node1",
                    vec![("p1.1", "2", 500, None), ("p1.2", "2", 10, None)],
                ),
                (
                    "node2",
                    vec![("p2.1", "2", MID, None), ("p2.2", "2", MID, None)],
                ),
            ],
            "node2",
        ),
        (
            "same priorities, fewer victims",
            vec![
                (
                    "node1",
                    vec![("p1.1", "2", MID, None), ("p1.2", "2", MID, None)],
                ),
                ("node2", vec![("p2.1", "4", MID, None)]),
            ],
            "node2",
        ),
        (
            "mixed priority pods are preempted, pick latest start time",
            vec![
                (
                    "node1",
                    vec![("p1.1", "4", MID, Some("2026-11-20T00:00:00Z"))],
                ),
                (
                    "node2",
                    vec![("p2.1", "4", MID, Some("2026-11-25T00:00:00Z"))],
                ),
                (
                    "node3",
                    vec![("p3.1", "4", MID, Some("2026-11-22T00:00:00Z"))],
                ),
            ],
            "node2",
        ),
    ];
    for (name, nodes, want) in cases {
        let mut c = cluster(
            nodes
                .iter()
                .map(|(n, _)| node_json(n, "4", "8Gi"))
                .collect(),
        );
        for (node, pods) in &nodes {
            for (p, cpu, prio, started) in pods {
                placed(&mut c, p, node, cpu, json!({}), *prio, *started);
            }
        }
        let n = preempt(&c, "4").unwrap_or_else(|| panic!("{name}: a nomination"));
        assert_eq!(n.node, want, "{name}");
    }
}

#[test]
fn a_nominated_pod_keeps_its_room_from_lower_priority_pods() {
    let mut c = cluster(vec![
        node_json("n1", "4", "8Gi"),
        node_json("n2", "4", "8Gi"),
    ]);
    placed(&mut c, "busy", "n2", "4", json!({}), HIGH, None);
    let fw = config::framework(&config::default_config().unwrap().profiles[0]).unwrap();
    let preemptor = pod(json!({"metadata": {"name": "pre", "namespace": "default"},
        "spec": {"priority": HIGH, "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}));
    c.nominated.set(Arc::new(preemptor), "n1");
    let low = pod(json!({"metadata": {"name": "low", "namespace": "default"},
        "spec": {"priority": MID, "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}));
    let r = fw.schedule(&low, &c, Scope::Everything);
    assert!(r.node.is_none(), "n1's room is the nominated preemptor's");
    assert_eq!(r.verdicts["n1"].reason, "Insufficient cpu");
    let higher = pod(
        json!({"metadata": {"name": "higher", "namespace": "default"},
        "spec": {"priority": HIGH + 1, "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}),
    );
    let r = fw.schedule(&higher, &c, Scope::Everything);
    assert_eq!(
        r.node.as_deref(),
        Some("n1"),
        "a higher priority pod does not wait for it"
    );
}

#[test]
fn a_preemptor_waits_for_its_terminating_victims() {
    let fw = config::framework(&config::default_config().unwrap().profiles[0]).unwrap();
    let mut c = cluster(vec![node_json("n1", "4", "8Gi")]);
    placed(&mut c, "victim", "n1", "4", json!({}), MID, None);
    let p = pod(
        json!({"metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {"priority": HIGH, "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}),
    );
    let a = crate::scheduler::cycle::run(&fw, &p, &mut c, Scope::Everything);
    assert!(matches!(
        a.outcome,
        crate::scheduler::cycle::Outcome::Unschedulable {
            nomination: Some(_),
            ..
        }
    ));
    // The victim is terminating: it still holds the node, and nothing more is preempted.
    let v = json!({"metadata": {"name": "victim", "namespace": "default", "uid": "victim",
        "deletionTimestamp": "2026-11-26T00:00:00Z"},
        "spec": {"nodeName": "n1", "priority": MID, "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}});
    c.upsert_pod(Arc::new(serde_json::from_value(v).unwrap()));
    let a = crate::scheduler::cycle::run(&fw, &p, &mut c, Scope::Everything);
    assert!(matches!(
        a.outcome,
        crate::scheduler::cycle::Outcome::Unschedulable {
            nomination: None,
            ..
        }
    ));
    assert_eq!(
        c.nominated.node_of("default/p"),
        Some("n1"),
        "still nominated"
    );
    c.delete_pod("default/victim");
    let a = crate::scheduler::cycle::run(&fw, &p, &mut c, Scope::Everything);
    assert_eq!(a.node(), Some("n1"), "placed once the victim is gone");
}
