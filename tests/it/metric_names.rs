//! `/metrics` under Koordinator's and kube-scheduler's names: the real binary with every
//! role, one pod scheduled, the exposition read by a Prometheus text-format parser.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Koord, free_port, http_get, kubeconfig, wait_until};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;

/// Koordinator's koordlet series (pkg/koordlet/metrics) koord exports.
const KOORDLET: &[&str] = &[
    "koordlet_start_time",
    "koordlet_node_used_cpu_cores",
    "koordlet_node_used_memory_bytes",
    "koordlet_be_suppress_cpu_cores",
    "koordlet_be_suppress_ls_used_cpu_cores",
    "koordlet_pod_eviction",
    "koordlet_node_metric_node_usage",
    "koordlet_node_metric_system_usage",
    "koordlet_node_predicted_resource_reclaimable",
    "koordlet_container_resource_requests",
    "koordlet_container_resource_limits",
];

/// Series this scenario must produce (an empty family is not exposed), with the
/// kube-scheduler names.
const SAMPLED: &[&str] = &[
    "koordlet_start_time",
    "koordlet_node_used_cpu_cores",
    "koordlet_node_used_memory_bytes",
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds_count",
    "scheduler_e2e_scheduling_duration_seconds_count",
    "scheduler_framework_extension_point_duration_seconds_count",
    "scheduler_plugin_execution_duration_seconds_count",
    "scheduler_pending_pods",
];

/// Families koord names itself carry the `koord_` prefix; the rest are upstream names.
const UPSTREAM_PREFIXES: &[&str] = &[
    "koordlet_",
    "scheduler_",
    "slo_controller_",
    "descheduler_",
    "koord_",
];

fn families(text: &str) -> (BTreeSet<String>, Vec<prometheus_parse::Sample>) {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text format");
    (scrape.docs.keys().cloned().collect(), scrape.samples)
}

#[test]
fn metrics_carry_koordinator_and_kube_scheduler_names() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let port = free_port();
    let mut api = rt.block_on(crate::quota::two_nodes(port));
    let dir = tempfile::tempdir().unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let kc = kubeconfig(dir.path(), port);
    let mut koord = Koord::start(
        &[
            "--role=all",
            &format!("--kubeconfig={}", kc.display()),
            &format!("--admin-addr={admin}"),
            &format!("--data-dir={}", dir.path().display()),
            "--node-name=sim-node-0",
        ],
        &[],
        dir.path(),
    );
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    let pod = crate::quota::quota_pod("p1", "none", "100m");
    rt.block_on(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let addr = admin.parse().unwrap();
    let scraped = wait_until(Duration::from_secs(30), || {
        http_get(addr, "/metrics").is_some_and(|(_, m)| {
            m.contains("scheduler_e2e_scheduling_duration_seconds_count{")
                && m.contains("koordlet_node_used_cpu_cores{")
        })
    });
    assert!(scraped, "no scheduling attempt counted:\n{}", koord.logs());
    let (_, text) = http_get(addr, "/metrics").unwrap();
    let (docs, samples) = families(&text);
    let sampled: BTreeSet<&str> = samples.iter().map(|s| s.metric.as_str()).collect();
    for name in SAMPLED {
        assert!(sampled.contains(name), "{name} not exported:\n{text}");
    }
    for name in &docs {
        assert!(
            UPSTREAM_PREFIXES.iter().any(|p| name.starts_with(p)),
            "{name}: koord's own series go under koord_"
        );
        assert!(
            !name.starts_with("koordlet_") || KOORDLET.contains(&name.as_str()),
            "{name}: not a Koordinator koordlet series; koord's extras go under koord_"
        );
    }
    let attempt = samples
        .iter()
        .find(|s| s.metric == "scheduler_schedule_attempts_total")
        .expect("an attempt sample");
    assert_eq!(attempt.labels.get("result"), Some("scheduled"), "{text}");
    assert_eq!(attempt.labels.get("profile"), Some("koord-scheduler"));
    let unsupported: Vec<_> = samples
        .iter()
        .filter(|s| s.metric == "koord_unsupported_config")
        .filter_map(|s| s.labels.get("name"))
        .collect();
    assert!(
        !unsupported.contains(&"SchedulingHint"),
        "Koordinator's default profile runs whole: {unsupported:?}"
    );
    assert!(
        samples.iter().any(
            |s| s.metric == "scheduler_pending_pods" && s.labels.get("queue") == Some("active")
        ),
        "{text}"
    );
    koord.signal("TERM");
    koord.wait_exit(Duration::from_secs(30)).expect("exit");
    rt.block_on(api.stop());
}
