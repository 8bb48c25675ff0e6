//! The koordlet series under Koordinator's names and labels.
use super::*;

#[test]
fn share_pools_and_node_info_status() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    let nrt: crate::api::topology::NodeResourceTopology = serde_json::from_value(serde_json::json!({
        "apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
        "metadata": {"name": "n1", "annotations": {
            "node.koordinator.sh/cpu-shared-pools": r#"[{"cpuset":"2-3","node":0,"socket":0},{"cpuset":"5-6","node":1,"socket":1}]"#,
            "node.koordinator.sh/be-cpu-shared-pools": r#"[{"cpuset":"2-6","node":0,"socket":0}]"#}},
        "topologyPolicies": ["None"], "zones": []}))
    .unwrap();
    m.share_pools(&nrt, true);
    m.collected_node_info("n1", true, false);
    let scrape = registry.scrape();
    let value = |name: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .map(|s| format!("{:?}", s.value))
    };
    assert_eq!(
        value("koordlet_cpuset_share_pool_cpu_cores").as_deref(),
        Some("Gauge(4.0)")
    );
    assert_eq!(
        value("koordlet_cpuset_be_share_pool_cpu_cores").as_deref(),
        Some("Gauge(5.0)")
    );
    let numa = scrape
        .samples
        .iter()
        .find(|s| s.metric == "koordlet_collect_node_numa_info_status")
        .unwrap();
    assert_eq!(numa.labels.get("status"), Some("failed"));
}

#[test]
fn host_application_usage() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    let app: crate::api::slo::nodeslo::HostApplicationSpec = serde_json::from_value(
        serde_json::json!({"name": "nginx", "priority": "koord-prod", "qos": "LS"}),
    )
    .unwrap();
    m.set_host_apps("n1", vec![(&app, "cpu", 0.5), (&app, "memory", 1e8)]);
    let scrape = registry.scrape();
    let s = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "koordlet_host_application_resource_usage"
                && s.labels.get("resource") == Some("cpu")
        })
        .unwrap();
    assert_eq!(s.labels.get("host_application_name"), Some("nginx"));
    assert_eq!(s.labels.get("priority_class"), Some("koord-prod"));
    assert_eq!(s.labels.get("qos"), Some("LS"));
    m.set_host_apps("n1", vec![]);
    let gone = registry.scrape();
    assert!(
        !gone
            .samples
            .iter()
            .any(|s| s.metric == "koordlet_host_application_resource_usage")
    );
}

#[test]
fn batch_and_mid_allocatable() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"kubernetes.io/batch-cpu": "6600", "kubernetes.io/batch-memory": "1Gi"}}}))
    .unwrap();
    m.set_allocatable(&node);
    let scrape = registry.scrape();
    let get = |r: &str| {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == "koordlet_node_resource_allocatable"
                    && s.labels.get("resource") == Some(r)
            })
            .map(|s| {
                (
                    s.labels.get("unit").unwrap().to_string(),
                    format!("{:?}", s.value),
                )
            })
    };
    assert_eq!(
        get("kubernetes.io/batch-cpu"),
        Some(("integer".into(), "Gauge(6600.0)".into()))
    );
    assert_eq!(
        get("kubernetes.io/batch-memory"),
        Some(("byte".into(), "Gauge(1073741824.0)".into()))
    );
    assert_eq!(
        get("kubernetes.io/mid-cpu"),
        Some(("integer".into(), "Gauge(0.0)".into()))
    );
}

#[test]
fn koordinator_names_and_labels() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    m.started("n1");
    m.evicted("n1", "BEMemoryEvict");
    m.node_used_cpu.get_or_create(&node_only("n1")).set(1.5);
    m.node_used_memory.get_or_create(&node_only("n1")).set(1e9);
    let l = vec![("node", "n1".to_string()), ("type", "cpuset".to_string())];
    m.be_suppress_cores.get_or_create(&l).set(2.0);
    let text = registry.encode();
    let scrape = registry.scrape();
    let find = |name: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .unwrap_or_else(|| panic!("{name}: {text}"))
    };
    assert_eq!(
        find("koordlet_pod_eviction").labels.get("reason"),
        Some("BEMemoryEvict")
    );
    assert_eq!(
        find("koordlet_be_suppress_cpu_cores").labels.get("type"),
        Some("cpuset")
    );
    let mut usage = std::collections::BTreeMap::new();
    usage.insert("cpu".to_string(), Quantity("1500m".into()));
    usage.insert("memory".to_string(), Quantity("1Gi".into()));
    usage.insert("pods".to_string(), Quantity("3".into()));
    KoordletMetrics::set_resources(&m.node_metric_node_usage, "n1", &[], &usage);
    let extra = [("predictor", "minPredictor")];
    KoordletMetrics::set_resources(&m.predicted_reclaimable, "n1", &extra, &usage);
    let text = registry.encode();
    let scrape = registry.scrape();
    let usage: Vec<_> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "koordlet_node_metric_node_usage")
        .collect();
    assert_eq!(usage.len(), 2, "cpu and memory only: {text}");
    let cpu = usage
        .iter()
        .find(|s| s.labels.get("resource") == Some("cpu"))
        .unwrap();
    assert_eq!(cpu.labels.get("unit"), Some("core"));
    assert!(matches!(cpu.value, prometheus_parse::Value::Gauge(v) if (v - 1.5).abs() < 1e-9));
    let p = scrape
        .samples
        .iter()
        .find(|s| s.metric == "koordlet_node_predicted_resource_reclaimable")
        .unwrap();
    assert_eq!(p.labels.get("predictor"), Some("minPredictor"));

    let l = |c: &str| -> Pairs { vec![("node", "n1".into()), ("container_name", c.into())] };
    m.set_container_specs(vec![(l("a"), 1.0), (l("b"), 2.0)], vec![(l("a"), 4.0)]);
    m.set_container_specs(vec![(l("b"), 2.0)], vec![]);
    let text = registry.encode();
    assert!(
        !text.contains("container_name=\"a\""),
        "a gone container's series stay: {text}"
    );
    assert!(
        text.contains("koordlet_container_resource_requests{node=\"n1\",container_name=\"b\"} 2")
    );
    for n in [
        "koordlet_start_time",
        "koordlet_node_used_cpu_cores",
        "koordlet_node_used_memory_bytes",
    ] {
        assert_eq!(find(n).labels.get("node"), Some("n1"));
    }
}

fn samples_of<'a>(
    scrape: &'a prometheus_parse::Scrape,
    name: &str,
) -> Vec<&'a prometheus_parse::Sample> {
    scrape.samples.iter().filter(|s| s.metric == name).collect()
}

#[test]
fn share_pool_info_lists_each_cpu_and_drops_cpus_that_left() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    m.ops.set_share_pools("n1", &[2, 3], &[2, 3, 4]);
    m.ops.set_share_pools("n1", &[3], &[2, 3, 4]);
    let scrape = registry.scrape();
    let ls = samples_of(&scrape, "koordlet_cpuset_share_pool_info");
    let cpus: Vec<_> = ls.iter().filter_map(|s| s.labels.get("cpu")).collect();
    assert_eq!(cpus, vec!["3"], "CPU 2 left the LS pool");
    assert_eq!(
        ls[0].labels.get("pool"),
        None,
        "labels are Koordinator's {{node,cpu}}"
    );
    assert_eq!(
        samples_of(&scrape, "koordlet_cpuset_be_share_pool_info").len(),
        3
    );
}

#[test]
fn hook_reconciler_and_executor_durations_in_milliseconds() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    let d = std::time::Duration::from_micros(1500);
    m.ops
        .hook_invoked("n1", "BatchResource", "PreCreateContainer", true, d);
    m.ops.reconciled("n1", "pod", "cpu.bvt_warp_ns", false, d);
    m.ops.updated("cgroup", true, d);
    let scrape = registry.scrape();
    let sum = |name: &str| {
        samples_of(&scrape, name)
            .into_iter()
            .find(|s| matches!(s.value, prometheus_parse::Value::Histogram(_)))
            .map(|s| (s.labels.clone(), format!("{:?}", s.value)))
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    let (l, v) = sum("koordlet_runtime_hook_invoked_duration_milliseconds");
    assert_eq!(l.get("hook"), Some("BatchResource"));
    assert_eq!(l.get("stage"), Some("PreCreateContainer"));
    assert_eq!(l.get("status"), Some("succeeded"));
    assert!(
        v.contains("less_than: 0.64, count: 0.0 }, HistogramCount { less_than: 2.56, count: 1.0"),
        "1.5 ms falls in Koordinator's (0.64, 2.56] ms bucket: {v}"
    );
    let (l, _) = sum("koordlet_runtime_hook_reconciler_invoked_duration_milliseconds");
    assert_eq!(l.get("level"), Some("pod"));
    assert_eq!(l.get("resource_type"), Some("cpu.bvt_warp_ns"));
    assert_eq!(l.get("status"), Some("failed"));
    let (l, _) = sum("koordlet_resource_update_duration_milliseconds");
    assert_eq!(l.get("type"), Some("cgroup"));
    assert_eq!(l.get("status"), Some("success"));
}

#[test]
fn per_container_knobs_follow_their_containers() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    let cfs = |id: &str, burst: bool, value: f64| ScaledCfs {
        namespace: "d".into(),
        pod: "p".into(),
        container_id: id.into(),
        container: "c".into(),
        burst,
        value,
    };
    m.ops.set_scaled_cfs(
        "n1",
        vec![cfs("a", true, 50_000.0), cfs("b", false, 120_000.0)],
        &|id| id == "a" || id == "b",
    );
    // b's quota is not rewritten this pass but b still runs: its series stays; a is gone.
    m.ops.set_scaled_cfs("n1", vec![], &|id| id == "b");
    let scrape = registry.scrape();
    assert!(samples_of(&scrape, "koordlet_container_scaled_cfs_burst_us").is_empty());
    let q = samples_of(&scrape, "koordlet_container_scaled_cfs_quota_us");
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].labels.get("container_id"), Some("b"));
    assert_eq!(format!("{:?}", q[0].value), "Gauge(120000.0)");
    m.ops.evicted("n1", "d", "p", "evictPodByNodeMemoryUsage");
    m.ops.evicted("n1", "d", "p", "evictPodByNodeMemoryUsage");
    let scrape = registry.scrape();
    let e = samples_of(&scrape, "koordlet_pod_eviction_detail");
    assert_eq!(
        format!("{:?}", e[0].value),
        "Counter(2.0)",
        "a counter, as Koordinator's, named without _total"
    );
    assert_eq!(e[0].labels.get("reason"), Some("evictPodByNodeMemoryUsage"));
}

#[test]
fn prod_reclaimable_and_its_status() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    m.ops.set_prod_reclaimable("n1", Some((1.5, 2e9)));
    let scrape = registry.scrape();
    let r = samples_of(&scrape, "koordlet_node_priority_resource_reclaimable");
    let cpu = r
        .iter()
        .find(|s| s.labels.get("resource") == Some("cpu"))
        .unwrap();
    assert_eq!(cpu.labels.get("priority"), Some("koord-prod"));
    assert_eq!(cpu.labels.get("unit"), Some("core"));
    assert_eq!(format!("{:?}", cpu.value), "Gauge(1.5)");
    m.ops.set_prod_reclaimable("n1", None);
    let scrape = registry.scrape();
    let st = samples_of(
        &scrape,
        "koordlet_node_resource_priority_reclaimable_status",
    );
    assert_eq!(
        format!("{:?}", st[0].value),
        "Gauge(1.0)",
        "no prediction: failed"
    );
}

#[test]
fn resctrl_groups_under_koordinators_names() {
    use crate::koordlet::collectors::Samples;
    use crate::koordlet::store::{MetricKind, Point, SeriesKey};
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    let mut samples: Samples = Vec::new();
    let point = |value| Point { ts: 1, value };
    samples.push((
        SeriesKey::new(MetricKind::ResctrlLlc, &[("qos", "LS"), ("cache_id", "0")]),
        point(4096.0),
    ));
    samples.push((
        SeriesKey::new(
            MetricKind::ResctrlMb,
            &[
                ("qos", "BE"),
                ("cache_id", "1"),
                ("resctrl_type", "mb"),
                ("resctrl_mb_type", "mbm_total_bytes"),
            ],
        ),
        point(1e9),
    ));
    m.ops
        .set_resctrl(crate::koordlet::measure::resctrl_series("n1", &samples));
    let scrape = registry.scrape();
    let find = |name: &str| scrape.samples.iter().find(|s| s.metric == name).cloned();
    let llc = find("koordlet_resctrl_llc_occupancy").expect("llc");
    assert_eq!(
        (
            llc.labels.get("node"),
            llc.labels.get("cache_id"),
            llc.labels.get("qos")
        ),
        (Some("n1"), Some("0"), Some("LS"))
    );
    let mb = find("koordlet_resctrl_memory_bandwidth").expect("mb");
    assert_eq!(mb.labels.get("mb_type"), Some("mbm_total_bytes"));
    assert_eq!(mb.labels.get("qos"), Some("BE"));
    m.ops.set_resctrl((Vec::new(), Vec::new()));
    assert!(
        registry
            .scrape()
            .samples
            .iter()
            .all(|s| !s.metric.starts_with("koordlet_resctrl"))
    );
}
