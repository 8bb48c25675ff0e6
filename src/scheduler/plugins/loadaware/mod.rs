//! LoadAwareScheduling (`pkg/scheduler/plugins/loadaware/load_aware.go`): filter nodes whose estimated usage would pass
//! the thresholds, score by least estimated usage. Estimated usage = reported usage
//! (NodeMetric) + what pods scheduled since the last report will add + the incoming pod.

pub mod args;
mod usage;

use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::framework::memo::{self, Memoized};
use super::super::framework::{ClusterState, CycleState, NodeInfo, Plugin, PodInfo, Point, Status};
use crate::api::extension::keys::ANNOTATION_USAGE_THRESHOLDS;
use crate::api::extension::priority::PriorityClass;
use crate::scheduler::framework::metric::MetricInfo;
use crate::scheduler::framework::metric::duration_seconds as seconds;
use crate::scheduler::framework::res::{self, ResId, ResVec};
use args::{Aggregated, Effective};
pub use usage::estimate;
use usage::{Base, Factor};

pub const NAME: &str = "LoadAwareScheduling";

/// Thresholds by resource id, as the args give them.
type Limits = Vec<(ResId, i64)>;

pub struct LoadAware {
    pub args: Effective,
    /// The resource vector: every resource any arg mentions, plus cpu and memory.
    pub resources: Vec<String>,
    ids: Vec<ResId>,
    weights: Limits,
    thresholds: Limits,
    prod_thresholds: Limits,
    aggregated_thresholds: Option<Limits>,
    factors: Vec<Factor>,
    /// This instance's slots in node and pod memos.
    owner: usize,
}

fn limits(m: &BTreeMap<String, i64>) -> Limits {
    m.iter().map(|(k, v)| (res::intern(k), *v)).collect()
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
enum Path<'a> {
    Normal(&'a Limits),
    Prod(&'a Limits),
    Aggregated(&'a Limits, &'a Aggregated),
}

/// A node's `usage-thresholds` annotation, resolved to ids (None: that part is not set).
struct Overrides {
    prod: Option<Limits>,
    aggregated: Option<(Limits, Aggregated)>,
    normal: Option<Limits>,
}

impl Overrides {
    fn of(node: &NodeInfo) -> Option<Overrides> {
        let raw = node.node.metadata.annotations.as_ref()?;
        let over: NodeThresholds =
            serde_json::from_str(raw.get(ANNOTATION_USAGE_THRESHOLDS)?).ok()?;
        let nonempty = |m: Option<BTreeMap<String, i64>>| m.filter(|m| !m.is_empty());
        let aggregated = over.aggregated_usage.and_then(|a| {
            let t = a.usage_thresholds.as_ref().filter(|t| !t.is_empty())?;
            Some((limits(t), a))
        });
        Some(Overrides {
            prod: nonempty(over.prod_usage_thresholds).map(|m| limits(&m)),
            aggregated,
            normal: nonempty(over.usage_thresholds).map(|m| limits(&m)),
        })
    }
}

/// What LoadAware reads of one state of a node: its NodeMetric, what its pods add to it,
/// its allocatable (raw-allocatable applied) and its threshold overrides.
/// Filter and Score read it for hundreds of nodes per pod: what the common path needs is
/// inline (one allocation to reach per node, not three).
pub struct NodeLoad {
    metric: Option<Arc<MetricInfo>>,
    update_ms: Option<i64>,
    /// Reported usage with what pods add that the report cannot show yet (the plain base).
    plain: ResVec,
    alloc: ResVec,
    sums: usage::PodSums,
    over: Option<Box<Overrides>>,
}

impl NodeLoad {
    fn of(la: &LoadAware, node: &NodeInfo, cluster: &ClusterState) -> NodeLoad {
        let metric = cluster.metrics.get(&node.name).cloned();
        let sums = metric
            .as_deref()
            .map(|m| usage::pod_sums(la, node, m))
            .unwrap_or_default();
        NodeLoad {
            update_ms: metric.as_ref().and_then(|m| m.update_ms),
            plain: metric
                .as_deref()
                .map(|m| usage::plain(m, &sums))
                .unwrap_or_default(),
            metric,
            sums,
            alloc: usage::allocatable(node).into_owned(),
            over: Overrides::of(node).map(Box::new),
        }
    }
}

impl LoadAware {
    pub fn new(args: args::Args) -> Result<LoadAware, crate::api::field::FieldError> {
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
        let resources: Vec<String> = set.into_iter().collect();
        Ok(LoadAware {
            ids: resources.iter().map(|r| res::intern(r)).collect(),
            weights: limits(&e.weights),
            thresholds: limits(&e.thresholds),
            prod_thresholds: limits(&e.prod_thresholds),
            aggregated_thresholds: e.aggregated.usage_thresholds.as_ref().map(limits),
            factors: usage::factors(&e.factors),
            args: e,
            resources,
            owner: memo::owner_id(),
        })
    }

    /// A pod's estimate, computed once per pod.
    pub fn incoming<'a>(&self, pod: &'a PodInfo) -> Memoized<'a, ResVec> {
        pod.memo
            .get_or_init(self.owner, || usage::estimate_vec(&self.factors, pod))
    }

    /// What this plugin reads of a node, derived once per state of the node.
    fn load<'a>(&self, node: &'a NodeInfo, cluster: &ClusterState) -> Memoized<'a, NodeLoad> {
        node.memo
            .get_or_init(self.owner, || NodeLoad::of(self, node, cluster))
    }

    /// Thresholds for this pod on this node: the node's
    /// `scheduling.koordinator.sh/usage-thresholds` parts replace the args'.
    fn path<'a>(&'a self, pod: &PodInfo, load: &'a NodeLoad) -> Path<'a> {
        let over = load.over.as_deref();
        let prod = over
            .and_then(|o| o.prod.as_ref())
            .unwrap_or(&self.prod_thresholds);
        if !prod.is_empty() && pod.class == PriorityClass::Prod {
            return Path::Prod(prod);
        }
        if let Some((t, agg)) = over.and_then(|o| o.aggregated.as_ref()) {
            return Path::Aggregated(t, agg);
        }
        if let Some(t) = self
            .aggregated_thresholds
            .as_ref()
            .filter(|t| !t.is_empty())
        {
            return Path::Aggregated(t, &self.args.aggregated);
        }
        Path::Normal(
            over.and_then(|o| o.normal.as_ref())
                .unwrap_or(&self.thresholds),
        )
    }

    fn expired(&self, load: &NodeLoad, now_ms: i64) -> bool {
        load.update_ms
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
    /// Usage falls (a NodeMetric, a pod gone), a node is added or changed (allocatable,
    /// threshold annotations, labels).
    fn events(&self) -> crate::scheduler::framework::events::Events {
        use crate::scheduler::framework::events::Events;
        Events::NODE
            .or(Events::NODE_METRIC)
            .or(Events::POD_ASSIGNED_DELETE)
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
        let load = self.load(node, cluster);
        let path = self.path(pod, &load);
        let thresholds: &Limits = match &path {
            Path::Normal(t) | Path::Prod(t) | Path::Aggregated(t, _) => t,
        };
        if thresholds.iter().all(|(_, v)| *v == 0) {
            return Status::success();
        }
        let Some(metric) = load.metric.as_deref() else {
            return Status::success();
        };
        if self.args.filter_expired && self.expired(&load, cluster.now_ms) {
            return if self.args.schedule_when_expired {
                Status::success()
            } else {
                Status::unschedulable("node(s) nodeMetric expired")
            };
        }
        let (base, aggregated) = match &path {
            Path::Normal(_) => (Base::Usage, false),
            Path::Prod(_) => (Base::Prod, false),
            Path::Aggregated(_, a) => (
                Base::Aggregated(
                    a.usage_aggregation_type.as_deref().unwrap_or("avg"),
                    seconds(a.usage_aggregated_duration.as_deref()),
                ),
                true,
            ),
        };
        let used = usage::node_estimated(self, pod, &load, metric, base);
        let alloc = &load.alloc;
        for &(id, t) in thresholds {
            let total = alloc.get(id);
            if t == 0 || total == 0 {
                continue;
            }
            let est = used.get(id);
            let pct = (est as f64 / total as f64 * 100.0).round() as i64;
            if pct > t {
                return Status::unschedulable(reason(&res::name(id), aggregated));
            }
        }
        Status::success()
    }
    /// Koordinator's Reserve puts the pod into its assigned-pod cache; here the scheduler's
    /// assume does exactly that (the pod is counted on the node, stamped with the time).
    fn reserve(&self, _: &mut CycleState, _: &PodInfo, _: &str, _: &ClusterState) -> Status {
        Status::success()
    }
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<i64, Status> {
        let weight_sum: i64 = self.args.weights.values().sum::<i64>() + self.args.dominant_weight;
        if weight_sum == 0 {
            return Ok(0);
        }
        let load = self.load(node, cluster);
        let Some(metric) = load.metric.as_deref() else {
            return Ok(0);
        };
        if self.expired(&load, cluster.now_ms) {
            return Ok(0);
        }
        let agg = &self.args.aggregated;
        let base = if self.args.score_by_prod && pod.class == PriorityClass::Prod {
            Base::Prod
        } else if let Some(kind) = agg
            .score_aggregation_type
            .as_deref()
            .filter(|t| !t.is_empty())
        {
            Base::Aggregated(kind, seconds(agg.score_aggregated_duration.as_deref()))
        } else {
            Base::Usage
        };
        let used = usage::node_estimated(self, pod, &load, metric, base);
        Ok(score_of(
            &self.ids,
            &self.weights,
            self.args.dominant_weight,
            |r| used.get(r),
            &load.alloc,
        ))
    }
}

/// Σ leastUsed·w + dominant·min(leastUsed) over Σ w + dominant, integer division.
pub fn score_of(
    resources: &[ResId],
    weights: &[(ResId, i64)],
    dominant: i64,
    used: impl Fn(ResId) -> i64,
    alloc: &ResVec,
) -> i64 {
    let least = |r: ResId| {
        let a = alloc.get(r);
        let u = used(r);
        if a == 0 || u > a {
            0
        } else {
            (a - u) * 100 / a
        }
    };
    let (mut sum, mut wsum) = (0i64, 0i64);
    for &(r, w) in weights {
        sum += least(r) * w;
        wsum += w;
    }
    if dominant > 0 {
        let min = resources.iter().map(|r| least(*r)).min().unwrap_or(0);
        sum += dominant * min;
        wsum += dominant;
    }
    if wsum == 0 { 0 } else { sum / wsum }
}

#[cfg(test)]
mod tests;
