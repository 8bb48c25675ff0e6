//! Metric kinds (Koordinator's `metric_types.go` names) and series keys.

use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetricKind {
    NodeCpuUsage,
    NodeMemoryUsage,
    NodeNumaCpuUsage,
    NodeNumaMemoryUsage,
    SysCpuUsage,
    SysMemoryUsage,
    /// System usage per NUMA node: memory as the node's less its pods', CPU as the
    /// system's apportioned by the NUMA nodes' busy time (Koordinator's).
    SysNumaCpuUsage,
    SysNumaMemoryUsage,
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
    /// Per pod and container and GPU: the summed SM utilisation (percent) and memory
    /// (bytes) of its processes.
    PodGpuCoreUsage,
    PodGpuMemoryUsage,
    ContainerGpuCoreUsage,
    ContainerGpuMemoryUsage,
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
            Self::SysNumaCpuUsage => "system_numa_cpu_usage",
            Self::SysNumaMemoryUsage => "system_numa_memory_usage",
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
            Self::PodGpuCoreUsage => "pod_gpu_core_usage",
            Self::PodGpuMemoryUsage => "pod_gpu_memory_usage",
            Self::ContainerGpuCoreUsage => "container_gpu_core_usage",
            Self::ContainerGpuMemoryUsage => "container_gpu_memory_usage",
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
    labels: Labels,
}

/// A series' labels, `k=v,k=v` as the store names the series, shared: a pod's and a
/// container's are made once with its `PodMeta`, and the collectors' hundreds of keys a
/// second share them instead of each allocating its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(Arc<str>);

impl Labels {
    pub fn new(labels: &[(&'static str, &str)]) -> Labels {
        let mut text =
            String::with_capacity(labels.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
        if labels.is_sorted() {
            push_labels(&mut text, labels.iter());
        } else {
            let mut sorted: Vec<_> = labels.iter().collect();
            sorted.sort();
            push_labels(&mut text, sorted.into_iter());
        }
        Labels(text.into())
    }

    /// `pod_uid=<uid>`.
    pub fn pod(uid: &str) -> Labels {
        Labels::new(&[("pod_uid", uid)])
    }

    /// `container_id=<id>` (the bare id).
    pub fn container(id: &str) -> Labels {
        Labels::new(&[("container_id", id)])
    }
}

impl SeriesKey {
    pub fn new(kind: MetricKind, labels: &[(&'static str, &str)]) -> Self {
        Self::with(kind, &Labels::new(labels))
    }

    /// A key with labels made before (a pod's, a container's): no allocation.
    pub fn with(kind: MetricKind, labels: &Labels) -> Self {
        SeriesKey {
            kind,
            labels: labels.clone(),
        }
    }

    /// The value of label `name`. Values are read up to the next `,name=` of a later
    /// label, so a value holding such text reads short (uids, ids and numbers do not).
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// (name, value) in name order.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut rest = (!self.labels.0.is_empty()).then_some(&*self.labels.0);
        std::iter::from_fn(move || {
            let (name, tail) = rest?.split_once('=')?;
            let end = next_label(tail);
            rest = (end < tail.len()).then(|| &tail[end + 1..]);
            Some((name, &tail[..end]))
        })
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
        out.clear();
        out.reserve(name.len() + 2 + self.labels.0.len());
        out.push_str(name);
        out.push('{');
        out.push_str(&self.labels.0);
        out.push('}');
    }
}

fn push_labels<'a>(out: &mut String, labels: impl Iterator<Item = &'a (&'static str, &'a str)>) {
    for (i, (k, v)) in labels.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push('=');
        out.push_str(v);
    }
}

/// Where the value at the start of `tail` ends: at the first `,` followed by a label
/// name (`[a-z_]+=`), or the end.
fn next_label(tail: &str) -> usize {
    let bytes = tail.as_bytes();
    let mut at = 0;
    while let Some(i) = tail[at..].find(',') {
        let comma = at + i;
        let name = bytes[comma + 1..]
            .iter()
            .take_while(|b| b.is_ascii_lowercase() || **b == b'_')
            .count();
        if name > 0 && bytes.get(comma + 1 + name) == Some(&b'=') {
            return comma;
        }
        at = comma + 1;
    }
    tail.len()
}
