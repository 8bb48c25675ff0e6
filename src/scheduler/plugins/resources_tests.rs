//! kube's noderesources requested_to_capacity_ratio_test.go.

use serde_json::{Value, json};
use std::sync::Arc;

use crate::scheduler::framework::{CycleState, Plugin};
use crate::scheduler::plugins::resources::{FitArgs, NodeResourcesFit};
use crate::scheduler::test_util::{cluster, pod};

fn node(name: &str, alloc: Value) -> Value {
    json!({"metadata": {"name": name}, "status": {"allocatable": alloc, "capacity": alloc}})
}

/// A pod with one container per request list (st.MakePod().Req(...)...).
fn with_containers(name: &str, node: Option<&str>, reqs: &[Value]) -> Value {
    let containers: Vec<Value> = reqs
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"name": format!("c{i}"), "resources": {"requests": r}}))
        .collect();
    let mut p = json!({"metadata": {"name": name, "namespace": "d"},
        "spec": {"containers": containers}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = n.into();
    }
    p
}

fn fit(resources: Value, shape: Value) -> NodeResourcesFit {
    let args: FitArgs = serde_json::from_value(json!({"scoringStrategy": {
        "type": "RequestedToCapacityRatio", "resources": resources,
        "requestedToCapacityRatio": {"shape": shape}}}))
    .unwrap();
    NodeResourcesFit::new(args).unwrap()
}

fn scores(f: &NodeResourcesFit, nodes: Vec<Value>, pods: Vec<Value>, incoming: Value) -> Vec<i64> {
    let mut c = cluster(nodes);
    for p in pods {
        c.upsert_pod(Arc::new(serde_json::from_value(p).unwrap()));
    }
    let p = pod(incoming);
    c.nodes
        .iter()
        .map(|n| f.score(&CycleState::default(), &p, n, &c).unwrap())
        .collect()
}

#[test]
fn requested_to_capacity_ratio_scoring_strategy() {
    let f = fit(
        json!([{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]),
        json!([{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]),
    );
    let four = || {
        node(
            "node1",
            json!({"cpu": "4000", "memory": "10000", "pods": "110"}),
        )
    };
    let six = node(
        "node2",
        json!({"cpu": "6000", "memory": "10000", "pods": "110"}),
    );
    let empty = |n: &str, on: &str| with_containers(n, Some(on), &[]);
    // nothing scheduled, nothing requested (default - least requested nodes have priority)
    let same = node(
        "node2",
        json!({"cpu": "4000", "memory": "10000", "pods": "110"}),
    );
    let got = scores(
        &f,
        vec![four(), same],
        vec![empty("e1", "node1"), empty("e2", "node1")],
        with_containers("p", None, &[]),
    );
    assert_eq!(got, [100, 100]);
    // nothing scheduled, resources requested, differently sized nodes
    let incoming = with_containers(
        "p",
        None,
        &[
            json!({"cpu": "1000", "memory": "2000"}),
            json!({"cpu": "2000", "memory": "3000"}),
        ],
    );
    let got = scores(
        &f,
        vec![four(), six.clone()],
        vec![empty("e1", "node1"), empty("e2", "node1")],
        incoming,
    );
    assert_eq!(got, [38, 50]);
    // no resources requested, pods scheduled with resources
    let used = |n: &str, on: &str| {
        with_containers(n, Some(on), &[json!({"cpu": "3000", "memory": "5000"})])
    };
    let got = scores(
        &f,
        vec![four(), six],
        vec![used("u1", "node1"), used("u2", "node2")],
        with_containers("p", None, &[]),
    );
    assert_eq!(got, [38, 50]);
}

#[test]
fn broken_linear_function() {
    use crate::scheduler::plugins::resources::broken_linear_points;
    for (points, table) in [
        (
            vec![(10, 1), (90, 9)],
            vec![
                (-10, 1),
                (0, 1),
                (9, 1),
                (10, 1),
                (15, 1),
                (19, 1),
                (20, 2),
                (89, 8),
                (90, 9),
                (99, 9),
                (100, 9),
                (110, 9),
            ],
        ),
        (
            vec![(0, 2), (40, 10), (100, 0)],
            vec![
                (-10, 2),
                (0, 2),
                (20, 6),
                (30, 8),
                (40, 10),
                (70, 5),
                (100, 0),
                (110, 0),
            ],
        ),
        (
            vec![(0, 2), (40, 2), (100, 2)],
            vec![
                (-10, 2),
                (0, 2),
                (20, 2),
                (30, 2),
                (40, 2),
                (70, 2),
                (100, 2),
                (110, 2),
            ],
        ),
    ] {
        for (p, want) in table {
            assert_eq!(broken_linear_points(&points, p), want, "{points:?} p={p}");
        }
    }
}

/// kube's TestResourceBinPackingSingleExtended.
#[test]
fn resource_bin_packing_single_extended() {
    let f = fit(
        json!([{"name": "intel.com/foo", "weight": 1}]),
        json!([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 1}]),
    );
    let nodes = || {
        vec![
            node(
                "node1",
                json!({"cpu": "4", "memory": "10000Mi", "intel.com/foo": "8", "pods": "110"}),
            ),
            node(
                "node2",
                json!({"cpu": "4", "memory": "10000Mi", "intel.com/foo": "4", "pods": "110"}),
            ),
        ]
    };
    let foo = |n: &str| with_containers("p", None, &[json!({"intel.com/foo": n})]);
    let none = || with_containers("p", None, &[]);
    assert_eq!(
        scores(&f, nodes(), vec![], none()),
        [0, 0],
        "nothing scheduled, nothing requested"
    );
    let idle = with_containers("x", Some("node1"), &[]);
    assert_eq!(
        scores(&f, nodes(), vec![idle.clone()], foo("2")),
        [2, 5],
        "resources requested, pods scheduled with less resources"
    );
    let busy = with_containers("x", Some("node2"), &[json!({"intel.com/foo": "2"})]);
    assert_eq!(
        scores(&f, nodes(), vec![busy], foo("2")),
        [2, 10],
        "resources requested, pods scheduled with resources, on node with existing pod running"
    );
    assert_eq!(
        scores(&f, nodes(), vec![idle], foo("4")),
        [5, 10],
        "resources requested, pods scheduled with more resources"
    );
}

#[test]
fn shape_is_validated_as_kube_does() {
    let err = |shape: Value| {
        let args: FitArgs = serde_json::from_value(json!({"scoringStrategy": {
            "type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": shape}}}))
        .unwrap();
        NodeResourcesFit::new(args)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(err(json!([])).contains("at least one point must be specified"));
    assert!(
        err(json!([{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]))
            .contains("utilization values must be sorted in increasing order")
    );
    assert!(err(json!([{"utilization": 101, "score": 1}])).contains("not in valid range [0, 100]"));
    assert!(err(json!([{"utilization": 10, "score": 11}])).contains("not in valid range [0, 10]"));
    assert_eq!(err(json!([{"utilization": 10, "score": 10}])), "");
}
