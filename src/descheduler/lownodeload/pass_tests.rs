use std::sync::Arc;

use serde_json::json;

use super::super::args::RawArgs;
use super::*;
use crate::descheduler::framework::metric::MetricView;

const NOW: i64 = 1_800_000_000_000;

fn node(name: &str) -> Arc<Node> {
    Arc::new(serde_json::from_value(json!({"metadata": {"name": name}, "status": {"allocatable": {"cpu": "10", "memory": "10Gi"}}})).unwrap())
}

/// A batch pod (not prod: LowNodeLoad's prod pass leaves it).
fn pod(name: &str, node: &str) -> Arc<PodView> {
    Arc::new(PodView::json(
        json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"koordinator.sh/priority-class": "koord-batch"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
    ))
}

fn metric(node: &str, age_s: i64, pods: &[(&str, &str)]) -> Arc<MetricView> {
    let t = k8s_openapi::jiff::Timestamp::from_millisecond(NOW - age_s * 1000)
        .unwrap()
        .to_string();
    let pm: Vec<serde_json::Value> = pods
        .iter()
        .map(|(n, cpu)| json!({"namespace": "d", "name": n, "priority": "koord-batch", "podUsage": {"resources": {"cpu": cpu, "memory": "100Mi"}}}))
        .collect();
    view(
        json!({"metadata": {"name": node}, "spec": {}, "status": {"updateTime": t,
        "nodeMetric": {"nodeUsage": {"resources": {}}, "systemUsage": {"resources": {"cpu": "500m", "memory": "1Gi"}}},
        "podsMetric": pm}}),
    )
}

fn view(v: serde_json::Value) -> Arc<MetricView> {
    let m: crate::api::slo::NodeMetric = serde_json::from_value(v).unwrap();
    Arc::new(MetricView::from(&m))
}

fn cluster(hot_age_s: i64) -> Vec<NodeInput> {
    vec![
        NodeInput {
            node: node("hot"),
            metric: Some(metric("hot", hot_age_s, &[("a", "4"), ("b", "4")])),
            pods: vec![pod("a", "hot"), pod("b", "hot")],
        },
        NodeInput {
            node: node("cold"),
            metric: Some(metric("cold", 10, &[("c", "1")])),
            pods: vec![pod("c", "cold")],
        },
        NodeInput {
            node: node("cool"),
            metric: Some(metric("cool", 10, &[])),
            pods: vec![],
        },
    ]
}

fn plugin(extra: serde_json::Value) -> LowNodeLoad {
    let mut v = json!({"highThresholds": {"cpu": 70, "memory": 90}, "lowThresholds": {"cpu": 30, "memory": 50}});
    json_patch::merge(&mut v, &extra);
    LowNodeLoad::new(Args::new(serde_json::from_value::<RawArgs>(v).unwrap()).unwrap())
}

#[test]
fn a_hot_node_is_relieved_after_consecutive_abnormal_passes() {
    let mut p = plugin(json!({}));
    let inputs = cluster(10);
    let mut evicted = Vec::new();
    for pass in 0..6 {
        let out = p.balance(&inputs, NOW + pass, &|_| true, &mut |c, _, _| {
            evicted.push(c.pod.name.clone());
            true
        });
        assert!(out.skipped.is_empty());
        if pass < 5 {
            assert!(
                out.evicted.is_empty(),
                "pass {pass}: only the 6th consecutive abnormal pass acts"
            );
        } else {
            // 8.5 of 10 CPUs: one 4-CPU pod brings it to 4.5, under 70 %.
            assert_eq!(out.evicted.len(), 1, "{out:?}");
            assert_eq!(out.evicted[0].node, "hot");
        }
    }
    assert_eq!(evicted.len(), 1);
}

#[test]
fn expired_metrics_skip_nodes_and_dry_filters_hold() {
    let mut p = plugin(json!({"anomalyCondition": {"consecutiveAbnormalities": 1}}));
    let out = p.balance(&cluster(600), NOW, &|_| true, &mut |_, _, _| true);
    assert_eq!(out.skipped.len(), 1);
    assert!(out.skipped[0].1.contains("expired"), "{:?}", out.skipped);
    assert!(out.evicted.is_empty());
    // A filter that refuses every pod: nothing moves.
    let out = p.balance(&cluster(10), NOW, &|_| false, &mut |_, _, _| true);
    assert!(out.evicted.is_empty());
    let out = p.balance(&cluster(10), NOW, &|_| true, &mut |_, _, _| true);
    assert_eq!(out.evicted.len(), 1);
    let mut paused =
        plugin(json!({"paused": true, "anomalyCondition": {"consecutiveAbnormalities": 1}}));
    assert!(
        paused
            .balance(&cluster(10), NOW, &|_| true, &mut |_, _, _| true)
            .evicted
            .is_empty()
    );
}

#[test]
fn prod_pods_leave_a_node_whose_prod_usage_is_over_its_prod_threshold() {
    let mut p = plugin(
        json!({"prodHighThresholds": {"cpu": 50}, "prodLowThresholds": {"cpu": 20},
        "anomalyCondition": {"consecutiveAbnormalities": 1}}),
    );
    let t = k8s_openapi::jiff::Timestamp::from_millisecond(NOW - 10_000)
        .unwrap()
        .to_string();
    let usage = |n: &str, class: &str, cpu: &str| json!({"namespace": "d", "name": n, "priority": class, "podUsage": {"resources": {"cpu": cpu, "memory": "100Mi"}}});
    let prodhot = view(
        json!({"metadata": {"name": "prodhot"}, "spec": {}, "status": {"updateTime": t,
            "nodeMetric": {"nodeUsage": {"resources": {}}, "systemUsage": {"resources": {"cpu": "500m", "memory": "1Gi"}}},
            "podsMetric": [usage("p1", "koord-prod", "3"), usage("p2", "koord-prod", "2500m"), usage("b", "koord-batch", "1")]}}),
    );
    let prod_pod = |name: &str| {
        Arc::new(PodView::json(
            json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"nodeName": "prodhot", "priority": 9500, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
        ))
    };
    let inputs = vec![
        NodeInput {
            node: node("prodhot"),
            metric: Some(prodhot),
            pods: vec![prod_pod("p1"), prod_pod("p2"), pod("b", "prodhot")],
        },
        NodeInput {
            node: node("cold"),
            metric: Some(metric("cold", 10, &[("c", "1")])),
            pods: vec![pod("c", "cold")],
        },
        NodeInput {
            node: node("cool"),
            metric: Some(metric("cool", 10, &[])),
            pods: vec![],
        },
    ];
    let out = p.balance(&inputs, NOW, &|_| true, &mut |_, _, _| true);
    // 5.5 prod CPUs over a 5-CPU prod threshold: the 2.5-CPU pod covers the excess best.
    assert_eq!(
        out.evicted
            .iter()
            .map(|d| d.pod.as_str())
            .collect::<Vec<_>>(),
        ["d/p2"],
        "{out:?}"
    );
    assert!(
        out.evicted[0]
            .reason
            .ends_with("overutilized, prod cpu usage(55.00%)>threshold(50.00%)"),
        "{}",
        out.evicted[0].reason
    );
}
