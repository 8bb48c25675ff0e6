use serde_json::json;

use super::*;

fn amounts(cpu: i64) -> Amounts {
    [("cpu".to_string(), cpu), ("memory".to_string(), 1)].into()
}

fn load(name: &str, used: i64) -> NodeLoad {
    NodeLoad {
        name: name.into(),
        allocatable: [("cpu".to_string(), 10_000), ("memory".to_string(), 1000)].into(),
        usage: amounts(used),
        prod_usage: Amounts::new(),
        low: amounts(3000),
        high: [("cpu".to_string(), 7000), ("memory".to_string(), 1000)].into(),
        prod_low: Amounts::new(),
        prod_high: Amounts::new(),
        schedulable: true,
        prod: false,
        high_pct: Default::default(),
        prod_high_pct: Default::default(),
    }
}

fn candidate(name: &str, cpu: i64, extra: serde_json::Value) -> Candidate {
    let mut p = json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"priority": 5500, "containers": [{"name": "c"}]}});
    json_patch::merge(&mut p, &extra);
    Candidate {
        pod: Arc::new(PodView::json(p)),
        usage: amounts(cpu),
        requests: amounts(cpu),
    }
}

fn target(name: &str, used: i64, node: serde_json::Value) -> Target {
    let mut n = json!({"metadata": {"name": name, "labels": {"zone": "a"}}});
    json_patch::merge(&mut n, &node);
    Target {
        load: load(name, used),
        node: Arc::new(serde_json::from_value(n).unwrap()),
        requested: Amounts::new(),
    }
}

fn daemonset(p: &PodView) -> bool {
    !p.owners.iter().any(|o| o.kind == "DaemonSet")
}

#[test]
fn evicts_the_best_fitting_pods_until_the_node_cools() {
    // hot: 9,000 m used, high 7,000 m: 2,000 m too much.
    let mut sources = vec![(
        load("hot", 9000),
        vec![
            candidate("big", 5000, json!({})),
            candidate("exact", 2000, json!({})),
            candidate("small", 500, json!({})),
            candidate(
                "ds",
                2000,
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x", "uid": "u", "controller": true}]}}),
            ),
        ],
    )];
    // A roomy target: 7,000 m before its high threshold, enough for big + exact.
    let mut targets = vec![target("cold", 0, json!({}))];
    let res = vec!["cpu".to_string(), "memory".to_string()];
    let mut calls = Vec::new();
    let out = balance(
        &mut sources,
        &mut targets,
        &res,
        true,
        &daemonset,
        &mut |c, _, _| {
            calls.push(c.pod.name.clone());
            true
        },
    );
    assert_eq!(
        calls,
        ["exact"],
        "the pod that just covers the excess; then the node is under 70 %"
    );
    assert_eq!(
        out[0].reason,
        "node is overutilized, node cpu usage(90.00%)>threshold(70.00%)"
    );
    assert_eq!(sources[0].0.usage["cpu"], 7000);
}

#[test]
fn node_fit_and_budget_limit_what_moves() {
    let res = vec!["cpu".to_string(), "memory".to_string()];
    let make = || {
        vec![(
            load("hot", 9500),
            vec![
                candidate("a", 1500, json!({})),
                candidate("b", 1000, json!({})),
            ],
        )]
    };
    // The only target is tainted: nothing fits, nothing moves.
    let mut sources = make();
    let mut tainted = vec![target(
        "cold",
        1000,
        json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
    )];
    let out = balance(
        &mut sources,
        &mut tainted,
        &res,
        true,
        &|_| true,
        &mut |_, _, _| true,
    );
    assert!(out.is_empty());
    // Without nodeFit the pods may go, but the target's room (7,000 − 6,500 = 500 m) runs out.
    let mut sources = make();
    let mut busy = vec![target("warm", 6500, json!({}))];
    let out = balance(
        &mut sources,
        &mut busy,
        &res,
        false,
        &|_| true,
        &mut |_, _, _| true,
    );
    assert_eq!(out.len(), 1, "{out:?}");
    // A pod selecting another zone does not fit the target.
    let mut sources = vec![(
        load("hot", 9500),
        vec![candidate(
            "z",
            1000,
            json!({"spec": {"nodeSelector": {"zone": "b"}}}),
        )],
    )];
    let mut t = vec![target("cold", 1000, json!({}))];
    assert!(
        balance(
            &mut sources,
            &mut t,
            &res,
            true,
            &|_| true,
            &mut |_, _, _| true
        )
        .is_empty()
    );
}
