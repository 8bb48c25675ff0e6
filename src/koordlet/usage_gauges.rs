//! The per-pod and per-container usage gauges on `/metrics`, set every collection pass.
//! Their label sets and series keys are built once per pod list (the informer shares one
//! list until a pod changes) and each keeps its gauge handle, so a pass sets values
//! without building, hashing or cloning labels — that work was a third of the koordlet's
//! instructions at 100 pods and a 1 s interval.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Weak};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;

use super::informer::PodMeta;
use super::metrics::{ContainerLabels, FGauge, KoordletMetrics, PodLabels};
use super::store::{MetricKind, SeriesKey};

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

/// One series: where its value comes from, its labels, and its gauge while it has one.
struct Slot<L> {
    key: SeriesKey,
    labels: L,
    gauge: Option<FGauge>,
}

impl<L: Clone + Hash + Eq + EncodeLabelSet + std::fmt::Debug> Slot<L> {
    /// A series with no value this pass is dropped, as Koordinator drops a gone pod's.
    fn set(&mut self, family: &Family<L, FGauge>, value: Option<f64>) {
        match value {
            Some(v) => {
                let gauge = self
                    .gauge
                    .get_or_insert_with(|| family.get_or_create(&self.labels).clone());
                gauge.set(v);
            }
            None => {
                if self.gauge.take().is_some() {
                    family.remove(&self.labels);
                }
            }
        }
    }
}

/// The slots of a new pod list, keeping the gauges of series that stay and removing the
/// series of pods and containers that are gone.
fn rebuild<L: Clone + Hash + Eq + EncodeLabelSet + std::fmt::Debug>(
    old: Vec<Slot<L>>,
    new: Vec<(SeriesKey, L)>,
    family: &Family<L, FGauge>,
) -> Vec<Slot<L>> {
    let mut kept: HashMap<L, FGauge> = old
        .into_iter()
        .filter_map(|s| Some((s.labels, s.gauge?)))
        .collect();
    let slots = new
        .into_iter()
        .map(|(key, labels)| Slot {
            gauge: kept.remove(&labels),
            key,
            labels,
        })
        .collect();
    for gone in kept.keys() {
        family.remove(gone);
    }
    slots
}

#[derive(Default)]
pub(super) struct UsageGauges {
    of: Weak<Vec<PodMeta>>,
    pods: Vec<Slot<PodLabels>>,
    containers: Vec<Slot<ContainerLabels>>,
}

impl UsageGauges {
    /// Sets every pod's and container's usage from `value` (this pass's samples).
    pub(super) fn publish(
        &mut self,
        node: &str,
        pods: &Arc<Vec<PodMeta>>,
        metrics: &KoordletMetrics,
        value: impl Fn(&SeriesKey) -> Option<f64>,
    ) {
        if self.of.as_ptr() != Arc::as_ptr(pods) {
            self.refresh(node, pods, metrics);
        }
        for s in &mut self.pods {
            s.set(&metrics.pod_usage, value(&s.key));
        }
        for s in &mut self.containers {
            s.set(&metrics.container_usage, value(&s.key));
        }
    }

    fn refresh(&mut self, node: &str, pods: &Arc<Vec<PodMeta>>, metrics: &KoordletMetrics) {
        let (mut pod_slots, mut ctr_slots) = (Vec::new(), Vec::new());
        for p in pods.iter() {
            for (pod_kind, _, res) in RESOURCES {
                let labels = PodLabels {
                    node: node.to_string(),
                    namespace: p.namespace.clone(),
                    pod: p.name.clone(),
                    resource: res.into(),
                };
                pod_slots.push((SeriesKey::pod(pod_kind, &p.uid), labels));
            }
            for c in &p.containers {
                let id = PodMeta::container_id(c);
                for (_, ctr_kind, res) in RESOURCES {
                    let labels = ContainerLabels {
                        node: node.to_string(),
                        namespace: p.namespace.clone(),
                        pod: p.name.clone(),
                        container: c.name.clone(),
                        resource: res.into(),
                    };
                    ctr_slots.push((SeriesKey::container(ctr_kind, id), labels));
                }
            }
        }
        self.pods = rebuild(
            std::mem::take(&mut self.pods),
            pod_slots,
            &metrics.pod_usage,
        );
        self.containers = rebuild(
            std::mem::take(&mut self.containers),
            ctr_slots,
            &metrics.container_usage,
        );
        self.of = Arc::downgrade(pods);
    }
}

#[cfg(test)]
#[path = "usage_gauges_tests.rs"]
mod tests;
