//! Koordinator's `TestRankPods`, `TestRankPods_EdgeCases`, `TestRankPods_ZeroRequestTargetPod`,
//! `TestRankPods_ResourceDomination` (ranker_test.go), and the two strategies through a pass.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::{NodePods, Ranked, rank_pods};
use crate::descheduler::framework::action::Action;
use crate::descheduler::framework::plugin::NodeInput;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::testkit::*;

/// `makeNode(name, cpu, mem)`.
fn mk_node(name: &str, cpu: &str, mem: &str) -> NodeInput {
    let res = json!({"cpu": cpu, "memory": mem});
    let n = serde_json::from_value(
        json!({"metadata": {"name": name}, "status": {"capacity": res, "allocatable": res}}),
    )
    .unwrap();
    NodeInput {
        node: Arc::new(n),
        metric: None,
        pods: vec![],
    }
}

/// `makePod(namespace, name, nodeName, cpu, mem, creationTime)`; `age` hours before T0.
fn mk_pod(ns: &str, name: &str, node: &str, cpu: &str, mem: &str, hours: i64) -> Arc<PodView> {
    let t = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + hours * 3600).unwrap();
    Arc::new(PodView::json(
        json!({"metadata": {"namespace": ns, "name": name, "creationTimestamp": t.to_string()},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}),
    ))
}

fn weights() -> BTreeMap<String, f64> {
    [("cpu".to_string(), 1.0), ("memory".to_string(), 1.0)].into()
}

/// RankPods over `nodes`: each pod goes to its node as target, skipped or other.
fn rank(
    nodes: &[NodeInput],
    targets: &[Arc<PodView>],
    skipped: &[Arc<PodView>],
    others: &[Arc<PodView>],
    w: &BTreeMap<String, f64>,
) -> Vec<Ranked> {
    let on = |pods: &[Arc<PodView>], n: &NodeInput| -> Vec<Arc<PodView>> {
        pods.iter()
            .filter(|p| p.node_name == n.node.metadata.name)
            .cloned()
            .collect()
    };
    let grouped: Vec<_> = nodes
        .iter()
        .map(|n| (n, on(targets, n), on(skipped, n), on(others, n)))
        .collect();
    let refs: Vec<NodePods> = grouped
        .iter()
        .map(|(n, t, s, o)| NodePods {
            node: n,
            eligible: t.iter().collect(),
            skipped: s.iter().collect(),
            others: o.iter().collect(),
        })
        .collect();
    rank_pods(&refs, w)
}

fn names(r: &[Ranked]) -> Vec<&str> {
    r.iter().map(|r| r.pod.name.as_str()).collect()
}

#[test]
fn rank_pods_in_order() {
    let nodes: Vec<NodeInput> = (1..=6)
        .map(|i| mk_node(&format!("node{i}"), "4", "8Gi"))
        .collect();
    let p = |ns: &str, name: &str, node: &str, cpu: &str, mem: &str, h: i64| {
        mk_pod(ns, name, node, cpu, mem, h)
    };
    let targets = vec![
        p("default", "p1", "node1", "1", "1Gi", 0),
        p("default", "p2", "node2", "1", "1Gi", 0),
        p("default", "p4a", "node4", "1", "1Gi", 0),
        p("default", "p4b", "node4", "1", "1Gi", 0),
        p("default", "p5a", "node5", "1", "1Gi", 0),
        p("default", "p5b", "node5", "1", "1Gi", 0),
        p("default", "p6-large", "node6", "2", "2Gi", 0),
        p("default", "p6-newest", "node6", "1", "1Gi", 1),
        p("a-ns", "p6-same1", "node6", "1", "1Gi", 0),
        p("b-ns", "p6-same2", "node6", "1", "1Gi", 0),
        p("b-ns", "p6-same3", "node6", "1", "1Gi", 0),
        p("default", "p6-oldest", "node6", "1", "1Gi", -1),
    ];
    let others = vec![
        p("default", "nt2", "node2", "1", "1Gi", 0),
        p("default", "nt3", "node3", "1", "1Gi", 0),
    ];
    let ranked = rank(&nodes, &targets, &[], &others, &weights());
    assert_eq!(
        names(&ranked),
        [
            "p1",
            "p4a",
            "p4b",
            "p5a",
            "p5b",
            "p6-large",
            "p6-newest",
            "p6-same1",
            "p6-same2",
            "p6-same3",
            "p6-oldest",
            "p2"
        ]
    );
    assert!(ranked.iter().enumerate().all(|(i, r)| r.rank == i));
    assert_eq!(ranked[0].score, 0.0, "perfect node score is 0");
    assert!(ranked[11].score > 0.0, "multi-tenant node ranks later");
    assert!(
        ranked.iter().all(|r| r.node != "node3"),
        "zero-target nodes are skipped"
    );
}

#[test]
fn rank_pods_edge_cases() {
    let nodes = [
        mk_node("node-zero", "0", "0"),
        mk_node("node-normal", "4", "8Gi"),
    ];
    let targets = [
        mk_pod("default", "p-zero", "node-zero", "1", "1Gi", 0),
        mk_pod("default", "p-normal", "node-normal", "1", "1Gi", 0),
    ];
    assert_eq!(
        names(&rank(&nodes, &targets, &[], &[], &BTreeMap::new())),
        ["p-normal", "p-zero"],
        "default weights; name order"
    );
    let nodes = [
        mk_node("node-normal", "4", "8Gi"),
        mk_node("node-skipped", "4", "8Gi"),
    ];
    let targets = [
        mk_pod("default", "p-normal", "node-normal", "1", "1Gi", 0),
        mk_pod("default", "p-eligible", "node-skipped", "1", "1Gi", 0),
    ];
    let skipped = [mk_pod(
        "default",
        "p-skipped",
        "node-skipped",
        "1",
        "1Gi",
        0,
    )];
    let r = rank(&nodes, &targets, &skipped, &[], &BTreeMap::new());
    assert_eq!(
        names(&r),
        ["p-normal", "p-eligible"],
        "a skipped target taxes its node"
    );
    assert_eq!(r[0].score, 0.0);
    assert!(r[1].score > 0.0);
}

#[test]
fn rank_pods_zero_request_target_pod() {
    let nodes = [
        mk_node("node-perfect", "4", "8Gi"),
        mk_node("node-normal", "4", "8Gi"),
        mk_node("node-zero-req-tax", "4", "8Gi"),
    ];
    let targets = [
        mk_pod("default", "p-perfect", "node-perfect", "1", "1Gi", 0),
        mk_pod("default", "p-normal", "node-normal", "1", "1Gi", 0),
        mk_pod("default", "p-zero-req", "node-zero-req-tax", "0", "0", 0),
    ];
    let others = [
        mk_pod("default", "nt-normal", "node-normal", "1", "1Gi", 0),
        mk_pod("default", "nt-zero-req", "node-zero-req-tax", "1", "1Gi", 0),
    ];
    let r = rank(&nodes, &targets, &[], &others, &BTreeMap::new());
    assert_eq!(names(&r), ["p-perfect", "p-normal", "p-zero-req"]);
    assert_eq!(r[0].score, 0.0);
    assert!(r[1].score > 0.0 && r[1].score.is_finite());
    assert_eq!(
        r[2].score,
        f64::INFINITY,
        "zero-request targets on a taxed node: +Inf"
    );
}

#[test]
fn rank_pods_resource_domination() {
    let nodes = [mk_node("node1", "4", "8Gi")];
    let targets = [
        mk_pod("default", "p-cpu-heavy", "node1", "2", "100Mi", 0),
        mk_pod("default", "p-mem-heavy", "node1", "100m", "3Gi", 0),
    ];
    assert_eq!(
        names(&rank(&nodes, &targets, &[], &[], &weights())),
        ["p-cpu-heavy", "p-mem-heavy"]
    );
}

fn two_nodes() -> (Vec<k8s_openapi::api::core::v1::Node>, Vec<Pod>) {
    let nodes = vec![
        node("n1", 4000, 8000, 10, json!({})),
        node("n2", 4000, 8000, 10, json!({})),
    ];
    let web = json!({"metadata": {"labels": {"app": "web"}}});
    let pods = vec![
        pod("a", 1000, 1000, "n1", with(&[rs_owner(), web.clone()])),
        pod("b", 2000, 1000, "n1", with(&[rs_owner(), web.clone()])),
        pod("c", 1000, 1000, "n2", with(&[rs_owner(), web.clone()])),
        pod("other", 1000, 1000, "n2", rs_owner()),
        pod("ds", 500, 500, "n2", with(&[ds_owner(), web])),
    ];
    (nodes, pods)
}

#[test]
fn calculate_only_writes_deletion_costs_and_evict_directly_evicts_in_rank_order() {
    let sel =
        json!({"podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}]});
    let (nodes, pods) = two_nodes();
    let r = pass(
        "ScaleDownBinPack",
        "balance",
        sel.clone(),
        json!({}),
        nodes,
        pods,
    );
    assert!(r.evictions.is_empty());
    let costs: Vec<(String, String)> = r
        .actions
        .iter()
        .map(|a| match &a.action {
            Action::Annotate {
                pod, key, value, ..
            } => {
                assert_eq!(key, "controller.kubernetes.io/pod-deletion-cost");
                (pod.clone(), value.clone())
            }
            other => panic!("{other:?}"),
        })
        .collect();
    // n1 holds only targets (score 0) before n2 (taxed by `other` and the DaemonSet pod the
    // evictor refuses); bigger first within a node; the refused target gets MaxInt32.
    let want = [("b", "0"), ("a", "1"), ("c", "2"), ("ds", "2147483647")];
    assert_eq!(costs, want.map(|(p, v)| (p.to_string(), v.to_string())));
    let (nodes, pods) = two_nodes();
    let evict = with(&[
        sel,
        json!({"strategy": "EvictDirectly", "maxPodsToEvict": 2}),
    ]);
    let r = pass("ScaleDownBinPack", "balance", evict, json!({}), nodes, pods);
    assert_eq!(evicted(&r), ["a", "b"]);
    assert!(r.actions.is_empty());
}

#[test]
fn args_are_validated_as_koordinator() {
    let bad: [(Value, &str); 3] = [
        (
            json!({"strategy": "Sometimes"}),
            "strategy must be CalculateOnly or EvictDirectly",
        ),
        (
            json!({"strategy": "EvictDirectly"}),
            "maxPodsToEvict must be positive",
        ),
        (
            json!({"resourceWeights": {"cpu": 0}}),
            "weights must be positive finite floats",
        ),
    ];
    for (a, want) in bad {
        let e = super::super::Upstream::new("ScaleDownBinPack", &a)
            .err()
            .expect("refused");
        assert!(e.to_string().contains(want), "{a}: {e}");
    }
}
