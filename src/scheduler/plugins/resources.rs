//! NodeResourcesFit (filter + LeastAllocated/MostAllocated score) and
//! NodeResourcesBalancedAllocation, with kube-scheduler's integer arithmetic. Extended
//! resources such as `kubernetes.io/batch-cpu` are ordinary scalar resources here.

use crate::api::field::FieldError;
use serde::Deserialize;

use super::super::framework::res::{
    self, R_CPU, R_EPHEMERAL_STORAGE, R_MEMORY, R_PODS, ResId, ResVec,
};
use super::super::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Point, Reasons, Status,
};
use crate::api::extension::resources::{CPU, MEMORY};
use crate::scheduler::framework::events::{ClusterEvent, Events};

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceSpec {
    pub name: String,
    #[serde(default = "one")]
    pub weight: i64,
}

fn one() -> i64 {
    1
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScoringStrategy {
    #[serde(rename = "type", default = "least")]
    pub kind: String,
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    pub requested_to_capacity_ratio: Option<RatioParam>,
}

/// `RequestedToCapacityRatioParam`: the score (0–10) at each utilization (0–100 %).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RatioParam {
    #[serde(default)]
    pub shape: Vec<ShapePoint>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShapePoint {
    pub utilization: i64,
    pub score: i64,
}

/// How NodeResourcesFit scores a node.
enum Scoring {
    Least,
    Most,
    /// (utilization %, score 0–100) points of the broken linear function.
    Ratio(Vec<(i64, i64)>),
}

/// kube's `MaxCustomPriorityScore`: shape scores are 0–10, scaled to node scores.
const MAX_CUSTOM_SCORE: i64 = 10;

/// kube's `validateFunctionShape` (field names and wording as kube's).
fn ratio_shape(param: Option<RatioParam>) -> Result<Vec<(i64, i64)>, FieldError> {
    let at = "scoringStrategy.requestedToCapacityRatio.shape";
    let shape = param.map(|p| p.shape).unwrap_or_default();
    if shape.is_empty() {
        return Err(FieldError::new(
            at,
            "Required value: at least one point must be specified",
        ));
    }
    for (i, p) in shape.iter().enumerate() {
        if i > 0 && shape[i - 1].utilization >= p.utilization {
            return Err(FieldError::new(
                format!("{at}[{i}].utilization"),
                format!(
                    "Invalid value: {}: utilization values must be sorted in increasing order",
                    p.utilization
                ),
            ));
        }
        if !(0..=100).contains(&p.utilization) {
            return Err(FieldError::new(
                format!("{at}[{i}].utilization"),
                format!(
                    "Invalid value: {}: not in valid range [0, 100]",
                    p.utilization
                ),
            ));
        }
        if !(0..=MAX_CUSTOM_SCORE).contains(&p.score) {
            return Err(FieldError::new(
                format!("{at}[{i}].score"),
                format!(
                    "Invalid value: {}: not in valid range [0, {MAX_CUSTOM_SCORE}]",
                    p.score
                ),
            ));
        }
    }
    let scale = MAX_NODE_SCORE / MAX_CUSTOM_SCORE;
    Ok(shape
        .iter()
        .map(|p| (p.utilization, p.score * scale))
        .collect())
}

/// kube's `BuildBrokenLinearFunction`: the shape's score at utilization `u`, linear
/// between points, flat before the first and after the last.
fn broken_linear(shape: &[(i64, i64)], u: i64) -> i64 {
    for (i, &(at, score)) in shape.iter().enumerate() {
        if u <= at {
            if i == 0 {
                return score;
            }
            let (from, from_score) = shape[i - 1];
            return from_score + (score - from_score) * (u - from) / (at - from);
        }
    }
    shape.last().map_or(0, |p| p.1)
}

/// [`broken_linear`] for kube's own table (shape scores unscaled).
#[cfg(test)]
pub fn broken_linear_points(shape: &[(i64, i64)], u: i64) -> i64 {
    broken_linear(shape, u)
}

/// kube's RequestedToCapacityRatio score of one resource: full utilization when the node
/// has none of it or the pod would overfill it.
fn ratio_score(shape: &[(i64, i64)], requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return broken_linear(shape, 100);
    }
    broken_linear(shape, requested * 100 / capacity)
}

fn least() -> String {
    "LeastAllocated".into()
}

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FitArgs {
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    pub scoring_strategy: Option<ScoringStrategy>,
}

fn default_resources() -> Vec<ResourceSpec> {
    vec![
        ResourceSpec {
            name: CPU.into(),
            weight: 1,
        },
        ResourceSpec {
            name: MEMORY.into(),
            weight: 1,
        },
    ]
}

pub struct NodeResourcesFit {
    ignored: Vec<String>,
    ignored_groups: Vec<String>,
    scoring: Scoring,
    /// (resource, weight) of the scoring strategy.
    resources: Vec<(ResId, i64)>,
}

impl NodeResourcesFit {
    pub fn new(args: FitArgs) -> Result<NodeResourcesFit, FieldError> {
        let strategy = args.scoring_strategy.unwrap_or(ScoringStrategy {
            kind: least(),
            resources: Vec::new(),
            requested_to_capacity_ratio: None,
        });
        let scoring = match strategy.kind.as_str() {
            "LeastAllocated" => Scoring::Least,
            "MostAllocated" => Scoring::Most,
            "RequestedToCapacityRatio" => {
                Scoring::Ratio(ratio_shape(strategy.requested_to_capacity_ratio)?)
            }
            other => {
                return Err(FieldError::new(
                    "scoringStrategy.type",
                    format!(
                        "Unsupported value: {other:?}: supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""
                    ),
                ));
            }
        };
        let resources = if strategy.resources.is_empty() {
            default_resources()
        } else {
            strategy.resources
        };
        if let Some(r) = resources.iter().find(|r| !(1..=100).contains(&r.weight)) {
            return Err(FieldError::new(
                format!("scoringStrategy.resources[{}].weight", r.name),
                format!("{} must be in 1..100", r.weight),
            ));
        }
        Ok(NodeResourcesFit {
            ignored: args.ignored_resources,
            ignored_groups: args.ignored_resource_groups,
            scoring,
            resources: resources
                .iter()
                .map(|r| (res::intern(&r.name), r.weight))
                .collect(),
        })
    }

    fn is_ignored(&self, name: &str) -> bool {
        self.ignored.iter().any(|r| r == name)
            || name
                .split_once('/')
                .is_some_and(|(group, _)| self.ignored_groups.iter().any(|g| g == group))
    }

    /// The reasons `pod` does not fit on `node` (empty = fits), sorted by resource name.
    pub fn insufficient(&self, pod: &PodInfo, node: &NodeInfo) -> Reasons {
        self.insufficient_with(pod, node, None).0
    }

    /// As [`insufficient`], with `restored` (resources and pod slots of reservations that
    /// serve this pod on this node) counted as free; and whether a request exceeds the
    /// node's allocatable itself (kube's `Unresolvable`: no eviction makes room).
    pub fn insufficient_with(
        &self,
        pod: &PodInfo,
        node: &NodeInfo,
        restored: Option<&(ResVec, i64)>,
    ) -> (Reasons, bool) {
        let mut out = Reasons::new();
        let mut unresolvable = false;
        let (credit, slots) = restored.map(|(r, n)| (Some(r), *n)).unwrap_or((None, 0));
        if node.pods.len() as i64 - slots + 1 > node.allowed_pods() {
            out.push("Too many pods".into());
        }
        let ignoring = !self.ignored.is_empty() || !self.ignored_groups.is_empty();
        let first = out.len();
        for (id, want) in pod.req.iter() {
            if want <= 0 || id == R_PODS {
                continue;
            }
            let scalar = ![R_CPU, R_MEMORY, R_EPHEMERAL_STORAGE].contains(&id);
            if scalar && ignoring && self.is_ignored(&res::name(id)) {
                continue;
            }
            let free = node.alloc.get(id) - node.req.get(id) + credit.map_or(0, |c| c.get(id));
            if want > free {
                unresolvable |= want > node.alloc.get(id);
                // A pod that fits nowhere is told so by every node of the cluster: the
                // common reasons are built without looking the name up.
                out.push(match id {
                    R_CPU => "Insufficient cpu".into(),
                    R_MEMORY => "Insufficient memory".into(),
                    R_EPHEMERAL_STORAGE => "Insufficient ephemeral-storage".into(),
                    _ => format!("Insufficient {}", res::name(id)).into(),
                });
            }
        }
        out[first..].sort();
        (out, unresolvable)
    }
}

/// kube's `mostRequestedScore`: packing, capped at a full node.
pub(super) fn most_allocated(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

/// kube's `leastRequestedScore`: spreading, 0 once over the node.
pub(super) fn least_allocated(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// (allocatable, requested incl. the pod) for scoring, as `calculateResourceAllocatableRequest`:
/// cpu and memory count non-zero requests; (0, 0) skips a scalar the pod does not ask for.
pub(super) fn alloc_request(pod: &PodInfo, node: &NodeInfo, id: ResId) -> (i64, i64) {
    let alloc = node.alloc.get(id);
    match id {
        R_CPU => (alloc, node.non_zero_requested.0 + pod.non_zero.0),
        R_MEMORY => (alloc, node.non_zero_requested.1 + pod.non_zero.1),
        _ => {
            let want = pod.req.get(id);
            if want == 0 {
                return (0, 0);
            }
            (alloc, node.req.get(id) + want)
        }
    }
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        "NodeResourcesFit"
    }
    /// kube-scheduler's: a node added or grown, a pod gone from a node (a reservation's
    /// reserve pod too).
    fn events(&self) -> Events {
        Events::NODE_ADD
            .or(Events::NODE_ALLOCATABLE)
            .or(Events::POD_ASSIGNED_DELETE)
            .or(Events::RESERVATION)
    }
    /// Only when the pod's requests fit the node's allocatable at all (kube-scheduler asks
    /// this of node events; a pod larger than the node cannot fit there whatever leaves).
    fn hint(&self, pod: &PodInfo, ev: &ClusterEvent, cluster: &ClusterState) -> bool {
        match ev.node_in(cluster) {
            Some(node) => pod.req.iter().all(|(id, want)| want <= node.alloc.get(id)),
            None => true,
        }
    }
    fn points(&self) -> &'static [Point] {
        &[
            Point::PreFilter,
            Point::Filter,
            Point::PreScore,
            Point::Score,
        ]
    }
    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        use crate::scheduler::plugins::reservation::plugin::{RESTORED, Restored, restored_on};
        // Most pods match no reservation: one cycle-state lookup, nothing else, per node.
        let restored = state
            .read::<Restored>(RESTORED)
            .and_then(|r| restored_on(r, state, node, cluster));
        let (reasons, unresolvable) = self.insufficient_with(pod, node, restored.as_deref());
        use super::super::framework::Code;
        match (reasons.is_empty(), unresolvable) {
            (true, _) => Status::success(),
            (false, false) => Status {
                code: Code::Unschedulable,
                reasons,
            },
            (false, true) => Status {
                code: Code::UnschedulableAndUnresolvable,
                reasons,
            },
        }
    }
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, Status> {
        let (mut total, mut weights) = (0i64, 0i64);
        for &(id, weight) in &self.resources {
            let (alloc, req) = alloc_request(pod, node, id);
            if alloc == 0 {
                continue;
            }
            let s = match &self.scoring {
                Scoring::Least => least_allocated(req, alloc),
                Scoring::Most => most_allocated(req, alloc),
                Scoring::Ratio(shape) => ratio_score(shape, req, alloc),
            };
            if matches!(self.scoring, Scoring::Ratio(_)) && s == 0 {
                // kube leaves a resource scoring 0 out of the weighted mean here.
                continue;
            }
            total += s * weight;
            weights += weight;
        }
        Ok(match (weights, &self.scoring) {
            (0, _) => 0,
            // math.Round of the mean, as kube's requestedToCapacityRatioScorer.
            (w, Scoring::Ratio(_)) => (total * 2 + w) / (2 * w),
            (w, _) => total / w,
        })
    }
}

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BalancedArgs {
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

pub struct BalancedAllocation {
    resources: Vec<ResId>,
}

impl BalancedAllocation {
    pub fn new(args: BalancedArgs) -> BalancedAllocation {
        let list = if args.resources.is_empty() {
            default_resources()
        } else {
            args.resources
        };
        BalancedAllocation {
            resources: list.iter().map(|r| res::intern(&r.name)).collect(),
        }
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        "NodeResourcesBalancedAllocation"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PreScore, Point::Score]
    }
    fn pre_score(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &[usize],
        _: &ClusterState,
    ) -> Status {
        let requests_any = self.resources.iter().any(|r| pod.req.get(*r) > 0);
        if requests_any {
            Status::success()
        } else {
            Status::skip()
        }
    }
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, Status> {
        let fractions = self.resources.iter().filter_map(|&r| {
            let alloc = node.alloc.get(r);
            let want = pod.req.get(r);
            let scalar = r != R_CPU && r != R_MEMORY;
            if alloc == 0 || (scalar && want == 0) {
                return None;
            }
            let req = node.req.get(r) + want;
            Some((req as f64 / alloc as f64).min(1.0))
        });
        // Runs for every feasible node of every pod: the fractions are walked twice rather
        // than collected (an allocation per node was a third of the cycle's mallocs).
        let (n, sum) = fractions
            .clone()
            .fold((0usize, 0.0), |(n, s), f| (n + 1, s + f));
        let std = match n {
            0 | 1 => 0.0,
            2 => {
                let mut two = fractions;
                let (a, b) = (two.next().unwrap_or(0.0), two.next().unwrap_or(0.0));
                (a - b).abs() / 2.0
            }
            n => {
                let mean = sum / n as f64;
                (fractions.map(|f| (f - mean).powi(2)).sum::<f64>() / n as f64).sqrt()
            }
        };
        Ok(((1.0 - std) * MAX_NODE_SCORE as f64) as i64)
    }
}
