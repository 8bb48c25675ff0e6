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

/// "calculate with multiple NUMA-level resources": zone 0 holds podProd (bound to NUMA 0),
/// both zones share podProd1 and the Mid pod; the batch pod and the finished pod count
/// nowhere.
#[test]
fn calculate_with_multiple_numa_level_resources() {
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
            "podProd",
            json!({"labels": {"koordinator.sh/qosClass": "LS"}, "annotations": {
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
            "podsMetric": [pod_metric("podProd", "5", "5G"), pod_metric("podProd1", "6", "6G"),
                pod_metric("podBatch", "10", "10G"), pod_metric("podMid", "22", "22G")]}}))
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
    let got: Vec<(String, Res)> = batch_zones(&inp, &metric, Some(&nrt))
        .into_iter()
        .map(|z| (z.zone, z.terms.result))
        .collect();
    let want = [
        // 50 - 17.5 - 3.5 - (14 + 5); 62G - 21.7G - 6G - (14G + 5G)
        ("node-0", 10_000, 15_300_000_000),
        // 50 - 17.5 - 3.5 - 14; 58G - 20.3G - 6G - 14G
        ("node-1", 15_000, 17_700_000_000),
    ];
    let want: Vec<(String, Res)> = want
        .into_iter()
        .map(|(z, cpu, memory)| (z.to_string(), Res { cpu, memory }))
        .collect();
    assert_eq!(got, want);
    assert!(
        batch_zones(&inp, &metric, None).is_empty(),
        "no NRT, no zones"
    );
}
