//! Hand-computed cases of the batch and mid formulas (`pkg/slo-controller/noderesource/plugins/batchresource/plugin.go`).

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::calc::Res;
use super::*;
use crate::api::extension::resources::{BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY};
use crate::api::slo::NodeMetric;
use crate::api::sloconfig::SloConfig;

const GI: i64 = 1 << 30;
const NOW: i64 = 1_800_000_000_000;

fn node(extra: Value) -> Node {
    let mut n = json!({"metadata": {"name": "n1"}, "status": {
        "capacity": {"cpu": "100", "memory": "400Gi"},
        "allocatable": {"cpu": "98", "memory": "390Gi"}}});
    merge(&mut n, extra);
    serde_json::from_value(n).unwrap()
}

fn merge(a: &mut Value, b: Value) {
    if let (Value::Object(a), Value::Object(b)) = (&mut *a, &b) {
        for (k, v) in b {
            merge(a.entry(k.clone()).or_insert(Value::Null), v.clone());
        }
    } else {
        *a = b;
    }
}

fn pod(name: &str, phase: &str, labels: Value, cpu: &str, mem: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
        "status": {"phase": phase}}))
    .unwrap()
}

fn pods() -> Vec<Pod> {
    vec![
        pod("p1", "Running", json!({}), "10", "20Gi"),
        pod("p2", "Pending", json!({}), "5", "10Gi"),
        pod(
            "p3",
            "Running",
            json!({"koordinator.sh/priority-class": "koord-batch"}),
            "30",
            "30Gi",
        ),
        pod("p4", "Succeeded", json!({}), "50", "50Gi"),
        pod(
            "p5",
            "Running",
            json!({"koordinator.sh/qosClass": "LSE"}),
            "8",
            "8Gi",
        ),
    ]
}

fn usage(cpu: &str, mem: &str) -> Value {
    json!({"resources": {"cpu": cpu, "memory": mem}})
}

fn metric(age_ms: i64) -> NodeMetric {
    let ts = k8s_openapi::jiff::Timestamp::from_millisecond(NOW - age_ms).unwrap();
    serde_json::from_value(json!({
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": "n1"}, "spec": {},
        "status": {
            "updateTime": ts.to_string(),
            "nodeMetric": {"nodeUsage": usage("30", "100Gi"), "systemUsage": usage("3", "8Gi")},
            "prodReclaimableMetric": {"resource": usage("5", "20Gi")},
            "podsMetric": [
                {"namespace": "default", "name": "p1", "podUsage": usage("4", "25Gi"), "priority": "koord-prod"},
                {"namespace": "default", "name": "p3", "podUsage": usage("20", "20Gi"), "priority": "koord-batch"},
                {"namespace": "default", "name": "p4", "podUsage": usage("1", "1Gi"), "priority": "koord-prod"},
                {"namespace": "default", "name": "p5", "podUsage": usage("2", "6Gi"), "priority": "koord-prod"},
                {"namespace": "default", "name": "gone-batch", "podUsage": usage("7", "7Gi"), "priority": "koord-batch"}
            ]}}))
    .unwrap()
}

fn config(colocation: Value) -> SloConfig {
    let data = [("colocation-config".to_string(), colocation.to_string())]
        .into_iter()
        .collect();
    let (cfg, errors) = SloConfig::parse(Some(&data), &SloConfig::default());
    assert!(errors.is_empty(), "{errors:?}");
    cfg
}

fn run(n: &Node, m: Option<&NodeMetric>, cfg: &SloConfig) -> Plan {
    let pods = pods();
    let refs: Vec<&Pod> = pods.iter().collect();
    plan(n, &refs, m, &Default::default(), None, cfg, NOW, None)
}

#[test]
fn batch_usage_policy_counts_every_term() {
    let p = run(
        &node(json!({})),
        Some(&metric(10_000)),
        &config(json!({"enable": true})),
    );
    let b = p.calc.batch.as_ref().unwrap();
    assert_eq!(
        b.safety_margin,
        Res {
            cpu: 40_000,
            memory: 140 * GI
        }
    );
    assert_eq!(
        b.node_reserved,
        Res {
            cpu: 2_000,
            memory: 10 * GI
        }
    );
    assert_eq!(
        b.system_or_reserved,
        Res {
            cpu: 3_000,
            memory: 10 * GI
        }
    );
    assert_eq!(
        b.hp_request,
        Res {
            cpu: 23_000,
            memory: 38 * GI
        }
    );
    // p1 usage + p2 request (no metric) + p5 LSE {request cpu, usage memory} + dangling p4.
    assert_eq!(
        b.hp_used,
        Res {
            cpu: 18_000,
            memory: 42 * GI
        }
    );
    // The pod without a metric adds nothing here (Koordinator's quirk).
    assert_eq!(
        b.hp_max_used_request,
        Res {
            cpu: 19_000,
            memory: 34 * GI
        }
    );
    assert_eq!((b.pods_without_metric, b.dangling_metrics), (1, 1));
    assert_eq!(p.want.get(BATCH_CPU), Some(&39_000));
    assert_eq!(p.want.get(BATCH_MEMORY), Some(&(208 * GI)));
    assert!(!p.calc.degraded);
}

#[test]
fn batch_policies_and_threshold_caps() {
    let m = metric(0);
    let n = node(json!({}));
    let p = run(
        &n,
        Some(&m),
        &config(
            json!({"enable": true, "cpuCalculatePolicy": "maxUsageRequest", "memoryCalculatePolicy": "request"}),
        ),
    );
    assert_eq!(
        (p.want[BATCH_CPU], p.want[BATCH_MEMORY]),
        (38_000, 212 * GI)
    );
    let p = run(
        &n,
        Some(&m),
        &config(json!({"enable": true, "memoryCalculatePolicy": "maxUsageRequest"})),
    );
    assert_eq!(p.want[BATCH_MEMORY], 216 * GI);
    // CPU does not honour `request`.
    let p = run(
        &n,
        Some(&m),
        &config(json!({"enable": true, "cpuCalculatePolicy": "request"})),
    );
    assert_eq!(p.want[BATCH_CPU], 39_000);
    let p = run(
        &n,
        Some(&m),
        &config(
            json!({"enable": true, "batchCPUThresholdPercent": 30, "batchMemoryThresholdPercent": 10}),
        ),
    );
    assert_eq!((p.want[BATCH_CPU], p.want[BATCH_MEMORY]), (30_000, 40 * GI));
}

#[test]
fn reserve_ratios_and_reservation_annotation() {
    let m = metric(0);
    let p = run(
        &node(json!({})),
        Some(&m),
        &config(json!({"enable": true, "cpuReclaimThresholdPercent": 80})),
    );
    assert_eq!(p.want[BATCH_CPU], 100_000 - 20_000 - 3_000 - 18_000);
    let labelled = node(
        json!({"metadata": {"labels": {"node.koordinator.sh/cpu-reclaim-ratio": "0.5"},
        "annotations": {"node.koordinator.sh/reservation": "{\"resources\":{\"memory\":\"20Gi\"},\"reservedCPUs\":\"0-7\"}"}}}),
    );
    let p = run(&labelled, Some(&m), &config(json!({"enable": true})));
    let b = p.calc.batch.as_ref().unwrap();
    assert_eq!(
        b.annotation_reserved,
        Res {
            cpu: 8_000,
            memory: 20 * GI
        }
    );
    assert_eq!(p.want[BATCH_CPU], 100_000 - 50_000 - 8_000 - 18_000);
    assert_eq!(p.want[BATCH_MEMORY], (400 - 140 - 20 - 42) * GI);
}

#[test]
fn node_config_overrides_cluster() {
    let cfg = config(json!({"enable": true, "nodeConfigs": [
        {"nodeSelector": {"matchLabels": {"pool": "x"}}, "memoryReclaimThresholdPercent": 75}]}));
    let p = run(
        &node(json!({"metadata": {"labels": {"pool": "x"}}})),
        Some(&metric(0)),
        &cfg,
    );
    assert_eq!(p.want[BATCH_MEMORY], (400 - 100 - 10 - 42) * GI);
}

#[test]
fn degradation_and_disable_remove_resources() {
    let cfg = config(json!({"enable": true, "degradeTimeMinutes": 15}));
    let n = node(json!({}));
    let exactly = run(&n, Some(&metric(15 * 60_000)), &cfg);
    assert!(!exactly.calc.degraded);
    let stale = run(&n, Some(&metric(15 * 60_000 + 1)), &cfg);
    assert!(stale.calc.degraded && stale.want.is_empty());
    let missing = run(&n, None, &cfg);
    assert!(missing.calc.degraded && missing.want.is_empty());
    let patch = missing.status.unwrap();
    assert_eq!(patch["status"]["allocatable"][BATCH_CPU], Value::Null);
    let off = run(&n, Some(&metric(0)), &config(json!({"enable": false})));
    assert!(off.want.is_empty() && off.calc.message.contains("DisableInConfig"));
    let absent = run(&n, Some(&metric(0)), &SloConfig::default());
    assert!(absent.want.is_empty());
}

#[test]
fn mid_dynamic_and_static() {
    let m = metric(0);
    let p = run(
        &node(json!({})),
        Some(&m),
        &config(json!({"enable": true, "midUnallocatedPercent": 10})),
    );
    let mid = p.calc.mid.as_ref().unwrap();
    assert_eq!(
        mid.unallocated,
        Res {
            cpu: 74_000,
            memory: 352 * GI
        }
    );
    assert_eq!(p.want[MID_CPU], 5_000 + 7_400);
    assert_eq!(p.want[MID_MEMORY], 20 * GI + 352 * GI / 10);
    let capped = run(
        &node(json!({})),
        Some(&m),
        &config(json!({"enable": true, "midCPUThresholdPercent": 3})),
    );
    assert_eq!(capped.want[MID_CPU], 3_000);
    let st = run(
        &node(json!({})),
        Some(&m),
        &config(json!({"enable": true, "midReclaimMode": "static",
        "midStaticCPUReservedPercent": 10, "midStaticMemoryReservedPercent": 50, "midMemoryThresholdPercent": 20})),
    );
    assert_eq!((st.want[MID_CPU], st.want[MID_MEMORY]), (10_000, 80 * GI));
}

#[test]
fn pods_without_metrics_and_terminated_pods() {
    let m = metric(0);
    let only: Vec<Pod> = vec![
        pod("p2", "Pending", json!({}), "5", "10Gi"),
        pod("p9", "Failed", json!({}), "90", "90Gi"),
    ];
    let refs: Vec<&Pod> = only.iter().collect();
    let cfg = config(json!({"enable": true}));
    let p = plan(
        &node(json!({})),
        &refs,
        Some(&m),
        &Default::default(),
        None,
        &cfg,
        NOW,
        None,
    );
    let b = p.calc.batch.unwrap();
    // p2 counts by request; p1, p4 and p5 metrics are dangling (no active pod): usage counts.
    assert_eq!(
        b.hp_used,
        Res {
            cpu: 5_000 + 4_000 + 1_000 + 2_000,
            memory: (10 + 25 + 1 + 6) * GI
        }
    );
    assert_eq!(b.dangling_metrics, 3);
}

#[test]
fn host_applications_and_third_party_allocations() {
    let mut m = metric(0);
    m.status.as_mut().unwrap().host_application_metric = serde_json::from_value(json!([
        {"name": "prod-agent", "usage": usage("2", "1Gi"), "priority": "koord-prod"},
        {"name": "batch-agent", "usage": usage("9", "9Gi"), "priority": "koord-batch"}]))
    .unwrap();
    let n = node(
        json!({"metadata": {"annotations": {"node.koordinator.sh/thirdPartyAllocations":
        "{\"allocations\":[{\"name\":\"x\",\"priority\":\"koord-batch\",\"resources\":{\"kubernetes.io/batch-cpu\":\"1000\"}}]}"}}}),
    );
    let p = run(&n, Some(&m), &config(json!({"enable": true})));
    assert_eq!(
        p.calc.batch.as_ref().unwrap().system_used,
        Res {
            cpu: 5_000,
            memory: 9 * GI
        }
    );
    assert_eq!(p.want[BATCH_CPU], 100_000 - 40_000 - 5_000 - 18_000 - 1_000);
    let meta = p.meta.unwrap().to_string();
    assert!(
        meta.contains("originExtendedAllocatable") && meta.contains("37000"),
        "{meta}"
    );
}

#[test]
fn diff_threshold_and_forced_refresh() {
    let d = |v: i64| -> Desired { [(BATCH_CPU, v)].into_iter().collect() };
    assert!(!differs(&d(10_000), &d(10_999), 0.1));
    assert!(!differs(&d(10_000), &d(11_000), 0.1));
    assert!(differs(&d(10_000), &d(11_001), 0.1));
    assert!(differs(&d(0), &d(1), 0.1));
    assert!(differs(&Desired::new(), &d(0), 0.1));
    assert!(!differs(&Desired::new(), &Desired::new(), 0.1));

    let cfg = config(json!({"enable": true, "updateTimeThresholdSeconds": 300}));
    let m = metric(0);
    let synced = node(
        json!({"status": {"allocatable": {BATCH_CPU: "39500", BATCH_MEMORY: "223338299392",
        MID_CPU: "5000", MID_MEMORY: "21474836480"}}}),
    );
    let pods = pods();
    let refs: Vec<&Pod> = pods.iter().collect();
    let recent = plan(
        &synced,
        &refs,
        Some(&m),
        &Default::default(),
        None,
        &cfg,
        NOW,
        Some(NOW - 299_000),
    );
    assert!(
        recent.status.is_none(),
        "within threshold and recently synced"
    );
    let old = plan(
        &synced,
        &refs,
        Some(&m),
        &Default::default(),
        None,
        &cfg,
        NOW,
        Some(NOW - 301_000),
    );
    assert!(
        old.status.is_some(),
        "forced refresh after updateTimeThresholdSeconds"
    );
}
