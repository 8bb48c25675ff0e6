//! PodTopologySpread's defaults (kube-scheduler's podtopologyspread scoring_test.go and
//! args validation): system defaults spread a ReplicaSet's pods by hostname; List defaults
//! take the args' constraints; a pod nothing selects is not spread.

use std::sync::Arc;

use serde_json::{Value, json};

use super::spread::{Args, PodTopologySpread};
use crate::scheduler::framework::{ClusterState, Code, CycleState, Plugin};
use crate::scheduler::test_util::pod;

fn node(name: &str, zone: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})
}

fn member(name: &str, node: Option<&str>) -> Value {
    let mut p = json!({"metadata": {"name": name, "namespace": "default", "labels": {"foo": ""},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1", "uid": "rs1", "controller": true}]},
        "spec": {"containers": [{"name": "c"}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = n.into();
    }
    p
}

fn cluster() -> ClusterState {
    let mut c = ClusterState::default();
    for n in [
        node("node-a", "zone1"),
        node("node-b", "zone1"),
        node("node-c", "zone2"),
    ] {
        c.upsert_node(Arc::new(serde_json::from_value(n).unwrap()));
    }
    for (p, n) in [("p-a", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b")] {
        c.upsert_pod(Arc::new(
            serde_json::from_value(member(p, Some(n))).unwrap(),
        ));
    }
    let meta = serde_json::from_value(json!({"name": "rs1", "namespace": "default"})).unwrap();
    let sel =
        serde_json::from_value(json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]}))
            .unwrap();
    c.owners.upsert_controller("ReplicaSet", &meta, sel);
    c
}

/// PreScore, Score per node, NormalizeScore.
fn scores(pl: &PodTopologySpread, c: &ClusterState, p: Value) -> Option<Vec<i64>> {
    let p = pod(p);
    let mut state = CycleState::default();
    let feasible: Vec<usize> = (0..c.nodes.len()).collect();
    if pl.pre_score(&mut state, &p, &feasible, c).code == Code::Skip {
        return None;
    }
    let mut s: Vec<i64> = c
        .nodes
        .iter()
        .map(|n| pl.score(&state, &p, n, c).unwrap())
        .collect();
    pl.normalize(&state, &p, &mut s);
    Some(s)
}

#[test]
fn system_defaults_spread_a_replicaset_by_hostname() {
    // "default constraints and a replicaset": the zone default's key (topology.kubernetes.io/zone)
    // is on no node, so only hostname counts: 1, 2 and 0 siblings score
    // round(n·ln 5 + 2) = 4, 5, 2 → 100·(5+2−s)/5.
    let pl = PodTopologySpread::new(Args::default()).unwrap();
    let c = cluster();
    assert_eq!(scores(&pl, &c, member("p", None)), Some(vec![60, 40, 100]));
    let lone = json!({"metadata": {"name": "lone", "namespace": "default", "labels": {"foo": ""}},
        "spec": {"containers": [{"name": "c"}]}});
    assert_eq!(
        scores(&pl, &c, lone),
        None,
        "no controller, no Service: not spread"
    );
}

#[test]
fn list_defaults_use_the_args_constraints() {
    let args: Args = serde_json::from_value(json!({"defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]})).unwrap();
    let pl = PodTopologySpread::new(args).unwrap();
    let c = cluster();
    let p = pod(member("p", None));
    let mut state = CycleState::default();
    assert!(pl.pre_filter(&mut state, &p, &c).0.is_success());
    let verdicts: Vec<bool> = c
        .nodes
        .iter()
        .map(|n| pl.filter(&state, &p, n, &c).is_success())
        .collect();
    assert_eq!(
        verdicts,
        [false, false, true],
        "zone1 holds 3, zone2 none: max skew 1"
    );
    assert_eq!(
        scores(&pl, &c, member("p", None)),
        None,
        "no ScheduleAnyway defaults"
    );
}

#[test]
fn args_are_validated_like_upstream() {
    let bad = |v: Value| {
        PodTopologySpread::new(serde_json::from_value(v).unwrap())
            .err()
            .unwrap()
            .to_string()
    };
    let e = bad(json!({"defaultingType": "System",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}));
    assert!(e.contains("when .defaultConstraints are not empty"), "{e}");
    let e = bad(json!({"defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"a": "b"}}}]}));
    assert!(
        e.contains("constraint must not define a selector, as they deduced for each pod"),
        "{e}"
    );
    let e = bad(json!({"defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}));
    assert!(e.contains("maxSkew: Invalid value: 0"), "{e}");
    let e = bad(json!({"defaultingType": "Custom"}));
    assert!(e.contains("defaultingType: Unsupported value"), "{e}");
}

/// PreFilter, then Filter on every node: which nodes pass.
fn passes(pl: &PodTopologySpread, c: &ClusterState, p: Value) -> Vec<bool> {
    let p = pod(p);
    let mut state = CycleState::default();
    let (s, _) = pl.pre_filter(&mut state, &p, c);
    assert!(s.is_success(), "{}", s.message());
    c.nodes
        .iter()
        .map(|n| pl.filter(&state, &p, n, c).is_success())
        .collect()
}

fn web(name: &str, node: Option<&str>, version: &str, spread: Value) -> Value {
    let mut p = json!({"metadata": {"name": name, "namespace": "default",
            "labels": {"app": "web", "version": version}},
        "spec": {"containers": [{"name": "c"}], "topologySpreadConstraints": spread}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = n.into();
    }
    p
}

fn zones_with(pods: &[(&str, &str, &str)], taint_c: bool) -> ClusterState {
    let mut c = ClusterState::default();
    for (name, zone) in [
        ("node-a", "zone1"),
        ("node-b", "zone1"),
        ("node-c", "zone2"),
    ] {
        let mut n = node(name, zone);
        if taint_c && name == "node-c" {
            n["spec"] =
                json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]});
        }
        c.upsert_node(Arc::new(serde_json::from_value(n).unwrap()));
    }
    for (name, on, version) in pods {
        let p = web(name, Some(on), version, json!(null));
        c.upsert_pod(Arc::new(serde_json::from_value(p).unwrap()));
    }
    c
}

/// kube's podtopologyspread filtering cases with matchLabelKeys: the pod's own `version`
/// narrows the selector, so only pods of its version count.
#[test]
fn match_label_keys_count_only_the_pods_own_version() {
    let c = zones_with(
        &[
            ("v1-a", "node-a", "v1"),
            ("v2-c1", "node-c", "v2"),
            ("v2-c2", "node-c", "v2"),
        ],
        false,
    );
    let pl = PodTopologySpread::new(Args::default()).unwrap();
    let constraint = |keys: Value| {
        json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": keys}])
    };
    // Every version: zone1 1, zone2 2 — zone2 would be 3 against 1.
    let all = web("in", None, "v1", constraint(json!(null)));
    assert_eq!(passes(&pl, &c, all), [true, true, false]);
    // Its version only: zone1 1, zone2 0 — zone1 would be 2 against 0.
    let own = web("in", None, "v1", constraint(json!(["version"])));
    assert_eq!(passes(&pl, &c, own), [false, false, true]);
}

/// nodeTaintsPolicy: Ignore (the default) counts a domain whose only node the pod does not
/// tolerate; Honor leaves it out, so it does not hold the minimum at 0.
#[test]
fn node_taints_policy_honor_leaves_untolerated_nodes_out() {
    let c = zones_with(&[("web-a", "node-a", "v1")], true);
    let pl = PodTopologySpread::new(Args::default()).unwrap();
    let constraint = |policy: &str| {
        json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}, "nodeTaintsPolicy": policy}])
    };
    let ignore = passes(&pl, &c, web("in", None, "v1", constraint("Ignore")));
    assert_eq!(ignore[..2], [false, false], "zone2 counts with 0");
    let honor = passes(&pl, &c, web("in", None, "v1", constraint("Honor")));
    assert_eq!(
        honor[..2],
        [true, true],
        "zone2 is not a domain for this pod"
    );
}
