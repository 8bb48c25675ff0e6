//! Koordinator's custom_priority_test.go: `Test_validateCustomPriorityArgs`,
//! `Test_sortPodsByRequestsAscending`, `Test_findEvictablePods`,
//! `Test_evictFromPriorityToTargets`, `Test_evictByDrainingNodes_and_processEvictions` and
//! `Test_Balance`, through a pass (its recording evictor takes every pod, so the pods
//! here have an owner for DefaultEvictor).

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::descheduler::framework::action::Action;
use crate::descheduler::testkit::*;

/// `newNode(name, labels, cpuMilli, memBytes, podsCap)`.
fn new_node(name: &str, tier: &str, cpu: i64, mem: i64) -> Node {
    node(
        name,
        cpu,
        mem,
        100,
        json!({"metadata": {"labels": {"tier": tier}}}),
    )
}

/// `newPod(ns, name, node, cpuMilli, memBytes)`, owned.
fn new_pod(name: &str, node: &str, cpu: i64, mem: i64) -> Pod {
    pod(
        name,
        cpu,
        mem,
        node,
        with(&[rs_owner(), json!({"metadata": {"namespace": "ns"}})]),
    )
}

fn order() -> Value {
    json!([{"name": "gold", "nodeSelector": {"matchLabels": {"tier": "gold"}}},
        {"name": "silver", "nodeSelector": {"matchLabels": {"tier": "silver"}}},
        {"name": "bronze", "nodeSelector": {"matchLabels": {"tier": "bronze"}}}])
}

fn run(args: Value, nodes: Vec<Node>, pods: Vec<Pod>) -> crate::descheduler::framework::Report {
    let args = with(&[json!({"evictionOrder": order()}), args]);
    pass("CustomPriority", "balance", args, json!({}), nodes, pods)
}

#[test]
fn validate_custom_priority_args() {
    let one = json!([{"name": "p1", "nodeSelector": {"matchLabels": {"a": "1"}}}]);
    let cases = [
        ("too few priorities", json!({}), "at least 2"),
        (
            "duplicate names",
            json!({"evictionOrder": [{"name": "p1", "nodeSelector": {"matchLabels": {"a": "1"}}}, {"name": "p1", "nodeSelector": {"matchLabels": {"b": "2"}}}]}),
            "duplicate",
        ),
        (
            "missing selector",
            json!({"evictionOrder": [one[0].clone(), {"name": "p2"}]}),
            "nodeSelector",
        ),
        (
            "empty name",
            json!({"evictionOrder": [one[0].clone(), {"name": "", "nodeSelector": {}}]}),
            "cannot be empty",
        ),
        (
            "unknown mode",
            json!({"evictionOrder": order(), "mode": "Sometimes"}),
            "BestEffort or DrainNode",
        ),
    ];
    for (name, a, want) in cases {
        let e = super::super::Upstream::new("CustomPriority", &a)
            .err()
            .expect(name);
        assert!(e.to_string().contains(want), "{name}: {e}");
    }
    assert!(
        super::super::Upstream::new("CustomPriority", &json!({"evictionOrder": order()})).is_ok(),
        "valid"
    );
}

#[test]
fn best_effort_moves_pods_that_fit_a_cheaper_node_smallest_first() {
    // Test_evictFromPriorityToTargets: two small pods on gold, silver has room.
    let nodes = || {
        vec![
            new_node("s1", "gold", 1000, 1 << 30),
            new_node("t1", "silver", 1000, 1 << 30),
        ]
    };
    let pods = || vec![new_pod("p1", "s1", 10, 10), new_pod("p2", "s1", 20, 20)];
    let r = run(json!({"nodeFit": false}), nodes(), pods());
    assert_eq!(evicted(&r), ["p1", "p2"]);
    assert!(
        r.evictions[0]
            .reason
            .contains("evicting from gold priority resource to lower priority resource")
    );
    assert!(
        run(json!({"dryRun": true}), nodes(), pods())
            .evictions
            .is_empty(),
        "dry run path -> no eviction"
    );
    // Test_findEvictablePods: with nodeFit only what fits the 1000m target goes.
    let big = vec![
        new_pod("small", "s1", 100, 100),
        new_pod("big", "s1", 2000, 100),
        new_pod("mid", "s1", 400, 100),
    ];
    assert_eq!(
        evicted(&run(json!({}), nodes(), big.clone())),
        ["mid", "small"]
    );
    assert_eq!(
        evicted(&run(json!({"nodeFit": false}), nodes(), big)).len(),
        3,
        "NodeFit false => all pass filter"
    );
}

#[test]
fn best_effort_gives_up_a_node_after_five_misses_in_a_row() {
    let nodes = vec![
        new_node("s1", "gold", 100_000, 8 << 30),
        new_node("t1", "silver", 100_000, 1 << 30),
    ];
    // Smallest requests first: tiny, five that need more memory than silver has, then
    // `late`, which would fit but is never looked at.
    let mut pods = vec![
        new_pod("tiny", "s1", 10, 10),
        new_pod("late", "s1", 200, 10),
    ];
    pods.extend((0..5).map(|i| new_pod(&format!("huge{i}"), "s1", 100, (2 << 30) + i)));
    assert_eq!(evicted(&run(json!({}), nodes, pods)), ["tiny"]);
}

#[test]
fn drain_node_moves_a_node_only_when_all_its_pods_fit_and_cordons_it() {
    // Test_evictByDrainingNodes_and_processEvictions: two 100m pods, 500m on silver and bronze.
    let nodes = || {
        vec![
            new_node("s1", "gold", 1000, 1 << 30),
            new_node("t1", "silver", 500, 1 << 30),
            new_node("t2", "bronze", 500, 1 << 30),
        ]
    };
    let pods = || vec![new_pod("p1", "s1", 100, 100), new_pod("p2", "s1", 100, 100)];
    let r = run(
        json!({"mode": "DrainNode", "autoCordon": true}),
        nodes(),
        pods(),
    );
    assert_eq!(evicted(&r), ["p1", "p2"]);
    assert_eq!(r.actions.len(), 1);
    assert_eq!(r.actions[0].action, Action::Cordon { node: "s1".into() });
    assert_eq!(r.actions[0].reason, "drain node s1 (sourcePriority=gold)");
    // One pod too big for any target: nothing moves, nothing is cordoned.
    let mut too_big = pods();
    too_big.push(new_pod("p3", "s1", 600, 100));
    let r = run(
        json!({"mode": "DrainNode", "autoCordon": true}),
        nodes(),
        too_big,
    );
    assert!(r.evictions.is_empty() && r.actions.is_empty(), "{r:?}");
    // Without autoCordon the node drains uncordoned.
    let r = run(json!({"mode": "DrainNode"}), nodes(), pods());
    assert_eq!(r.evictions.len(), 2);
    assert!(r.actions.is_empty());
}

#[test]
fn balance_does_nothing_when_paused_or_without_two_levels_of_nodes() {
    let nodes = || {
        vec![
            new_node("s1", "gold", 1000, 1 << 30),
            new_node("t1", "silver", 1000, 1 << 30),
        ]
    };
    let pods = || vec![new_pod("p", "s1", 10, 10)];
    assert!(
        run(json!({"paused": true}), nodes(), pods())
            .evictions
            .is_empty(),
        "paused"
    );
    let none = json!({"nodeSelector": {"matchLabels": {"none": "x"}}});
    assert!(
        run(none, nodes(), pods()).evictions.is_empty(),
        "node selector filtering no nodes"
    );
    let only_gold = vec![
        new_node("s1", "gold", 1000, 1 << 30),
        new_node("s2", "gold", 1000, 1 << 30),
    ];
    assert!(
        run(json!({}), only_gold, pods()).evictions.is_empty(),
        "one level with nodes"
    );
    assert_eq!(
        run(json!({"mode": "BestEffort"}), nodes(), pods())
            .evictions
            .len(),
        1,
        "normal run BestEffort"
    );
}
