//! Metric kinds (Koordinator's `metric_types.go` names) and series keys.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetricKind {
    NodeCpuUsage,
    NodeMemoryUsage,
    NodeNumaCpuUsage,
    NodeNumaMemoryUsage,
    SysCpuUsage,
    SysMemoryUsage,
    NodeBe,
    PodCpuUsage,
    PodMemoryUsage,
    PodCpuThrottled,
    ContainerCpuUsage,
    ContainerMemoryUsage,
    ContainerCpuThrottled,
    HostAppCpuUsage,
    HostAppMemoryUsage,
    NodePsi,
    PodPsi,
    ContainerPsi,
    ContainerCpi,
    NodeGpuCoreUsage,
    NodeGpuMemoryUsage,
    NodeGpuMemoryTotal,
    /// `usageWithPageCache` (NodeMetric `nodeMemoryCollectPolicy`): collected only then.
    NodeMemoryWithPageCache,
    PodMemoryWithPageCache,
    ContainerMemoryWithPageCache,
    HostAppMemoryWithPageCache,
    NodeMemoryWithHotPage,
    PodMemoryWithHotPage,
    ContainerMemoryWithHotPage,
    HostAppMemoryWithHotPage,
    NodeMemoryColdPageSize,
    PodMemoryColdPageSize,
    ContainerMemoryColdPageSize,
    HostAppMemoryColdPageSize,
    /// LLC occupancy of a resctrl group per cache domain (`ResctrlCollector`).
    ResctrlLlc,
    /// Memory bandwidth counters of a resctrl group per cache domain.
    ResctrlMb,
}

impl MetricKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::NodeCpuUsage => "node_cpu_usage",
            Self::NodeMemoryUsage => "node_memory_usage",
            Self::NodeNumaCpuUsage => "node_numa_cpu_usage",
            Self::NodeNumaMemoryUsage => "node_numa_memory_usage",
            Self::SysCpuUsage => "sys_cpu_usage",
            Self::SysMemoryUsage => "sys_memory_usage",
            Self::NodeBe => "node_be",
            Self::PodCpuUsage => "pod_cpu_usage",
            Self::PodMemoryUsage => "pod_memory_usage",
            Self::PodCpuThrottled => "pod_cpu_throttled",
            Self::ContainerCpuUsage => "container_cpu_usage",
            Self::ContainerMemoryUsage => "container_memory_usage",
            Self::ContainerCpuThrottled => "container_cpu_throttled",
            Self::HostAppCpuUsage => "host_application_cpu_usage",
            Self::HostAppMemoryUsage => "host_application_memory_usage",
            Self::NodePsi => "node_psi",
            Self::PodPsi => "pod_psi",
            Self::ContainerPsi => "container_psi",
            Self::ContainerCpi => "container_cpi",
            Self::NodeGpuCoreUsage => "node_gpu_core_usage",
            Self::NodeGpuMemoryUsage => "node_gpu_memory_usage",
            Self::NodeGpuMemoryTotal => "node_gpu_memory_total",
            Self::NodeMemoryWithPageCache => "node_memory_usage_with_page_cache",
            Self::PodMemoryWithPageCache => "pod_memory_usage_with_page_cache",
            Self::ContainerMemoryWithPageCache => "container_memory_usage_with_page_cache",
            Self::HostAppMemoryWithPageCache => "host_application_memory_usage_with_page_cache",
            Self::NodeMemoryWithHotPage => "node_memory_with_hot_page_usage",
            Self::PodMemoryWithHotPage => "pod_memory_with_hot_page_usage",
            Self::ContainerMemoryWithHotPage => "container_memory_with_hot_page_usage",
            Self::HostAppMemoryWithHotPage => "host_application_memory_with_hot_page_usage",
            Self::NodeMemoryColdPageSize => "node_memory_cold_page_size",
            Self::PodMemoryColdPageSize => "pod_memory_cold_page_size",
            Self::ContainerMemoryColdPageSize => "container_memory_cold_page_size",
            Self::HostAppMemoryColdPageSize => "host_application_memory_cold_page_size",
            Self::ResctrlLlc => "resctrl_resource_llc",
            Self::ResctrlMb => "resctrl_resource_mb",
        }
    }
}

/// A series: a kind and its property labels, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub kind: MetricKind,
    pub labels: Vec<(&'static str, String)>,
}

impl SeriesKey {
    pub fn new(kind: MetricKind, labels: &[(&'static str, &str)]) -> Self {
        let mut labels: Vec<(&'static str, String)> =
            labels.iter().map(|(k, v)| (*k, v.to_string())).collect();
        labels.sort();
        SeriesKey { kind, labels }
    }

    pub fn node(kind: MetricKind) -> Self {
        Self::new(kind, &[])
    }

    pub fn pod(kind: MetricKind, uid: &str) -> Self {
        Self::new(kind, &[("pod_uid", uid)])
    }

    pub fn container(kind: MetricKind, id: &str) -> Self {
        Self::new(kind, &[("container_id", id)])
    }

    /// `node_be{be_resource=cpu, be_allocation=usage|request|real-limit}` in milli-cores.
    pub fn be_cpu(allocation: &str) -> Self {
        Self::new(
            MetricKind::NodeBe,
            &[("be_resource", "cpu"), ("be_allocation", allocation)],
        )
    }

    /// `node_numa_*_usage{numa_node_id=N}`.
    pub fn numa(kind: MetricKind, node: u32) -> Self {
        Self::new(kind, &[("numa_node_id", &node.to_string())])
    }

    pub fn host_app(kind: MetricKind, name: &str) -> Self {
        Self::new(kind, &[("host_app_name", name)])
    }

    /// `name{k=v,…}`, built in one allocation.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        self.encode_into(&mut out);
        out
    }

    /// `encode` into `out` (cleared first): the store names every sample it stores and
    /// every series it is asked for, and reuses one buffer for that.
    pub fn encode_into(&self, out: &mut String) {
        let name = self.kind.name();
        let len = self.labels.iter().map(|(k, v)| k.len() + v.len() + 2);
        out.clear();
        out.reserve(name.len() + 2 + len.sum::<usize>());
        out.push_str(name);
        out.push('{');
        for (i, (k, v)) in self.labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push('=');
            out.push_str(v);
        }
        out.push('}');
    }
}
