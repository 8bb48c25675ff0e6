//! The koordlet's Prometheus metrics: Koordinator's series under their names and labels
//! (`pkg/koordlet/metrics`: `koordlet_start_time`, `koordlet_node_used_cpu_cores`, ...), and
//! koord's extras (per-pod usage, collector health, store size, reports) under `koord_`.

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
pub struct NodeOnly {
    pub node: String,
}

/// Labels in Koordinator's order; a `type` label cannot be a Rust field name.
pub type Pairs = Vec<(&'static str, String)>;

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
    pub start_time: Family<NodeOnly, FGauge>,
    pub node_used_cpu: Family<NodeOnly, FGauge>,
    pub node_used_memory: Family<NodeOnly, FGauge>,
    pub be_suppress_cores: Family<Pairs, FGauge>,
    /// A count kept in a gauge: Koordinator's Go counter is named without `_total`, and
    /// prometheus-client would add that suffix to a counter, breaking existing queries.
    pub pod_eviction: Family<Pairs, Gauge>,
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

pub fn node_only(node: &str) -> NodeOnly {
    NodeOnly {
        node: node.to_string(),
    }
}

impl KoordletMetrics {
    pub fn register(metrics: &Metrics) -> std::sync::Arc<KoordletMetrics> {
        let m = std::sync::Arc::new(KoordletMetrics::default());
        // Koordinator's names and help (pkg/koordlet/metrics).
        metrics.register(
            "koordlet_start_time",
            "the start time of koordlet",
            m.start_time.clone(),
        );
        metrics.register(
            "koordlet_node_used_cpu_cores",
            "Number of cpu cores used by node in realtime",
            m.node_used_cpu.clone(),
        );
        metrics.register(
            "koordlet_node_used_memory_bytes",
            "Memory used by node in realtime",
            m.node_used_memory.clone(),
        );
        metrics.register(
            "koordlet_be_suppress_cpu_cores",
            "Number of cores suppress by koordlet",
            m.be_suppress_cores.clone(),
        );
        metrics.register(
            "koordlet_pod_eviction",
            "Number of eviction launched by koordlet",
            m.pod_eviction.clone(),
        );
        metrics.register(
            "koord_koordlet_node_resource_usage",
            "Node resource usage (cpu in cores, memory in bytes)",
            m.node_usage.clone(),
        );
        metrics.register(
            "koord_koordlet_pod_resource_usage",
            "Pod resource usage (cpu in cores, memory in bytes)",
            m.pod_usage.clone(),
        );
        metrics.register(
            "koord_koordlet_container_resource_usage",
            "Container resource usage (cpu in cores, memory in bytes)",
            m.container_usage.clone(),
        );
        metrics.register(
            "koord_koordlet_collector_errors",
            "Collector passes that failed",
            m.collector_errors.clone(),
        );
        metrics.register(
            "koord_koordlet_collector_disabled",
            "Collectors disabled because the host lacks what they need",
            m.collector_disabled.clone(),
        );
        metrics.register(
            "koord_koordlet_metric_store_series",
            "Live time series in the metric store",
            m.store_series.clone(),
        );
        metrics.register(
            "koord_koordlet_metric_store_disk_bytes",
            "Disk used by the metric store",
            m.store_disk_bytes.clone(),
        );
        metrics.register(
            "koord_koordlet_nodemetric_reports",
            "NodeMetric status reports written",
            m.reports.clone(),
        );
        metrics.register(
            "koord_koordlet_nodemetric_report_errors",
            "NodeMetric status reports that failed",
            m.report_errors.clone(),
        );
        metrics.register(
            "koord_koordlet_qos_cgroup_changes",
            "cgroup values changed by QoS strategies",
            m.qos_changes.clone(),
        );
        metrics.register(
            "koord_koordlet_be_suppress_cpu_milli",
            "CPU (milli-cores) best-effort pods may use, as cpusuppress computed it last",
            m.be_suppress_milli.clone(),
        );
        m
    }

    /// `koordlet_start_time{node}`: now, in Unix seconds.
    pub fn started(&self, node: &str) {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        self.start_time.get_or_create(&node_only(node)).set(secs);
    }

    /// `koordlet_pod_eviction{node,reason}`.
    pub fn evicted(&self, node: &str, reason: &str) {
        let l = vec![("node", node.to_string()), ("reason", reason.to_string())];
        self.pod_eviction.get_or_create(&l).inc();
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
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
        for n in [
            "koordlet_start_time",
            "koordlet_node_used_cpu_cores",
            "koordlet_node_used_memory_bytes",
        ] {
            assert_eq!(find(n).labels.get("node"), Some("n1"));
        }
    }
}
