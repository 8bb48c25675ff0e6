//! `/metrics` under Koordinator's and kube-scheduler's names: the real binary with every
//! role, one pod scheduled, the exposition read by a Prometheus text-format parser.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Koord, free_port, http_get, kubeconfig, wait_until};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
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
    "koordlet_be_suppress_be_used_cpu_cores",
    "koordlet_node_resource_allocatable",
    "koordlet_node_predicted_resource_peak",
    "koordlet_node_metric_numa_node_usage",
    "koordlet_node_metric_numa_system_usage",
    "koordlet_collect_node_cpu_info_status",
    "koordlet_collect_node_numa_info_status",
    "koordlet_collect_node_local_storage_info_status",
    "koordlet_cpuset_share_pool_cpu_cores",
    "koordlet_cpuset_be_share_pool_cpu_cores",
    "koordlet_host_application_resource_usage",
    "koordlet_runtime_hook_invoked_duration_milliseconds",
    "koordlet_runtime_hook_reconciler_invoked_duration_milliseconds",
    "koordlet_resource_update_duration_milliseconds",
    "koordlet_pod_eviction_detail",
    "koordlet_container_oom_score_adj",
    "koordlet_container_scaled_cfs_burst_us",
    "koordlet_container_scaled_cfs_quota_us",
    "koordlet_cpuset_share_pool_info",
    "koordlet_cpuset_be_share_pool_info",
    "koordlet_container_cpi",
    "koordlet_resctrl_llc_occupancy",
    "koordlet_resctrl_memory_bandwidth",
    "koordlet_pod_psi",
    "koordlet_container_psi",
    "koordlet_node_priority_resource_reclaimable",
    "koordlet_node_resource_priority_reclaimable_status",
    "koordlet_kubelet_request_duration_seconds",
    "koordlet_container_core_sched_cookie",
    "koordlet_core_sched_cookie_manage_status",
];

/// Series this scenario must produce, with the kube-scheduler and slo-controller names. As
/// in kube-scheduler and Koordinator (client_golang vectors), a labelled family is exposed
/// from its first sample: the scheduler's after the first attempt, the manager's after the
/// first NodeResource pass over a node with a NodeMetric.
const SAMPLED: &[&str] = &[
    "koordlet_start_time",
    "koordlet_node_used_cpu_cores",
    "koordlet_node_used_memory_bytes",
    "slo_controller_node_extended_resource_allocatable_internal",
    "slo_controller_node_resource_reconcile_count",
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds_count",
    "scheduler_e2e_scheduling_duration_seconds_count",
    "scheduler_framework_extension_point_duration_seconds_count",
    "scheduler_plugin_execution_duration_seconds_count",
    "scheduler_pending_pods",
    "scheduler_scheduling_algorithm_duration_seconds_count",
    "scheduler_pod_scheduling_evaluated_nodes_count",
    "scheduler_pod_scheduling_attempts_count",
    "scheduler_pod_scheduling_duration_seconds_count",
    "scheduler_queue_incoming_pods_total",
    "scheduler_scheduler_goroutines",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "rest_client_requests_total",
    "rest_client_request_duration_seconds_count",
];

/// Families koord names itself carry the `koord_` prefix; the rest are upstream names.
const UPSTREAM_PREFIXES: &[&str] = &[
    "koordlet_",
    "scheduler_",
    "slo_controller_",
    "descheduler_",
    "koord_",
    "process_",
    "rest_client_",
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
    // Colocation on, as an operator running batch work sets it (off by default, and then
    // neither Koordinator nor koord computes batch allocatable).
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": {"colocation-config": r#"{"enable": true}"#}}))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "koordinator-system");
    rt.block_on(cms.create(&PostParams::default(), &cm))
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    let pod = crate::quota::quota_pod("p1", "none", "100m");
    rt.block_on(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let addr = admin.parse().unwrap();
    let scraped = wait_until(Duration::from_secs(30), || {
        http_get(addr, "/metrics").is_some_and(|(_, m)| {
            m.contains("scheduler_e2e_scheduling_duration_seconds_count{")
                && m.contains("koordlet_node_used_cpu_cores{")
                && m.contains("slo_controller_node_extended_resource_allocatable_internal{")
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
    labels_are_documented(&samples);
    let attempt = samples
        .iter()
        .find(|s| s.metric == "scheduler_schedule_attempts_total")
        .expect("an attempt sample");
    assert_eq!(attempt.labels.get("result"), Some("scheduled"), "{text}");
    assert_eq!(attempt.labels.get("profile"), Some("koord-scheduler"));
    let batch_cpu = samples
        .iter()
        .find(|s| {
            s.metric == "slo_controller_node_extended_resource_allocatable_internal"
                && s.labels.get("resource") == Some("kubernetes.io/batch-cpu")
        })
        .expect("a batch-cpu sample");
    assert_eq!(batch_cpu.labels.get("node"), Some("sim-node-0"), "{text}");
    assert_eq!(batch_cpu.labels.get("unit"), Some("integer"), "{text}");
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

/// Every exposed series is in the metrics reference (docs/reference/metrics.md), and its
/// labels are among the ones the reference names.
fn labels_are_documented(samples: &[prometheus_parse::Sample]) {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/reference/metrics.md"
    ))
    .unwrap();
    let mut documented: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for row in page.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let name = cells[0]
            .trim_start_matches("| ")
            .trim_matches('`')
            .to_string();
        let labels = cells.get(2).unwrap_or(&"");
        let labels = labels.split(", ").map(|l| l.trim_matches('`').to_string());
        documented.insert(name, labels.filter(|l| !l.is_empty()).collect());
    }
    let mut wrong = BTreeSet::new();
    for s in samples {
        // A histogram's `_sum` and `_count` series belong to its family.
        let family = ["_sum", "_count"]
            .iter()
            .find_map(|x| s.metric.strip_suffix(x))
            .filter(|f| documented.contains_key(*f))
            .unwrap_or(&s.metric);
        let Some(doc) = documented.get(family) else {
            wrong.insert(format!("{} is not in the reference", s.metric));
            continue;
        };
        for (label, _) in s.labels.iter() {
            if !doc.contains(label.as_str()) {
                wrong.insert(format!(
                    "{} has label {label}, not in the reference",
                    s.metric
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Every series Koordinator's Grafana dashboards query (`dashboards/scheduling.json`,
/// `dashboards/descheduling.json` of Koordinator's repository, copied into
/// tests/fixtures/koordinator/dashboards) is a family koord's scheduler or descheduler
/// registers. (A family shows in `/metrics` once it has a sample; the registry lists them
/// all.)
#[test]
fn koordinators_dashboards_find_koords_series() {
    let m = koord::kernel::Metrics::new();
    koord::scheduler::metrics::SchedulerMetrics::register(&m);
    let _ = koord::descheduler::live::register_pods_evicted(&m);
    let names: BTreeSet<String> = m.names().into_iter().collect();
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/koordinator/dashboards"
    );
    let mut queried = BTreeSet::new();
    for file in ["scheduling.json", "descheduling.json"] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        exprs(&v, &mut |e| queried.extend(series_in(e)));
    }
    assert!(queried.len() > 30, "{queried:?}");
    let missing: Vec<&String> = queried
        .iter()
        .filter(|q| {
            let family = ["_bucket", "_sum", "_count", "_total"]
                .iter()
                .find_map(|s| q.strip_suffix(s))
                .unwrap_or(q);
            !names.contains(family) && !names.contains(q.as_str())
        })
        .collect();
    assert!(missing.is_empty(), "not registered: {missing:?}");
}

fn exprs(v: &serde_json::Value, f: &mut dyn FnMut(&str)) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", serde_json::Value::String(e)) => f(e),
                    _ => exprs(x, f),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| exprs(x, f)),
        _ => {}
    }
}

/// The metric names in a PromQL expression: identifiers with a selector (`{` or `[`).
fn series_in(e: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = e.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            let word = &e[start..i];
            if matches!(b.get(i), Some(b'{') | Some(b'[')) && word.contains('_') {
                out.push(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Koordinator's slo-controller series (pkg/slo-controller/metrics) koord's manager exports.
const MANAGER: &[&str] = &[
    "slo_controller_nodemetric_reconcile_count",
    "slo_controller_nodemetric_spec_parse_count",
    "slo_controller_nodeslo_reconcile_count",
    "slo_controller_nodeslo_spec_parse_count",
    "slo_controller_node_resource_reconcile_count",
    "slo_controller_node_resource_run_plugin_status",
    "slo_controller_node_extended_resource_allocatable_internal",
];

/// Koordinator's scheduler series (pkg/scheduler/metrics, every one of `metricsList` and
/// the GC'd job preemption histogram) and its ElasticQuota gauges.
const SCHEDULER: &[&str] = &[
    "scheduler_scheduling_timeout",
    "scheduler_reservation_status_phase",
    "scheduler_reservation_resource",
    "scheduler_pod_scheduling_evaluated_nodes",
    "scheduler_pod_scheduling_feasible_nodes",
    "scheduler_elastic_quota_process_latency",
    "scheduler_secondary_device_not_well_planned",
    "scheduler_waiting_gang_group_number",
    "scheduler_next_pod_delete_from_queue_latency",
    "scheduler_elastic_quota_hook_plugin_latency",
    "scheduler_gang_schedule_cycle_duration_seconds",
    "scheduler_reservation_selector_index_query",
    "scheduler_reservation_selector_index_candidates_count",
    "scheduler_inline_batch_schedule_duration_seconds",
    "scheduler_job_preemption_duration_seconds",
    "scheduler_elastic_quota_spec",
    "scheduler_elastic_quota_status",
];

/// Every koordlet, manager and scheduler series this file claims (Koordinator's names)
/// stays registered.
#[test]
fn the_series_koord_claims_are_registered() {
    let m = koord::kernel::Metrics::new();
    koord::koordlet::metrics::KoordletMetrics::register(&m);
    koord::manager::metrics::ManagerMetrics::register(&m);
    koord::scheduler::metrics::SchedulerMetrics::register(&m);
    let names = m.names();
    for n in KOORDLET.iter().chain(MANAGER).chain(SCHEDULER) {
        assert!(names.iter().any(|x| x == n), "{n} is gone");
    }
}
