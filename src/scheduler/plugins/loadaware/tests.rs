use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::scheduler::framework::{ClusterState, Code};
use crate::scheduler::test_util::{cluster, node_json, pod};

const NOW: &str = "2026-11-22T10:00:00Z";

fn now_ms() -> i64 {
    NOW.parse::<k8s_openapi::jiff::Timestamp>()
        .unwrap()
        .as_millisecond()
}

fn plugin(args: Value) -> LoadAware {
    LoadAware::new(serde_json::from_value(args).unwrap()).unwrap()
}

fn metric(
    node: &str,
    cpu: &str,
    mem: &str,
    age_secs: i64,
    pods: Value,
) -> Arc<crate::api::slo::NodeMetric> {
    let t = k8s_openapi::jiff::Timestamp::from_millisecond(now_ms() - age_secs * 1000).unwrap();
    Arc::new(serde_json::from_value(json!({"metadata": {"name": node}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {"updateTime": t.to_string(), "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": mem}}}, "podsMetric": pods}})).unwrap())
}

fn big_node() -> ClusterState {
    let mut c = cluster(vec![node_json("n1", "96", "512Gi")]);
    c.now_ms = now_ms();
    c
}

fn incoming() -> crate::scheduler::framework::PodInfo {
    pod(
        json!({"metadata": {"name": "in", "namespace": "default"}, "spec": {"containers": [{"name": "c",
        "resources": {"requests": {"cpu": "16", "memory": "32Gi"}, "limits": {"cpu": "16", "memory": "32Gi"}}}]}}),
    )
}

fn score(la: &LoadAware, c: &ClusterState) -> i64 {
    la.score(
        &CycleState::default(),
        &incoming(),
        c.node("n1").unwrap(),
        c,
    )
    .unwrap()
}

#[test]
fn worked_example_from_koordinators_test_score() {
    let la = plugin(json!({}));
    let mut c = big_node();
    c.upsert_metric(metric("n1", "0", "0", 10, json!([])));
    assert_eq!(
        score(&la, &c),
        90,
        "estimate 13.6 CPU / 22.4 Gi on an empty node"
    );
    c.upsert_metric(metric("n1", "32", "10Gi", 10, json!([])));
    assert_eq!(score(&la, &c), 72);
    let est = estimate(&la.args.factors, &incoming());
    assert_eq!(est["cpu"], 13600);
    assert_eq!(est["memory"], (22.4 * (1u64 << 30) as f64).round() as i64);
}

#[test]
fn estimator_defaults_tiers_and_limits() {
    let f = BTreeMap::from([("cpu".to_string(), 85), ("memory".to_string(), 70)]);
    let empty = pod(
        json!({"metadata": {"name": "e", "namespace": "d"}, "spec": {"containers": [{"name": "c"}]}}),
    );
    let e = estimate(&f, &empty);
    assert_eq!((e["cpu"], e["memory"]), (250, 200 * 1024 * 1024));
    let batch = pod(
        json!({"metadata": {"name": "b", "namespace": "d", "labels": {"koordinator.sh/priority-class": "koord-batch"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1000"}}}]}}),
    );
    let e = estimate(&f, &batch);
    assert_eq!(
        (e["cpu"], e["memory"]),
        (850, 700),
        "batch resources, stored under cpu/memory"
    );
    let capped = pod(
        json!({"metadata": {"name": "l", "namespace": "d"}, "spec": {"containers": [{"name": "c",
        "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]}}),
    );
    assert_eq!(
        estimate(&f, &capped)["cpu"],
        1700,
        "max(request, limit) × 85%"
    );
}

#[test]
fn filter_thresholds_expiry_and_exemptions() {
    let la = plugin(json!({"usageThresholds": {"cpu": 50, "memory": 95}}));
    let mut c = big_node();
    let check = |la: &LoadAware, c: &ClusterState, p: &crate::scheduler::framework::PodInfo| {
        la.filter(&CycleState::default(), p, c.node("n1").unwrap(), c)
    };
    assert!(
        check(&la, &c, &incoming()).is_success(),
        "no NodeMetric: not penalised"
    );
    // 32 + 13.6 = 45.6 of 96 → 48% ≤ 50.
    c.upsert_metric(metric("n1", "32", "10Gi", 10, json!([])));
    assert!(check(&la, &c, &incoming()).is_success());
    // 35 + 13.6 = 48.6 → 51% > 50.
    c.upsert_metric(metric("n1", "35", "10Gi", 10, json!([])));
    let s = check(&la, &c, &incoming());
    assert_eq!(
        (s.code, s.message()),
        (
            Code::Unschedulable,
            "node(s) cpu usage exceed threshold".to_string()
        )
    );
    let ds = pod(
        json!({"metadata": {"name": "ds", "namespace": "d", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x", "uid": "u", "controller": true}]},
        "spec": {"containers": [{"name": "c"}]}}),
    );
    assert!(
        check(&la, &c, &ds).is_success(),
        "DaemonSet pods always pass"
    );
    c.upsert_metric(metric("n1", "35", "10Gi", 400, json!([])));
    assert_eq!(
        check(&la, &c, &incoming()).message(),
        "node(s) nodeMetric expired"
    );
    let lenient = plugin(
        json!({"usageThresholds": {"cpu": 50}, "enableScheduleWhenNodeMetricsExpired": true}),
    );
    assert!(check(&lenient, &c, &incoming()).is_success());
    let disabled = plugin(json!({"usageThresholds": {"cpu": 0, "memory": 0}}));
    c.upsert_metric(metric("n1", "95", "500Gi", 10, json!([])));
    assert!(
        check(&disabled, &c, &incoming()).is_success(),
        "0 thresholds disable the filter"
    );
}

#[test]
fn node_annotation_overrides_thresholds() {
    let la = plugin(json!({"usageThresholds": {"cpu": 90}}));
    let mut n = node_json("n1", "96", "512Gi");
    n["metadata"]["annotations"] =
        json!({"scheduling.koordinator.sh/usage-thresholds": "{\"usageThresholds\":{\"cpu\":40}}"});
    let mut c = cluster(vec![n]);
    c.now_ms = now_ms();
    c.upsert_metric(metric("n1", "32", "10Gi", 10, json!([])));
    assert!(
        !la.filter(
            &CycleState::default(),
            &incoming(),
            c.node("n1").unwrap(),
            &c
        )
        .is_success()
    );
}

#[test]
fn recently_scheduled_pods_count_until_reported() {
    let la = plugin(json!({"usageThresholds": {"cpu": 50}}));
    let mut c = big_node();
    // 30 CPU reported; a pod of 20 CPU bound 5 s ago is not in the report yet: 30 + 17 + 13.6.
    c.upsert_metric(metric("n1", "30", "10Gi", 30, json!([])));
    let mut fresh = crate::scheduler::test_util::simple_pod("fresh", "20", "1Gi");
    c.now_ms = now_ms();
    c.assume(&fresh, "n1");
    let s = la.filter(
        &CycleState::default(),
        &incoming(),
        c.node("n1").unwrap(),
        &c,
    );
    assert!(!s.is_success(), "47 + 13.6 = 63% > 50%");
    // Once it is reported with its real usage (2 CPU) and is older than the report, only
    // the report counts.
    c.remove_pod("default/fresh");
    fresh.node_name = Some("n1".into());
    fresh.scheduled_at_ms = Some(now_ms() - 600_000);
    c.assume(&fresh, "n1");
    let n1 = c.node("n1").unwrap().clone();
    let mut c2 = big_node();
    c2.upsert_node(n1.node.clone());
    let mut p = (*n1.pods[0]).clone();
    p.scheduled_at_ms = Some(now_ms() - 600_000);
    c2.nodes[0].add_pod(Arc::new(p));
    c2.upsert_metric(metric("n1", "30", "10Gi", 30, json!([{"namespace": "default", "name": "fresh", "podUsage": {"resources": {"cpu": "2", "memory": "1Gi"}}}])));
    assert!(
        la.filter(
            &CycleState::default(),
            &incoming(),
            c2.node("n1").unwrap(),
            &c2
        )
        .is_success(),
        "30 + 13.6 = 45%"
    );
}

#[test]
fn prod_thresholds_apply_to_prod_pods_only() {
    let la = plugin(json!({"usageThresholds": {"cpu": 90}, "prodUsageThresholds": {"cpu": 20}}));
    let mut c = big_node();
    let prod_existing = pod(
        json!({"metadata": {"name": "web", "namespace": "d"}, "spec": {"priority": 9000, "nodeName": "n1",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]}}),
    );
    c.upsert_pod(prod_existing.pod.clone());
    c.upsert_metric(metric("n1", "40", "10Gi", 10, json!([{"namespace": "d", "name": "web", "podUsage": {"resources": {"cpu": "10"}}, "priority": "koord-prod"}])));
    let prod_in = pod(
        json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"priority": 9000, "containers": [{"name": "c", "resources": {"requests": {"cpu": "10"}}}]}}),
    );
    // prod usage 10 + 8.5 = 18.5 → 19% ≤ 20.
    assert!(
        la.filter(&CycleState::default(), &prod_in, c.node("n1").unwrap(), &c)
            .is_success()
    );
    let big_prod = pod(
        json!({"metadata": {"name": "q", "namespace": "d"}, "spec": {"priority": 9000, "containers": [{"name": "c", "resources": {"requests": {"cpu": "12"}}}]}}),
    );
    assert!(
        !la.filter(&CycleState::default(), &big_prod, c.node("n1").unwrap(), &c)
            .is_success(),
        "10 + 10.2 → 21%"
    );
    let batch = pod(
        json!({"metadata": {"name": "b", "namespace": "d"}, "spec": {"priority": 5000, "containers": [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": "12000"}}}]}}),
    );
    assert!(
        la.filter(&CycleState::default(), &batch, c.node("n1").unwrap(), &c)
            .is_success(),
        "normal thresholds: 40 + 10.2 → 53% ≤ 90"
    );
}

#[test]
fn aggregated_thresholds_read_percentiles() {
    let la = plugin(
        json!({"aggregated": {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95", "usageAggregatedDuration": "5m"}}),
    );
    let mut c = big_node();
    let t = k8s_openapi::jiff::Timestamp::from_millisecond(now_ms() - 10_000).unwrap();
    let m: crate::api::slo::NodeMetric = serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {},
        "status": {"updateTime": t.to_string(), "nodeMetric": {"nodeUsage": {"resources": {"cpu": "10"}},
            "aggregatedNodeUsages": [{"duration": "5m0s", "usage": {"p95": {"resources": {"cpu": "50"}}}}]}}})).unwrap();
    c.upsert_metric(Arc::new(m));
    let s = la.filter(
        &CycleState::default(),
        &incoming(),
        c.node("n1").unwrap(),
        &c,
    );
    assert_eq!(
        s.message(),
        "node(s) cpu aggregated usage exceed threshold",
        "p95 50 + 13.6 → 66%"
    );
}

#[test]
fn args_validation_and_vector() {
    let la = plugin(json!({"supportedResources": ["nvidia.com/gpu"], "dominantResourceWeight": 1}));
    assert!(la.resources.contains(&"nvidia.com/gpu".to_string()));
    use crate::scheduler::framework::res::{R_CPU, R_MEMORY};
    let amounts = |cpu, mem| {
        ResVec::from_amounts(&BTreeMap::from([
            ("cpu".to_string(), cpu),
            ("memory".to_string(), mem),
        ]))
    };
    let (used, alloc) = (amounts(50, 10), amounts(100, 100));
    let w = [(R_CPU, 1), (R_MEMORY, 1)];
    assert_eq!(
        score_of(&[R_CPU, R_MEMORY], &w, 1, |r| used.get(r), &alloc),
        (50 + 90 + 50) / 3
    );
    for bad in [
        json!({"resourceWeights": {"cpu": 0}}),
        json!({"estimatedScalingFactors": {"cpu": 101}}),
        json!({"aggregated": {"usageAggregationType": "p42"}}),
        json!({"estimator": "fancy"}),
    ] {
        assert!(
            LoadAware::new(serde_json::from_value(bad.clone()).unwrap()).is_err(),
            "{bad}"
        );
    }
}

/// The plugin keeps what it derives from a node in the node's memo: every change of the
/// node (its pods, its object, its NodeMetric) must be seen by the next cycle.
#[test]
fn what_it_derives_from_a_node_follows_the_node() {
    let la = plugin(json!({"usageThresholds": {"cpu": 50}}));
    let mut c = big_node();
    let check = |c: &ClusterState| {
        la.filter(
            &CycleState::default(),
            &incoming(),
            c.node("n1").unwrap(),
            c,
        )
        .is_success()
    };
    c.upsert_metric(metric("n1", "30", "10Gi", 30, json!([])));
    assert!(check(&c), "30 + 13.6 = 45% ≤ 50%");
    let fresh = crate::scheduler::test_util::simple_pod("fresh", "20", "1Gi");
    c.assume(&fresh, "n1");
    assert!(
        !check(&c),
        "a pod assumed since: 30 + 17 + 13.6 = 63% > 50%"
    );
    let mut n = node_json("n1", "96", "512Gi");
    n["metadata"]["annotations"] =
        json!({"scheduling.koordinator.sh/usage-thresholds": "{\"usageThresholds\":{\"cpu\":70}}"});
    c.upsert_node(Arc::new(serde_json::from_value(n).unwrap()));
    assert!(check(&c), "the node's new override: 63% ≤ 70%");
    c.upsert_metric(metric("n1", "45", "10Gi", 30, json!([])));
    assert!(!check(&c), "a new NodeMetric: 45 + 17 + 13.6 = 79% > 70%");
    c.remove_metric("n1");
    assert!(check(&c), "no NodeMetric: not penalised");
}
