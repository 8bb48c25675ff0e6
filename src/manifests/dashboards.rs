//! Grafana dashboards for the colocation view, built from the series koord exports (a
//! test checks every query names a registered family): batch allocatable vs used per
//! node, BE suppression and evictions, scheduling latency and queue.

use serde_json::{Value, json};

/// A time-series panel: title, unit, and (legend, PromQL) targets.
struct Panel {
    title: &'static str,
    unit: &'static str,
    targets: &'static [(&'static str, &'static str)],
}

const COLOCATION: &[Panel] = &[
    Panel {
        title: "Batch CPU allocatable (cores) per node",
        unit: "short",
        targets: &[(
            "{{node}}",
            r#"slo_controller_node_extended_resource_allocatable_internal{resource="kubernetes.io/batch-cpu"}"#,
        )],
    },
    Panel {
        title: "Batch memory allocatable per node",
        unit: "bytes",
        targets: &[(
            "{{node}}",
            r#"slo_controller_node_extended_resource_allocatable_internal{resource="kubernetes.io/batch-memory"}"#,
        )],
    },
    Panel {
        title: "Node CPU used (cores) vs BE allowance",
        unit: "short",
        targets: &[
            ("used {{node}}", "koordlet_node_used_cpu_cores"),
            ("LS used {{node}}", "koordlet_be_suppress_ls_used_cpu_cores"),
            (
                "BE allowed {{node}} ({{type}})",
                "koordlet_be_suppress_cpu_cores",
            ),
        ],
    },
    Panel {
        title: "Batch CPU requested (cores) per node",
        unit: "short",
        targets: &[(
            "{{node}}",
            r#"sum by (node) (koordlet_container_resource_requests{resource="kubernetes.io/batch-cpu"}) / 1000"#,
        )],
    },
    Panel {
        title: "Reclaimable by prediction (cores)",
        unit: "short",
        targets: &[(
            "{{node}}",
            r#"koordlet_node_predicted_resource_reclaimable{resource="cpu"}"#,
        )],
    },
    Panel {
        title: "Node memory used",
        unit: "bytes",
        targets: &[("{{node}}", "koordlet_node_used_memory_bytes")],
    },
    Panel {
        title: "Evictions by the koordlet (per 5m)",
        unit: "short",
        targets: &[(
            "{{node}} {{reason}}",
            "sum by (node, reason) (delta(koordlet_pod_eviction[5m]))",
        )],
    },
    Panel {
        title: "Evictions by the descheduler (per 5m)",
        unit: "short",
        targets: &[(
            "{{strategy}} {{result}}",
            "sum by (strategy, result) (delta(descheduler_pods_evicted[5m]))",
        )],
    },
    Panel {
        title: "QoS cgroup changes (per 5m)",
        unit: "short",
        targets: &[(
            "{{strategy}} {{resource}}",
            "sum by (strategy, resource) (increase(koord_koordlet_qos_cgroup_changes_total[5m]))",
        )],
    },
];

const SCHEDULING: &[Panel] = &[
    Panel {
        title: "Scheduling attempt latency (p50 / p99)",
        unit: "s",
        targets: &[
            (
                "p50 {{result}}",
                "histogram_quantile(0.5, sum by (le, result) (rate(scheduler_scheduling_attempt_duration_seconds_bucket[5m])))",
            ),
            (
                "p99 {{result}}",
                "histogram_quantile(0.99, sum by (le, result) (rate(scheduler_scheduling_attempt_duration_seconds_bucket[5m])))",
            ),
        ],
    },
    Panel {
        title: "E2e scheduling latency, attempt to bound (p99)",
        unit: "s",
        targets: &[(
            "p99",
            "histogram_quantile(0.99, sum by (le) (rate(scheduler_e2e_scheduling_duration_seconds_bucket[5m])))",
        )],
    },
    Panel {
        title: "Extension point latency (p99)",
        unit: "s",
        targets: &[(
            "{{extension_point}}",
            "histogram_quantile(0.99, sum by (le, extension_point) (rate(scheduler_framework_extension_point_duration_seconds_bucket[5m])))",
        )],
    },
    Panel {
        title: "Plugin latency (p99, sampled cycles)",
        unit: "s",
        targets: &[(
            "{{plugin}} {{extension_point}}",
            "histogram_quantile(0.99, sum by (le, plugin, extension_point) (rate(scheduler_plugin_execution_duration_seconds_bucket[5m])))",
        )],
    },
    Panel {
        title: "Scheduling attempts per second",
        unit: "ops",
        targets: &[(
            "{{result}}",
            "sum by (result) (rate(scheduler_schedule_attempts_total[5m]))",
        )],
    },
    Panel {
        title: "Pending pods",
        unit: "short",
        targets: &[("{{queue}}", "sum by (queue) (scheduler_pending_pods)")],
    },
    Panel {
        title: "Preemption attempts per second",
        unit: "ops",
        targets: &[("", "rate(scheduler_preemption_attempts_total[5m])")],
    },
];

fn panel(i: usize, p: &Panel) -> Value {
    let targets: Vec<Value> = p
        .targets
        .iter()
        .enumerate()
        .map(|(k, (legend, expr))| {
            json!({"refId": ((b'A' + k as u8) as char).to_string(), "expr": expr,
                "legendFormat": legend, "datasource": {"type": "prometheus", "uid": "${datasource}"}})
        })
        .collect();
    json!({
        "id": i + 1, "type": "timeseries", "title": p.title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i / 2) * 8},
        "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": targets,
    })
}

fn dashboard(uid: &str, title: &str, panels: &[Panel]) -> Value {
    json!({
        "uid": uid, "title": title, "tags": ["koord", "koordinator"],
        "schemaVersion": 39, "editable": true, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
            "label": "Prometheus"}]},
        "panels": panels.iter().enumerate().map(|(i, p)| panel(i, p)).collect::<Vec<_>>(),
    })
}

/// The dashboards: (uid, title, panels).
const BOARDS: [(&str, &str, &[Panel]); 2] = [
    ("koord-colocation", "koord / colocation", COLOCATION),
    ("koord-scheduling", "koord / scheduling", SCHEDULING),
];

/// (file name, dashboard JSON).
pub fn all() -> Vec<(String, String)> {
    BOARDS
        .iter()
        .map(|(uid, title, panels)| {
            let d = dashboard(uid, title, panels);
            (
                format!("{uid}.json"),
                serde_json::to_string_pretty(&d).unwrap_or_default() + "\n",
            )
        })
        .collect()
}

/// Every metric family the dashboards query (suffixes `_total`, `_bucket` dropped).
pub fn families() -> Vec<String> {
    let mut out = Vec::new();
    for (family, _, _) in queries() {
        if !out.contains(&family) {
            out.push(family);
        }
    }
    out
}

/// (family, dashboard title, panel title) for every family a panel queries, in panel order.
pub fn queries() -> Vec<(String, &'static str, &'static str)> {
    let known = [
        "koordlet_",
        "scheduler_",
        "slo_controller_",
        "descheduler_",
        "koord_",
    ];
    let mut out = Vec::new();
    for (_, board, panels) in BOARDS {
        for p in panels {
            for (_, expr) in p.targets {
                for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if known.iter().any(|k| word.starts_with(k)) {
                        let base = word
                            .trim_end_matches("_bucket")
                            .trim_end_matches("_total")
                            .to_string();
                        let entry = (base, board, p.title);
                        if !out.contains(&entry) {
                            out.push(entry);
                        }
                    }
                }
            }
        }
    }
    out
}
