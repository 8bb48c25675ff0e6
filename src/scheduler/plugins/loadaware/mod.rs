//! LoadAwareScheduling (scheduler spec §2): filter nodes whose estimated usage would pass
//! the thresholds, score by least estimated usage. Estimated usage = reported usage
//! (NodeMetric) + what pods scheduled since the last report will add + the incoming pod.

pub mod args;
mod usage;

use std::collections::BTreeMap;

use super::super::framework::{ClusterState, CycleState, NodeInfo, Plugin, PodInfo, Point, Status};
use crate::api::extension::keys::ANNOTATION_USAGE_THRESHOLDS;
use crate::api::extension::priority::PriorityClass;
use args::{Aggregated, Effective};
pub use usage::{Metric, estimate};

pub const NAME: &str = "LoadAwareScheduling";

pub struct LoadAware {
    pub args: Effective,
    /// The resource vector: every resource any arg mentions, plus cpu and memory.
    pub resources: Vec<String>,
}

/// Per-node overrides from `scheduling.koordinator.sh/usage-thresholds`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeThresholds {
    usage_thresholds: Option<BTreeMap<String, i64>>,
    prod_usage_thresholds: Option<BTreeMap<String, i64>>,
    aggregated_usage: Option<Aggregated>,
}

/// Which thresholds apply and how usage is read.
enum Path {
    Normal(BTreeMap<String, i64>),
    Prod(BTreeMap<String, i64>),
    Aggregated(BTreeMap<String, i64>, Aggregated),
}

impl LoadAware {
    pub fn new(args: args::Args) -> Result<LoadAware, String> {
        let supported = args.supported_resources.clone().unwrap_or_default();
        let e = args.effective()?;
        let mut set: std::collections::BTreeSet<String> =
            ["cpu".to_string(), "memory".to_string()].into();
        set.extend(e.thresholds.keys().cloned());
        set.extend(e.prod_thresholds.keys().cloned());
        set.extend(
            e.aggregated
                .usage_thresholds
                .iter()
                .flatten()
                .map(|(k, _)| k.clone()),
        );
        set.extend(e.weights.keys().cloned());
        set.extend(e.factors.keys().cloned());
        set.extend(supported);
        Ok(LoadAware {
            args: e,
            resources: set.into_iter().collect(),
        })
    }

    fn path(&self, pod: &PodInfo, node: &NodeInfo) -> Path {
        let over: NodeThresholds = node
            .node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_USAGE_THRESHOLDS))
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_default();
        let nonempty = |m: Option<BTreeMap<String, i64>>| m.filter(|m| !m.is_empty());
        let prod = nonempty(over.prod_usage_thresholds)
            .unwrap_or_else(|| self.args.prod_thresholds.clone());
        if !prod.is_empty() && pod.class == PriorityClass::Prod {
            return Path::Prod(prod);
        }
        let agg = over
            .aggregated_usage
            .filter(|a| a.usage_thresholds.as_ref().is_some_and(|t| !t.is_empty()))
            .unwrap_or_else(|| self.args.aggregated.clone());
        if let Some(t) = agg.usage_thresholds.clone().filter(|t| !t.is_empty()) {
            return Path::Aggregated(t, agg);
        }
        Path::Normal(
            nonempty(over.usage_thresholds).unwrap_or_else(|| self.args.thresholds.clone()),
        )
    }

    fn expired(&self, m: &Metric, now_ms: i64) -> bool {
        m.update_ms
            .is_none_or(|t| now_ms - t >= self.args.expiration_seconds * 1000)
    }
}

fn reason(res: &str, aggregated: bool) -> String {
    if aggregated {
        format!("node(s) {res} aggregated usage exceed threshold")
    } else {
        format!("node(s) {res} usage exceed threshold")
    }
}

impl Plugin for LoadAware {
    fn name(&self) -> &'static str {
        NAME
    }
    fn points(&self) -> &'static [Point] {
        &[Point::Filter, Point::Score, Point::Reserve]
    }
    fn filter(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        if pod.daemonset {
            return Status::success();
        }
        let path = self.path(pod, node);
        let thresholds = match &path {
            Path::Normal(t) | Path::Prod(t) | Path::Aggregated(t, _) => t,
        };
        if thresholds.values().all(|v| *v == 0) {
            return Status::success();
        }
        let Some(nm) = cluster.metrics.get(&node.name) else {
            return Status::success();
        };
        let metric = Metric::new(nm);
        if self.args.filter_expired && self.expired(&metric, cluster.now_ms) {
            return if self.args.schedule_when_expired {
                Status::success()
            } else {
                Status::unschedulable("node(s) nodeMetric expired")
            };
        }
        let (used, aggregated) = match &path {
            Path::Normal(_) => (
                usage::node_estimated(self, pod, node, &metric, None, false),
                false,
            ),
            Path::Prod(_) => (
                usage::node_estimated(self, pod, node, &metric, None, true),
                false,
            ),
            Path::Aggregated(_, a) => (
                usage::node_estimated(
                    self,
                    pod,
                    node,
                    &metric,
                    Some((
                        a.usage_aggregation_type.as_deref(),
                        a.usage_aggregated_duration.as_deref(),
                    )),
                    false,
                ),
                true,
            ),
        };
        let alloc = usage::allocatable(node);
        for (res, t) in thresholds {
            let total = alloc.get(res).copied().unwrap_or(0);
            if *t == 0 || total == 0 {
                continue;
            }
            let est = used.get(res).copied().unwrap_or(0);
            let pct = (est as f64 / total as f64 * 100.0).round() as i64;
            if pct > *t {
                return Status::unschedulable(reason(res, aggregated));
            }
        }
        Status::success()
    }
    /// Koordinator's Reserve puts the pod into its assigned-pod cache; here the scheduler's
    /// assume does exactly that (the pod is counted on the node, stamped with the time).
    fn reserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) -> Status {
        Status::success()
    }
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<i64, String> {
        let weight_sum: i64 = self.args.weights.values().sum::<i64>() + self.args.dominant_weight;
        if weight_sum == 0 {
            return Ok(0);
        }
        let Some(nm) = cluster.metrics.get(&node.name) else {
            return Ok(0);
        };
        let metric = Metric::new(nm);
        if self.expired(&metric, cluster.now_ms) {
            return Ok(0);
        }
        let prod = self.args.score_by_prod && pod.class == PriorityClass::Prod;
        let agg = &self.args.aggregated;
        let aggregated = agg
            .score_aggregation_type
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(|t| (Some(t), agg.score_aggregated_duration.as_deref()));
        let used = usage::node_estimated(self, pod, node, &metric, aggregated, prod);
        let alloc = usage::allocatable(node);
        Ok(score_of(
            &self.resources,
            &self.args.weights,
            self.args.dominant_weight,
            &used,
            &alloc,
        ))
    }
}

/// Σ leastUsed·w + dominant·min(leastUsed) over Σ w + dominant, integer division.
pub fn score_of(
    resources: &[String],
    weights: &BTreeMap<String, i64>,
    dominant: i64,
    used: &BTreeMap<String, i64>,
    alloc: &BTreeMap<String, i64>,
) -> i64 {
    let least = |r: &str| {
        let a = alloc.get(r).copied().unwrap_or(0);
        let u = used.get(r).copied().unwrap_or(0);
        if a == 0 || u > a {
            0
        } else {
            (a - u) * 100 / a
        }
    };
    let (mut sum, mut wsum) = (0i64, 0i64);
    for (r, w) in weights {
        sum += least(r) * w;
        wsum += w;
    }
    if dominant > 0 {
        let min = resources.iter().map(|r| least(r)).min().unwrap_or(0);
        sum += dominant * min;
        wsum += dominant;
    }
    if wsum == 0 { 0 } else { sum / wsum }
}

#[cfg(test)]
mod tests;
