//! The manager's Prometheus metrics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use crate::kernel::Metrics;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeResourceLabels {
    pub node: String,
    pub resource: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyLabels {
    pub key: String,
}

fn reconcile_histogram() -> Histogram {
    Histogram::new([0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0])
}

pub struct ManagerMetrics {
    /// Computed batch/mid values (`*-cpu` milli-cores, `*-memory` bytes); absent when removed.
    pub node_resource: Family<NodeResourceLabels, Gauge>,
    pub reconcile_seconds: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    pub writes: Family<ControllerLabels, Counter>,
    pub write_errors: Family<ControllerLabels, Counter>,
    pub config_errors: Family<KeyLabels, Counter>,
    pub is_leader: Gauge,
    /// Koordinator's `slo_controller_node_extended_resource_allocatable_internal{node,
    /// resource,unit}`: cpu in cores (`integer`), memory in bytes.
    pub allocatable_internal: Family<Vec<(&'static str, String)>, FGauge>,
    /// Koordinator's `slo_controller_*_count{status,reason}` (counters named without
    /// `_total`), by name.
    pub counts: std::collections::BTreeMap<&'static str, Family<CountLabels, Counter>>,
    /// Koordinator's `slo_controller_node_resource_run_plugin_status{plugin,status,reason}`.
    pub plugin_status: Family<Vec<(&'static str, String)>, Counter>,
    /// Koordinator's `koord_manager_webhook_binding_admission_decisions_total{decision}`.
    pub binding_decisions: Family<Vec<(&'static str, String)>, Counter>,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CountLabels {
    pub status: &'static str,
    pub reason: &'static str,
}

/// Koordinator's SLO controller count series (`pkg/slo-controller/metrics`).
const COUNTS: &[(&str, &str)] = &[
    (
        "slo_controller_nodemetric_reconcile_count",
        "the status count of reconciling NodeMetric",
    ),
    (
        "slo_controller_nodemetric_spec_parse_count",
        "the count of parsing NodeMetric spec",
    ),
    (
        "slo_controller_nodeslo_reconcile_count",
        "the status count of reconciling NodeSLO",
    ),
    (
        "slo_controller_nodeslo_spec_parse_count",
        "the count of parsing NodeSLO spec",
    ),
    (
        "slo_controller_node_resource_reconcile_count",
        "the status count of reconciling node resource",
    ),
];

type FGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

impl ManagerMetrics {
    /// Sets or (value `None`) removes one node's computed batch/mid resource.
    pub fn set_node_resource(&self, node: &str, resource: &str, value: Option<i64>) {
        let labels = NodeResourceLabels {
            node: node.to_string(),
            resource: resource.to_string(),
        };
        let (unit, scale) = if resource.ends_with("-cpu") {
            ("integer", 1000.0)
        } else {
            ("byte", 1.0)
        };
        let internal = vec![
            ("node", node.to_string()),
            ("resource", resource.to_string()),
            ("unit", unit.to_string()),
        ];
        match value {
            Some(v) => {
                self.node_resource.get_or_create(&labels).set(v);
                let g = self.allocatable_internal.get_or_create(&internal);
                g.set(v as f64 / scale);
            }
            None => {
                self.node_resource.remove(&labels);
                self.allocatable_internal.remove(&internal);
            }
        }
    }

    pub fn register(metrics: &Metrics) -> std::sync::Arc<ManagerMetrics> {
        let m = std::sync::Arc::new(ManagerMetrics {
            node_resource: Family::default(),
            reconcile_seconds: Family::new_with_constructor(reconcile_histogram),
            writes: Family::default(),
            write_errors: Family::default(),
            config_errors: Family::default(),
            is_leader: Gauge::default(),
            allocatable_internal: Family::default(),
            counts: COUNTS
                .iter()
                .map(|(n, _)| (*n, Family::default()))
                .collect(),
            plugin_status: Family::default(),
            binding_decisions: Family::default(),
        });
        metrics.register(
            "koord_manager_webhook_binding_admission_decisions",
            "Total number of binding admission decisions.",
            m.binding_decisions.clone(),
        );
        metrics.register_bare_counter(
            "slo_controller_node_resource_run_plugin_status",
            "the status count of running node resource plugins",
            m.plugin_status.clone(),
        );
        for (name, help) in COUNTS {
            metrics.register_bare_counter(name, help, m.counts[name].clone());
        }
        let reg = [
            (
                "koord_manager_node_extended_resource",
                "Batch and mid resources computed per node (cpu in milli-cores, memory in bytes)",
            ),
            (
                "koord_manager_reconcile_duration_seconds",
                "Duration of one controller pass",
            ),
            (
                "koord_manager_writes",
                "Objects written by the controllers (only the leader writes)",
            ),
            ("koord_manager_write_errors", "Writes that failed"),
            (
                "koord_manager_slo_config_errors",
                "slo-controller-config keys that failed to parse or validate",
            ),
            (
                "koord_manager_is_leader",
                "1 while this replica holds the manager lease",
            ),
        ];
        metrics.register(reg[0].0, reg[0].1, m.node_resource.clone());
        metrics.register(reg[1].0, reg[1].1, m.reconcile_seconds.clone());
        metrics.register(reg[2].0, reg[2].1, m.writes.clone());
        metrics.register(reg[3].0, reg[3].1, m.write_errors.clone());
        metrics.register(reg[4].0, reg[4].1, m.config_errors.clone());
        metrics.register(reg[5].0, reg[5].1, m.is_leader.clone());
        metrics.register(
            "slo_controller_node_extended_resource_allocatable_internal",
            "the internal allocatable of node extended resources which may not be updated at the node status",
            m.allocatable_internal.clone(),
        );
        // Their label sets are built per call; the reference names them.
        for (name, labels) in [
            (
                "slo_controller_node_extended_resource_allocatable_internal",
                &["node", "resource", "unit"][..],
            ),
            (
                "slo_controller_node_resource_run_plugin_status",
                &["plugin", "status", "reason"],
            ),
            (
                "koord_manager_webhook_binding_admission_decisions",
                &["decision"],
            ),
        ] {
            metrics.describe_labels(name, labels);
        }
        m
    }

    /// One reconcile step of `controller` (`nodemetric`, `nodeslo`, `noderesource`) as
    /// Koordinator counts it: `{status: succeeded|failed, reason: <step>}`.
    pub fn reconciled(&self, controller: &str, ok: bool, reason: &'static str) {
        let name = match controller {
            "nodemetric" => "slo_controller_nodemetric_reconcile_count",
            "nodeslo" => "slo_controller_nodeslo_reconcile_count",
            _ => "slo_controller_node_resource_reconcile_count",
        };
        let status = if ok { "succeeded" } else { "failed" };
        let l = CountLabels { status, reason };
        if let Some(f) = self.counts.get(name) {
            f.get_or_create(&l).inc();
        }
    }

    /// One node resource plugin stage (Koordinator's plugin names: `BatchResource`,
    /// `MidResource`, ...; stages `ResourceCalculate`, `ResourceReset`, ...).
    pub fn plugin_ran(&self, plugin: &str, ok: bool, reason: &str) {
        let status = if ok { "succeeded" } else { "failed" };
        let l = vec![
            ("plugin", plugin.to_string()),
            ("status", status.to_string()),
            ("reason", reason.to_string()),
        ];
        self.plugin_status.get_or_create(&l).inc();
    }

    pub fn wrote(&self, controller: &str, ok: bool) {
        let l = ControllerLabels {
            controller: controller.to_string(),
        };
        if ok {
            self.writes.get_or_create(&l).inc()
        } else {
            self.write_errors.get_or_create(&l).inc()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn koordinators_slo_controller_counts() {
        let registry = Metrics::new();
        let m = ManagerMetrics::register(&registry);
        m.reconciled("nodeslo", true, "createNodeSLO");
        m.reconciled("noderesource", false, "updateNodeStatus");
        m.plugin_ran("BatchResource", true, "ResourceCalculate");
        let scrape = registry.scrape();
        let run = scrape
            .samples
            .iter()
            .find(|s| s.metric == "slo_controller_node_resource_run_plugin_status")
            .unwrap();
        assert_eq!(run.labels.get("plugin"), Some("BatchResource"));
        assert_eq!(run.labels.get("reason"), Some("ResourceCalculate"));
        assert_eq!(run.labels.get("status"), Some("succeeded"));
        let find = |name: &str| scrape.samples.iter().find(|s| s.metric == name);
        let slo = find("slo_controller_nodeslo_reconcile_count").expect("nodeslo count");
        assert_eq!(slo.labels.get("status"), Some("succeeded"));
        assert_eq!(slo.labels.get("reason"), Some("createNodeSLO"));
        let nr = find("slo_controller_node_resource_reconcile_count").unwrap();
        assert_eq!(nr.labels.get("status"), Some("failed"));
        let names = registry.names();
        for (n, _) in COUNTS {
            assert!(names.iter().any(|x| x == n), "{n}");
        }
    }
}
