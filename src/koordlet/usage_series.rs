//! The per-pod and per-container usage series on `/metrics`
//! (`koord_koordlet_pod_resource_usage`, `koord_koordlet_container_resource_usage`),
//! encoded when Prometheus scrapes, from the last collection pass. The koordlet passes
//! every second and is scraped every 15–60 s: setting a few hundred gauges each pass was a
//! tenth of its instructions at 100 pods; a pass now only hands its samples over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::collectors::Samples;
use super::informer::PodMeta;
use super::store::{MetricKind, SeriesKey};

pub const POD_SERIES: &str = "koord_koordlet_pod_resource_usage";
pub const CONTAINER_SERIES: &str = "koord_koordlet_container_resource_usage";
const POD_HELP: &str = "Pod resource usage (cpu in cores, memory in bytes)";
const CONTAINER_HELP: &str = "Container resource usage (cpu in cores, memory in bytes)";

const RESOURCES: [(MetricKind, MetricKind, &str); 2] = [
    (
        MetricKind::PodCpuUsage,
        MetricKind::ContainerCpuUsage,
        "cpu",
    ),
    (
        MetricKind::PodMemoryUsage,
        MetricKind::ContainerMemoryUsage,
        "memory",
    ),
];

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodLabels {
    node: String,
    namespace: String,
    pod: String,
    resource: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ContainerLabels {
    node: String,
    namespace: String,
    pod: String,
    container: String,
    resource: String,
}

/// What one collection pass saw: its node, pod list and samples.
pub struct LastPass {
    pub node: String,
    pub pods: Arc<Vec<PodMeta>>,
    pub samples: Samples,
}

/// The last pass, kept for the next scrape. A pod or container without a value in it has
/// no series (a gone pod's series go with it, as Koordinator drops them).
#[derive(Default)]
pub struct UsageSeries {
    last: Mutex<Option<Arc<LastPass>>>,
}

impl std::fmt::Debug for UsageSeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageSeries").finish_non_exhaustive()
    }
}

impl UsageSeries {
    /// A new one, registered in `metrics`.
    pub fn register(metrics: &crate::kernel::Metrics) -> Arc<UsageSeries> {
        let series = Arc::new(UsageSeries::default());
        use crate::kernel::metric_docs::{FamilyDoc, Labels, names_of};
        let doc = |name: &str, help: &str, labels| FamilyDoc {
            name: name.to_string(),
            kind: "gauge".to_string(),
            help: help.to_string(),
            labels,
        };
        let families = vec![
            doc(POD_SERIES, POD_HELP, Labels::Of(names_of::<PodLabels>)),
            doc(
                CONTAINER_SERIES,
                CONTAINER_HELP,
                Labels::Of(names_of::<ContainerLabels>),
            ),
        ];
        metrics.register_collector(families, Box::new(series.clone()));
        series
    }

    pub fn set(&self, pass: LastPass) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(pass));
    }
}

fn encode_one(
    encoder: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    series: impl Iterator<Item = (impl EncodeLabelSet, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for UsageSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let pass = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(pass) = pass else {
            return Ok(());
        };
        let wanted = |k: MetricKind| RESOURCES.iter().any(|r| r.0 == k || r.1 == k);
        let mut values: HashMap<&SeriesKey, f64> = HashMap::new();
        for (k, p) in pass.samples.iter().filter(|(k, _)| wanted(k.kind)) {
            values.entry(k).or_insert(p.value);
        }
        let (node, values) = (&pass.node, &values);
        let pods = pass.pods.iter().flat_map(|p| {
            RESOURCES.iter().filter_map(|(kind, _, res)| {
                let v = values.get(&SeriesKey::pod(*kind, &p.uid))?;
                let labels = PodLabels {
                    node: node.clone(),
                    namespace: p.namespace.clone(),
                    pod: p.name.clone(),
                    resource: (*res).into(),
                };
                Some((labels, *v))
            })
        });
        encode_one(&mut encoder, (POD_SERIES, POD_HELP), pods)?;
        let containers = pass.pods.iter().flat_map(|p| {
            p.containers.iter().flat_map(move |c| {
                let id = PodMeta::container_id(c);
                RESOURCES.iter().filter_map(move |(_, kind, res)| {
                    let v = values.get(&SeriesKey::container(*kind, id))?;
                    let labels = ContainerLabels {
                        node: node.clone(),
                        namespace: p.namespace.clone(),
                        pod: p.name.clone(),
                        container: c.name.clone(),
                        resource: (*res).into(),
                    };
                    Some((labels, *v))
                })
            })
        });
        encode_one(&mut encoder, (CONTAINER_SERIES, CONTAINER_HELP), containers)
    }
}

#[cfg(test)]
#[path = "usage_series_tests.rs"]
mod tests;
