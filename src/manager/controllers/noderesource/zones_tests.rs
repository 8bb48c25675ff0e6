//! Koordinator's `TestPluginCalculate` NUMA-level cases (`batchresource/plugin_test.go`).

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::api::sloconfig::{ColocationCfg, ColocationStrategy};

const NOW: i64 = 1_800_000_000_000;

fn pod(name: &str, meta: Value, spec: Value, phase: &str) -> Pod {
    let mut p = json!({"metadata": {"name": name, "namespace": "test"},
        "spec": {"nodeName": "test-node1", "containers": [{"name": "c",
            "resources": {"requests": {"cpu": "10", "memory": "10G"}}}]},
        "status": {"phase": phase}});
    for (k, v) in meta.as_object().unwrap() {
        p["metadata"][k] = v.clone();
    }
    for (k, v) in spec.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    serde_json::from_value(p).unwrap()
}

fn usage(cpu: &str, mem: &str) -> Value {
    json!({"resources": {"cpu": cpu, "memory": mem}})
}

fn pod_metric(name: &str, cpu: &str, mem: &str) -> Value {
    json!({"namespace": "test", "name": name, "podUsage": usage(cpu, mem)})
}

fn zone(i: usize, cpu: &str, mem: &str) -> Value {
    let r = |n: &str, q: &str| json!({"name": n, "capacity": q, "allocatable": q, "available": q});
    json!({"name": format!("node-{i}"), "type": "Node", "resources": [r("cpu", cpu), r("memory", mem)]})
}

/// The pods of Koordinator's NUMA-level cases: podProd (LS, or LSE, bound to NUMA 0),
/// podProd1 and the Mid pod on both zones, a batch pod and a finished pod counting nowhere;
/// `metrics`: the pod metrics reported; `memory_by_request`: the memory policy.
fn zones_of(first: (&str, &str), metrics: Value, memory_by_request: bool) -> Vec<(String, Res)> {
    let (first_name, first_qos) = first;
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "test-node1"},
        "status": {"capacity": {"cpu": "100", "memory": "120G"},
                   "allocatable": {"cpu": "100", "memory": "120G"}}}))
    .unwrap();
    let two = json!({"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "10", "memory": "20G"}}},
        {"name": "b", "resources": {"requests": {"cpu": "10", "memory": "20G"}}}]});
    let mut mid = two.clone();
    mid["priorityClassName"] = json!("koord-mid");
    mid["priority"] = json!(7099);
    let pods = [
        pod(
            first_name,
            json!({"labels": {"koordinator.sh/qosClass": first_qos}, "annotations": {
                "scheduling.koordinator.sh/resource-status": "{\"numaNodeResources\": [{\"node\": 0}]}"}}),
            json!({}),
            "Running",
        ),
        pod(
            "podProd1",
            json!({}),
            json!({"priorityClassName": "koord-prod", "priority": 9999}),
            "Running",
        ),
        pod(
            "podBatch",
            json!({"labels": {"koordinator.sh/qosClass": "BE"}}),
            json!({}),
            "Running",
        ),
        pod(
            "podMid",
            json!({"labels": {"koordinator.sh/qosClass": "BE"}}),
            mid,
            "Pending",
        ),
        pod("podProd2", json!({"labels": {}}), json!({}), "Succeeded"),
    ];
    let pods: Vec<&Pod> = pods.iter().collect();
    let ts = k8s_openapi::jiff::Timestamp::from_millisecond(NOW).unwrap();
    let metric: NodeMetric = serde_json::from_value(json!({
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": "test-node1"}, "spec": {},
        "status": {"updateTime": ts.to_string(),
            "nodeMetric": {"nodeUsage": usage("50", "55G"), "systemUsage": usage("7", "12G")},
            "podsMetric": metrics}}))
    .unwrap();
    let nrt: NodeResourceTopology = serde_json::from_value(json!({
        "apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
        "metadata": {"name": "test-node1"}, "topologyPolicies": ["None"],
        "zones": [zone(0, "50", "62G"), zone(1, "50", "58G")]}))
    .unwrap();
    let strategy = ColocationStrategy {
        enable: Some(true),
        cpu_reclaim_threshold_percent: Some(65),
        memory_reclaim_threshold_percent: Some(65),
        degrade_time_minutes: Some(15),
        update_time_threshold_seconds: Some(300),
        resource_diff_threshold: Some(0.1),
        memory_calculate_policy: memory_by_request.then(|| "request".to_string()),
        ..Default::default()
    };
    let config = ColocationCfg::default();
    let inp = Inputs {
        node: &node,
        pods: &pods,
        metric: Some(&metric),
        config: &config,
        strategy: &strategy,
        now_ms: NOW,
    };
    assert!(
        batch_zones(&inp, &metric, None).is_empty(),
        "no NRT, no zones"
    );
    batch_zones(&inp, &metric, Some(&nrt))
        .into_iter()
        .map(|z| (z.zone, z.terms.result))
        .collect()
}

fn zones(want: [(&str, i64, i64); 2]) -> Vec<(String, Res)> {
    want.into_iter()
        .map(|(z, cpu, memory)| (z.to_string(), Res { cpu, memory }))
        .collect()
}

fn metrics(first: &str) -> Vec<Value> {
    vec![
        pod_metric(first, "5", "5G"),
        pod_metric("podProd1", "6", "6G"),
        pod_metric("podBatch", "10", "10G"),
        pod_metric("podMid", "22", "22G"),
    ]
}

#[test]
fn calculate_with_multiple_numa_level_resources() {
    let got = zones_of(("podProd", "LS"), json!(metrics("podProd")), false);
    assert_eq!(
        got,
        zones([
            // 50 - 17.5 - 3.5 - (14 + 5); 62G - 21.7G - 6G - (14G + 5G)
            ("node-0", 10_000, 15_300_000_000),
            // 50 - 17.5 - 3.5 - 14; 58G - 20.3G - 6G - 14G
            ("node-1", 15_000, 17_700_000_000),
        ])
    );
}

#[test]
fn calculate_with_memory_not_over_committed_lse_pods_and_numa_level_resources() {
    let got = zones_of(("podProdLSE", "LSE"), json!(metrics("podProdLSE")), true);
    assert_eq!(
        got,
        zones([
            // 50 - 17.5 - 3.5 - (14 + 10: an LSE pod counts its request); 62 - 21.7 - (25 + 10)
            ("node-0", 5_000, 5_300_000_000),
            ("node-1", 15_000, 12_700_000_000),
        ])
    );
}

#[test]
fn calculate_numa_resources_with_memory_not_over_committed_missing_metric_lse_pod_and_dangling_pod()
{
    let mut m = metrics("podProdLSE");
    m.remove(0);
    // podProd2 finished but still reported (prod): split over both zones.
    let dangling = json!({"namespace": "test", "name": "podProd2",
        "podUsage": usage("2", "4G"), "priority": "koord-prod", "qos": "LSR"});
    m.insert(1, dangling);
    let got = zones_of(("podProdLSE", "LSE"), json!(m), true);
    assert_eq!(
        got,
        zones([
            // 50 - 17.5 - 3.5 - (14 + 10 + 1)
            ("node-0", 4_000, 5_300_000_000),
            // 50 - 17.5 - 3.5 - (14 + 1)
            ("node-1", 14_000, 12_700_000_000),
        ])
    );
}

#[test]
fn calculate_numa_resources_with_memory_not_over_committed_some_pods_not_shown_in_list() {
    let mut m = metrics("podProdLSE");
    m.remove(0);
    let reported = |name: &str, cpu: &str, mem: &str, priority: &str| json!({"namespace": "test", "name": name, "podUsage": usage(cpu, mem), "priority": priority});
    m.insert(1, reported("podProd2", "2", "4G", "koord-prod"));
    // Reported, not in the list: a prod pod counts on both zones, a batch pod nowhere.
    m.push(reported("podProd3", "4", "8G", "koord-prod"));
    m.push(reported("podBatch2", "8", "8G", "koord-batch"));
    let got = zones_of(("podProdLSE", "LSE"), json!(m), true);
    assert_eq!(
        got,
        zones([
            // 50 - 17.5 - 3.5 - (14 + 10 + 1 + 2)
            ("node-0", 2_000, 5_300_000_000),
            // 50 - 17.5 - 3.5 - (14 + 1 + 2)
            ("node-1", 12_000, 12_700_000_000),
        ])
    );
}
