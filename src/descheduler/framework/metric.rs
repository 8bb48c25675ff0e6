//! The part of a NodeMetric LowNodeLoad reads, kept per node by the descheduler's cache.
//! A NodeMetric holds a resource map per pod (~550 bytes each even for cpu and memory);
//! the view keeps each pod's usage as a short list.

use crate::api::pod::{Amounts, amounts};
use crate::api::slo::NodeMetric;

#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub namespace: String,
    pub name: String,
    usage: Box<[(String, i64)]>,
}

impl PodUsage {
    pub fn usage(&self) -> Amounts {
        self.usage.iter().cloned().collect()
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetricView {
    /// The NodeMetric has a status.
    pub status: bool,
    /// ... with `status.nodeMetric`.
    pub node_metric: bool,
    pub updated_ms: Option<i64>,
    system: Box<[(String, i64)]>,
    pub pods: Box<[PodUsage]>,
}

fn short(a: Amounts) -> Box<[(String, i64)]> {
    a.into_iter().collect()
}

impl From<&NodeMetric> for MetricView {
    fn from(m: &NodeMetric) -> MetricView {
        let Some(st) = m.status.as_ref() else {
            return MetricView::default();
        };
        let system = st
            .node_metric
            .as_ref()
            .map(|n| amounts(n.system_usage.resources.as_ref()))
            .unwrap_or_default();
        MetricView {
            status: true,
            node_metric: st.node_metric.is_some(),
            updated_ms: st.update_time.as_ref().map(|t| t.0.as_millisecond()),
            system: short(system),
            pods: st
                .pods_metric
                .iter()
                .flatten()
                .map(|p| PodUsage {
                    namespace: p.namespace.clone().unwrap_or_default(),
                    name: p.name.clone().unwrap_or_default(),
                    usage: short(amounts(p.pod_usage.resources.as_ref())),
                })
                .collect(),
        }
    }
}

impl MetricView {
    /// `status.nodeMetric.systemUsage`.
    pub fn system(&self) -> Amounts {
        self.system.iter().cloned().collect()
    }
}
