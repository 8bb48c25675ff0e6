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
    m.share_pools(&nrt);
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
