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

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::kernel::Metrics;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    pub node: String,
    pub resource: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeOnly {
    pub node: String,
}

/// Labels in Koordinator's order; a `type` label cannot be a Rust field name.
pub type Pairs = Vec<(&'static str, String)>;
/// Gauge values by their labels, one pass's worth.
pub type Values = Vec<(Pairs, f64)>;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CollectorLabels {
    pub collector: String,
}

/// A QoS strategy's cgroup change: which strategy, which file.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QosLabels {
    pub strategy: String,
    pub resource: String,
}

pub type FGauge = Gauge<f64, AtomicU64>;

#[derive(Default)]
pub struct KoordletMetrics {
    pub start_time: Family<NodeOnly, FGauge>,
    pub node_used_cpu: Family<NodeOnly, FGauge>,
    pub node_used_memory: Family<NodeOnly, FGauge>,
    pub be_suppress_cores: Family<Pairs, FGauge>,
    pub be_suppress_ls_used: Family<NodeOnly, FGauge>,
    pub be_suppress_be_used: Family<NodeOnly, FGauge>,
    /// `{node,resource,unit}`: batch and mid allocatable as the node shows them.
    pub node_allocatable: Family<Pairs, FGauge>,
    /// `{node,predictor,resource,unit}`.
    pub predicted_peak: Family<Pairs, FGauge>,
    /// `{node,numa_node_id,resource,unit}`: the last report's per-NUMA usage.
    pub node_metric_numa_usage: Family<Pairs, FGauge>,
    /// The same labels: the last report's per-NUMA system usage.
    pub node_metric_numa_system_usage: Family<Pairs, FGauge>,
    /// `{node,status}` counts (counters named without `_total`, as Koordinator's).
    pub cpu_info_status: Family<Pairs, Counter>,
    pub numa_info_status: Family<Pairs, Counter>,
    pub storage_info_status: Family<Pairs, Counter>,
    /// `{node,host_application_name,resource,priority_class,qos}`.
    pub host_app_usage: Family<Pairs, FGauge>,
    /// CPUs in the LS and BE share pools the topology report computed.
    pub share_pool_cores: Family<NodeOnly, FGauge>,
    pub be_share_pool_cores: Family<NodeOnly, FGauge>,
    /// `{node,resource,unit}`: what the last NodeMetric report said.
    pub node_metric_node_usage: Family<Pairs, FGauge>,
    pub node_metric_system_usage: Family<Pairs, FGauge>,
    /// `{node,predictor,resource,unit}`.
    pub predicted_reclaimable: Family<Pairs, FGauge>,
    /// Koordinator's counter, named without `_total`.
    pub pod_eviction: Family<Pairs, Counter>,
    pub node_usage: Family<NodeLabels, FGauge>,
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
    /// `{node,resource,unit,pod_uid,pod_name,pod_namespace,container_id,container_name}`.
    pub container_requests: Family<Pairs, FGauge>,
    pub container_limits: Family<Pairs, FGauge>,
    /// What the koordlet did: hook and executor durations, per-container knobs, ...
    pub ops: ops::OpSeries,
    live_container_specs: Mutex<HashSet<Pairs>>,
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
            "koordlet_be_suppress_ls_used_cpu_cores",
            "Number of cpu cores used by LS. We consider non-BE pods and podMeta-missing pods as LS.",
            m.be_suppress_ls_used.clone(),
        );
        metrics.register(
            "koordlet_be_suppress_be_used_cpu_cores",
            "Number of cpu cores used by BE.",
            m.be_suppress_be_used.clone(),
        );
        metrics.register(
            "koordlet_node_resource_allocatable",
            "the node allocatable of resources updated by koordinator",
            m.node_allocatable.clone(),
        );
        metrics.register(
            "koordlet_node_predicted_resource_peak",
            "the node peak resources predicted by koordinator",
            m.predicted_peak.clone(),
        );
        metrics.register(
            "koordlet_node_metric_numa_node_usage",
            "the per-NUMA node usage reported in the NodeMetric",
            m.node_metric_numa_usage.clone(),
        );
        metrics.register(
            "koordlet_node_metric_numa_system_usage",
            "the per-NUMA system usage reported in the NodeMetric",
            m.node_metric_numa_system_usage.clone(),
        );
        metrics.register_bare_counter(
            "koordlet_collect_node_cpu_info_status",
            "the count of CollectNodeCPUInfo status",
            m.cpu_info_status.clone(),
        );
        metrics.register_bare_counter(
            "koordlet_collect_node_numa_info_status",
            "the count of CollectNodeNUMAInfo status",
            m.numa_info_status.clone(),
        );
        metrics.register_bare_counter(
            "koordlet_collect_node_local_storage_info_status",
            "the count of CollectNodeLocalStorageInfo status",
            m.storage_info_status.clone(),
        );
        metrics.register(
            "koordlet_host_application_resource_usage",
            "Host application resource usage collected by koordlet",
            m.host_app_usage.clone(),
        );
        metrics.register(
            "koordlet_cpuset_share_pool_cpu_cores",
            "Number of share pool cores",
            m.share_pool_cores.clone(),
        );
        metrics.register(
            "koordlet_cpuset_be_share_pool_cpu_cores",
            "Number of be share pool cores",
            m.be_share_pool_cores.clone(),
        );
        metrics.register(
            "koordlet_node_metric_node_usage",
            "the node usage reported in the NodeMetric",
            m.node_metric_node_usage.clone(),
        );
        metrics.register(
            "koordlet_node_metric_system_usage",
            "the system usage reported in the NodeMetric",
            m.node_metric_system_usage.clone(),
        );
        metrics.register(
            "koordlet_node_predicted_resource_reclaimable",
            "the node reclaimable resources predicted by koordinator",
            m.predicted_reclaimable.clone(),
        );
        metrics.register(
            "koordlet_container_resource_requests",
            "the container requests of resources updated by koordinator",
            m.container_requests.clone(),
        );
        metrics.register(
            "koordlet_container_resource_limits",
            "the container limits of resources updated by koordinator",
            m.container_limits.clone(),
        );
        metrics.register_bare_counter(
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
        m.ops.register(metrics);
        for (name, labels) in labels::PAIRS {
            metrics.describe_labels(name, labels);
        }
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

    /// A resource list as Koordinator's `{resource,unit}` series: cpu in cores (`core`),
    /// memory in bytes (`byte`); other resources are not exported. `extra` labels come
    /// after `node`.
    pub fn set_resources<'a>(
        family: &Family<Pairs, FGauge>,
        node: &str,
        extra: &[(&'static str, &str)],
        resources: impl IntoIterator<Item = (&'a String, &'a Quantity)>,
    ) {
        for (name, q) in resources {
            let (unit, value) = match name.as_str() {
                "cpu" => ("core", crate::api::quantity::q_milli(q) as f64 / 1000.0),
                "memory" => ("byte", crate::api::quantity::q_value(q) as f64),
                _ => continue,
            };
            let mut l: Pairs = vec![("node", node.to_string())];
            l.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
            l.push(("resource", name.clone()));
            l.push(("unit", unit.to_string()));
            family.get_or_create(&l).set(value);
        }
    }

    /// `koordlet_node_resource_allocatable`: batch and mid cpu (`integer`, milli-cores as
    /// the extended resource counts them) and memory (`byte`), 0 when the node has none.
    pub fn set_allocatable(&self, node: &k8s_openapi::api::core::v1::Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        for (resource, unit) in [
            ("kubernetes.io/batch-cpu", "integer"),
            ("kubernetes.io/batch-memory", "byte"),
            ("kubernetes.io/mid-cpu", "integer"),
            ("kubernetes.io/mid-memory", "byte"),
        ] {
            let v = alloc
                .and_then(|a| a.get(resource))
                .map_or(0, crate::api::quantity::q_value);
            let l: Pairs = vec![
                ("node", name.clone()),
                ("resource", resource.to_string()),
                ("unit", unit.to_string()),
            ];
            self.node_allocatable.get_or_create(&l).set(v as f64);
        }
    }

    /// `koordlet_host_application_resource_usage`: this pass's (application, resource,
    /// value); applications no longer measured disappear.
    pub fn set_host_apps(
        &self,
        node: &str,
        usage: Vec<(
            &crate::api::slo::nodeslo::HostApplicationSpec,
            &'static str,
            f64,
        )>,
    ) {
        self.host_app_usage.clear();
        for (app, resource, v) in usage {
            let labels: Pairs = vec![
                ("node", node.to_string()),
                (
                    "host_application_name",
                    app.name.clone().unwrap_or_default(),
                ),
                ("resource", resource.to_string()),
                ("priority_class", app.priority.clone().unwrap_or_default()),
                ("qos", app.qos.clone().unwrap_or_default()),
            ];
            self.host_app_usage.get_or_create(&labels).set(v);
        }
    }

    /// One pass reading the node's CPU and NUMA information.
    pub fn collected_node_info(&self, node: &str, cpu_ok: bool, numa_ok: bool) {
        for (family, ok) in [
            (&self.cpu_info_status, cpu_ok),
            (&self.numa_info_status, numa_ok),
        ] {
            count_status(family, node, ok);
        }
    }

    /// One NodeStorageInfoCollector scan.
    pub fn collected_storage_info(&self, node: &str, ok: bool) {
        count_status(&self.storage_info_status, node, ok);
    }

    /// The share pools' sizes, and with `per_cpu` (gate `PerCPUMetric`, as Koordinator) each
    /// pool's CPUs, from a NodeResourceTopology report's annotations.
    pub fn share_pools(&self, nrt: &crate::api::topology::NodeResourceTopology, per_cpu: bool) {
        let name = nrt.metadata.name.as_deref().unwrap_or_default();
        let node = node_only(name);
        let ann = nrt.metadata.annotations.as_ref();
        let mut cpus: [Vec<u32>; 2] = Default::default();
        for (i, key, family) in [
            (
                0,
                "node.koordinator.sh/cpu-shared-pools",
                &self.share_pool_cores,
            ),
            (
                1,
                "node.koordinator.sh/be-cpu-shared-pools",
                &self.be_share_pool_cores,
            ),
        ] {
            let Some(raw) = ann.and_then(|a| a.get(key)) else {
                continue;
            };
            let pools: Vec<serde_json::Value> = serde_json::from_str(raw).unwrap_or_default();
            cpus[i] = pools
                .iter()
                .filter_map(|p| p.get("cpuset")?.as_str())
                .filter_map(|c| crate::api::cpuset::parse(c).ok())
                .flatten()
                .collect();
            family.get_or_create(&node).set(cpus[i].len() as f64);
        }
        if per_cpu {
            self.ops.set_share_pools(name, &cpus[0], &cpus[1]);
        }
    }

    /// `koordlet_pod_eviction{node,reason}`.
    pub fn evicted(&self, node: &str, reason: &str) {
        let l = vec![("node", node.to_string()), ("reason", reason.to_string())];
        self.pod_eviction.get_or_create(&l).inc();
    }

    /// Replaces the container request/limit series with this pass's (requests, limits),
    /// dropping containers that are gone.
    pub fn set_container_specs(&self, requests: Vec<(Pairs, f64)>, limits: Vec<(Pairs, f64)>) {
        let mut live = self
            .live_container_specs
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let now: HashSet<Pairs> = requests
            .iter()
            .chain(&limits)
            .map(|(l, _)| l.clone())
            .collect();
        for gone in live.difference(&now) {
            self.container_requests.remove(gone);
            self.container_limits.remove(gone);
        }
        for (l, v) in requests {
            self.container_requests.get_or_create(&l).set(v);
        }
        for (l, v) in limits {
            self.container_limits.get_or_create(&l).set(v);
        }
        *live = now;
    }
}

mod labels;
mod ops;
pub use ops::{KubeletRequests, ScaledCfs};

#[cfg(test)]
mod tests;

/// Koordinator's `Record…Status(err)`: one more `{node, status=succeeded|failed}`.
fn count_status(family: &Family<Pairs, Counter>, node: &str, ok: bool) {
    let status = if ok { "succeeded" } else { "failed" };
    let l: Pairs = vec![("node", node.to_string()), ("status", status.to_string())];
    family.get_or_create(&l).inc();
}
