//! The koordlet's Prometheus metrics (Koordinator's naming): usage gauges for the node,
//! pods and containers, collector health, store size, reports.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::kernel::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    pub node: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PodLabels {
    pub node: String,
    pub namespace: String,
    pub pod: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ContainerLabels {
    pub node: String,
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CollectorLabels {
    pub collector: String,
}

/// A QoS strategy's cgroup change: which strategy, which file.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QosLabels {
    pub strategy: String,
    pub resource: String,
}

type FGauge = Gauge<f64, AtomicU64>;

#[derive(Default)]
pub struct KoordletMetrics {
    pub node_usage: Family<NodeLabels, FGauge>,
    pub pod_usage: Family<PodLabels, FGauge>,
    pub container_usage: Family<ContainerLabels, FGauge>,
    pub collector_errors: Family<CollectorLabels, Counter>,
    pub collector_disabled: Family<CollectorLabels, Gauge>,
    pub store_series: Gauge,
    pub store_disk_bytes: Gauge,
    pub reports: Counter,
    pub report_errors: Counter,
    /// cgroup values changed by QoS strategies.
    pub qos_changes: Family<QosLabels, Counter>,
    /// The BE CPU allowance cpusuppress computed last (milli-cores; may be negative).
    pub be_suppress_milli: Gauge,
    live_pods: Mutex<HashSet<PodLabels>>,
    live_containers: Mutex<HashSet<ContainerLabels>>,
}

impl KoordletMetrics {
    pub fn register(metrics: &Metrics) -> std::sync::Arc<KoordletMetrics> {
        let m = std::sync::Arc::new(KoordletMetrics::default());
        metrics.register(
            "koordlet_node_resource_usage",
            "Node resource usage (cpu in cores, memory in bytes)",
            m.node_usage.clone(),
        );
        metrics.register(
            "koordlet_pod_resource_usage",
            "Pod resource usage (cpu in cores, memory in bytes)",
            m.pod_usage.clone(),
        );
        metrics.register(
            "koordlet_container_resource_usage",
            "Container resource usage (cpu in cores, memory in bytes)",
            m.container_usage.clone(),
        );
        metrics.register(
            "koordlet_collector_errors",
            "Collector passes that failed",
            m.collector_errors.clone(),
        );
        metrics.register(
            "koordlet_collector_disabled",
            "Collectors disabled because the host lacks what they need",
            m.collector_disabled.clone(),
        );
        metrics.register(
            "koordlet_metric_store_series",
            "Live time series in the metric store",
            m.store_series.clone(),
        );
        metrics.register(
            "koordlet_metric_store_disk_bytes",
            "Disk used by the metric store",
            m.store_disk_bytes.clone(),
        );
        metrics.register(
            "koordlet_nodemetric_reports",
            "NodeMetric status reports written",
            m.reports.clone(),
        );
        metrics.register(
            "koordlet_nodemetric_report_errors",
            "NodeMetric status reports that failed",
            m.report_errors.clone(),
        );
        metrics.register(
            "koordlet_qos_cgroup_changes",
            "cgroup values changed by QoS strategies",
            m.qos_changes.clone(),
        );
        metrics.register(
            "koordlet_be_suppress_cpu_milli",
            "CPU (milli-cores) best-effort pods may use, as cpusuppress computed it last",
            m.be_suppress_milli.clone(),
        );
        m
    }

    /// Replaces the pod and container gauges with this pass's values, dropping pods that
    /// are gone.
    pub fn set_pods(&self, pods: Vec<(PodLabels, f64)>, containers: Vec<(ContainerLabels, f64)>) {
        let mut live = self.live_pods.lock().unwrap_or_else(|p| p.into_inner());
        let now: HashSet<PodLabels> = pods.iter().map(|(l, _)| l.clone()).collect();
        for gone in live.difference(&now) {
            self.pod_usage.remove(gone);
        }
        for (l, v) in pods {
            self.pod_usage.get_or_create(&l).set(v);
        }
        *live = now;
        let mut live = self
            .live_containers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let now: HashSet<ContainerLabels> = containers.iter().map(|(l, _)| l.clone()).collect();
        for gone in live.difference(&now) {
            self.container_usage.remove(gone);
        }
        for (l, v) in containers {
            self.container_usage.get_or_create(&l).set(v);
        }
        *live = now;
    }
}
