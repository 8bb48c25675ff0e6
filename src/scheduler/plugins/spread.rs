//! PodTopologySpread, as kube-scheduler's: `DoNotSchedule` constraints filter on skew,
//! `ScheduleAnyway` ones score (fewer matching pods in the node's domain is better). A pod
//! without constraints of its own gets the defaults — kube-scheduler's system defaults
//! (hostname, max skew 3; zone, max skew 5; both ScheduleAnyway) or the args'
//! `defaultConstraints` with `defaultingType: List` — selecting the pods its Services and
//! controller select (`model/owners.rs`). Counting: only nodes passing the pod's node
//! affinity count, only pods in the pod's namespace matching the selector, `minDomains`.

use crate::api::field::FieldError;
use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::Deserialize;

use super::super::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Point, Status,
};
use super::affinity::required_matches;
use crate::api::selector::label_selector_matches;

const KEY: &str = "PodTopologySpread";
const SCORE_KEY: &str = "PodTopologySpread/score";
const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

/// `PodTopologySpreadArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// `System` (the default) or `List`.
    pub defaulting_type: Option<String>,
}

pub struct PodTopologySpread {
    /// The constraints a pod without its own gets (selectors filled per pod).
    defaults: Vec<TopologySpreadConstraint>,
    system_defaulted: bool,
}

fn system_defaults() -> Vec<TopologySpreadConstraint> {
    let c = |key: &str, skew| TopologySpreadConstraint {
        topology_key: key.into(),
        when_unsatisfiable: "ScheduleAnyway".into(),
        max_skew: skew,
        ..Default::default()
    };
    vec![c(HOSTNAME, 3), c(ZONE, 5)]
}

impl PodTopologySpread {
    /// kube-scheduler's `ValidatePodTopologySpreadArgs`, then the defaults it implies.
    pub fn new(args: Args) -> Result<PodTopologySpread, FieldError> {
        let list = match args.defaulting_type.as_deref().unwrap_or("System") {
            "System" if !args.default_constraints.is_empty() => {
                return Err(FieldError::invalid(
                    "defaultingType",
                    "\"System\": when .defaultConstraints are not empty",
                ));
            }
            "System" => false,
            "List" => true,
            other => {
                return Err(FieldError::unsupported(
                    "defaultingType",
                    format!("{other:?}: supported values: \"System\", \"List\""),
                ));
            }
        };
        let mut seen = HashSet::new();
        for (i, c) in args.default_constraints.iter().enumerate() {
            let at = format!("defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                return Err(FieldError::invalid(
                    format!("{at}.maxSkew"),
                    format!("{}: must be greater than zero", c.max_skew),
                ));
            }
            if c.topology_key.is_empty() {
                return Err(FieldError::required(
                    format!("{at}.topologyKey"),
                    "can not be empty",
                ));
            }
            if !matches!(
                c.when_unsatisfiable.as_str(),
                "DoNotSchedule" | "ScheduleAnyway"
            ) {
                return Err(FieldError::unsupported(
                    format!("{at}.whenUnsatisfiable"),
                    format!(
                        "{:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
                        c.when_unsatisfiable
                    ),
                ));
            }
            if c.label_selector.is_some() {
                return Err(FieldError::forbidden(
                    format!("{at}.labelSelector"),
                    "constraint must not define a selector, as they deduced for each pod",
                ));
            }
            if !seen.insert((c.topology_key.clone(), c.when_unsatisfiable.clone())) {
                return Err(FieldError::duplicate(
                    at,
                    format!("{:?}", (&c.topology_key, &c.when_unsatisfiable)),
                ));
            }
        }
        Ok(PodTopologySpread {
            defaults: if list {
                args.default_constraints
            } else {
                system_defaults()
            },
            system_defaulted: !list,
        })
    }

    /// The pod's constraints for `mode`, or (the pod has none at all) the defaults with
    /// the pod's default selector; none when nothing selects the pod.
    fn constraints(
        &self,
        pod: &PodInfo,
        mode: &str,
        cluster: &ClusterState,
    ) -> Vec<TopologySpreadConstraint> {
        let own = pod
            .spec()
            .and_then(|s| s.topology_spread_constraints.as_deref())
            .unwrap_or_default();
        if !own.is_empty() {
            return own
                .iter()
                .filter(|c| c.when_unsatisfiable == mode)
                .map(|c| with_match_label_keys(c, pod))
                .collect();
        }
        let wanted: Vec<&TopologySpreadConstraint> = self
            .defaults
            .iter()
            .filter(|c| c.when_unsatisfiable == mode)
            .collect();
        if wanted.is_empty() || cluster.owners.is_empty() {
            return Vec::new();
        }
        let Some(selector) = cluster.owners.default_selector(&pod.pod) else {
            return Vec::new();
        };
        wanted
            .into_iter()
            .map(|c| TopologySpreadConstraint {
                label_selector: Some(selector.clone()),
                ..c.clone()
            })
            .collect()
    }

    fn defaulted(&self, pod: &PodInfo) -> bool {
        self.system_defaulted
            && pod
                .spec()
                .and_then(|s| s.topology_spread_constraints.as_ref())
                .is_none_or(|c| c.is_empty())
    }
}

/// Per constraint: matching pods per domain value, over eligible nodes.
struct Counts {
    constraint: TopologySpreadConstraint,
    per_value: HashMap<String, i64>,
    self_match: i64,
}

impl Counts {
    fn min_match(&self) -> i64 {
        let domains = self.per_value.len() as i32;
        if self.constraint.min_domains.is_some_and(|m| domains < m) {
            return 0;
        }
        self.per_value.values().copied().min().unwrap_or(0)
    }
}

/// Pods on `node` in the pod's namespace that `c` selects (terminating ones not counted).
fn matching(pod: &PodInfo, node: &NodeInfo, c: &TopologySpreadConstraint) -> i64 {
    node.pods
        .iter()
        .filter(|p| p.namespace == pod.namespace && p.key != pod.key)
        .filter(|p| p.pod.metadata.deletion_timestamp.is_none())
        .filter(|p| label_selector_matches(c.label_selector.as_ref(), Some(&p.labels)))
        .count() as i64
}

/// `matchLabelKeys`: the pod's own values of those labels narrow the selector (kube's
/// `mergeLabelSetWithSelector`, as `key In (value)` requirements beside the others); a
/// constraint with no selector selects nothing and stays so.
fn with_match_label_keys(c: &TopologySpreadConstraint, pod: &PodInfo) -> TopologySpreadConstraint {
    let mut c = c.clone();
    let keys = c.match_label_keys.as_deref().unwrap_or_default();
    let Some(selector) = c.label_selector.as_mut() else {
        return c;
    };
    for key in keys {
        if let Some(value) = pod.labels.get(key) {
            selector.match_expressions.get_or_insert_default().push(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: key.clone(),
                    operator: "In".into(),
                    values: Some(vec![value.clone()]),
                },
            );
        }
    }
    c
}

/// The node counts for the pod: `nodeAffinityPolicy: Honor` (the default) — the pod's
/// required node affinity selects it; `nodeTaintsPolicy: Honor` (default Ignore) — the pod
/// tolerates its NoSchedule and NoExecute taints.
fn included(pod: &PodInfo, node: &NodeInfo, c: &TopologySpreadConstraint) -> bool {
    let affinity =
        c.node_affinity_policy.as_deref() == Some("Ignore") || required_matches(pod, node);
    affinity && (c.node_taints_policy.as_deref() != Some("Honor") || tolerated(pod, node))
}

fn tolerated(pod: &PodInfo, node: &NodeInfo) -> bool {
    let tolerations = pod
        .spec()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    node.taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| super::taint::tolerates(tolerations, t))
}

fn counts(
    pod: &PodInfo,
    list: Vec<TopologySpreadConstraint>,
    cluster: &ClusterState,
) -> Vec<Counts> {
    list.into_iter()
        .map(|c| {
            let mut per_value: HashMap<String, i64> = HashMap::new();
            for node in &cluster.nodes {
                let Some(v) = node.labels.get(&c.topology_key) else {
                    continue;
                };
                if included(pod, node, &c) {
                    *per_value.entry(v.clone()).or_insert(0) += matching(pod, node, &c);
                }
            }
            let self_match =
                label_selector_matches(c.label_selector.as_ref(), Some(&pod.labels)) as i64;
            Counts {
                constraint: c,
                per_value,
                self_match,
            }
        })
        .collect()
}

/// PreScore's state: kube-scheduler's `preScoreState`.
struct Scoring {
    constraints: Vec<TopologySpreadConstraint>,
    /// Feasible nodes missing a constraint's key (only when every key is required).
    ignored: HashSet<String>,
    /// Per constraint (not hostname): matching pods per domain among the feasible nodes'.
    per_value: Vec<HashMap<String, i64>>,
    /// Per constraint: ln(domains among the feasible nodes + 2).
    weight: Vec<f64>,
}

fn has_keys(node: &NodeInfo, cs: &[TopologySpreadConstraint]) -> bool {
    cs.iter().all(|c| node.labels.contains_key(&c.topology_key))
}

fn scoring(
    pod: &PodInfo,
    constraints: Vec<TopologySpreadConstraint>,
    require_all: bool,
    feasible: &[usize],
    cluster: &ClusterState,
) -> Scoring {
    let mut s = Scoring {
        ignored: HashSet::new(),
        per_value: vec![HashMap::new(); constraints.len()],
        weight: vec![0.0; constraints.len()],
        constraints,
    };
    let mut scored = 0usize;
    for &i in feasible {
        let node = &cluster.nodes[i];
        if require_all && !has_keys(node, &s.constraints) {
            s.ignored.insert(node.name.clone());
            continue;
        }
        scored += 1;
        for (k, c) in s.constraints.iter().enumerate() {
            if c.topology_key != HOSTNAME {
                let v = node
                    .labels
                    .get(&c.topology_key)
                    .cloned()
                    .unwrap_or_default();
                s.per_value[k].entry(v).or_insert(0);
            }
        }
    }
    for (k, c) in s.constraints.iter().enumerate() {
        let size = if c.topology_key == HOSTNAME {
            scored
        } else {
            s.per_value[k].len()
        };
        s.weight[k] = ((size + 2) as f64).ln();
    }
    for node in &cluster.nodes {
        if require_all && !has_keys(node, &s.constraints) {
            continue;
        }
        for (k, c) in s.constraints.iter().enumerate() {
            if c.topology_key == HOSTNAME || !included(pod, node, c) {
                continue;
            }
            let v = node
                .labels
                .get(&c.topology_key)
                .cloned()
                .unwrap_or_default();
            if let Some(n) = s.per_value[k].get_mut(&v) {
                *n += matching(pod, node, c);
            }
        }
    }
    s
}

/// A node PreScore ignored scores this, and 0 after normalizing.
const IGNORED: i64 = -1;

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        KEY
    }
    /// kube's: assigned pods added, relabelled or deleted; nodes added, relabelled,
    /// retainted or deleted; the Services and controllers defaults select by.
    fn events(&self) -> crate::scheduler::framework::events::Events {
        use crate::scheduler::framework::events::Events as E;
        E::POD_ASSIGNED
            .or(E::NODE_ADD)
            .or(E::NODE_LABEL)
            .or(E::NODE_TAINT)
            .or(E::NODE_DELETE)
            .or(E::OWNER)
    }
    fn points(&self) -> &'static [Point] {
        &[
            Point::PreFilter,
            Point::Filter,
            Point::PreScore,
            Point::Score,
        ]
    }
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> (Status, Option<HashSet<String>>) {
        let hard = self.constraints(pod, "DoNotSchedule", cluster);
        if hard.is_empty() {
            return (Status::skip(), None);
        }
        state.write(KEY, counts(pod, hard, cluster));
        (Status::success(), None)
    }
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let Some(all) = state.read::<Vec<Counts>>(KEY) else {
            return Status::success();
        };
        for c in all {
            let Some(v) = node.labels.get(&c.constraint.topology_key) else {
                return Status::unresolvable(
                    "node(s) didn't match pod topology spread constraints (missing required label)",
                );
            };
            let here = c.per_value.get(v).copied().unwrap_or(0);
            if here + c.self_match - c.min_match() > c.constraint.max_skew as i64 {
                return Status::unschedulable(
                    "node(s) didn't match pod topology spread constraints",
                );
            }
        }
        Status::success()
    }
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        feasible: &[usize],
        cluster: &ClusterState,
    ) -> Status {
        let soft = self.constraints(pod, "ScheduleAnyway", cluster);
        if soft.is_empty() {
            return Status::skip();
        }
        let require_all = !self.defaulted(pod);
        state.write(
            SCORE_KEY,
            scoring(pod, soft, require_all, feasible, cluster),
        );
        Status::success()
    }
    fn score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, Status> {
        let Some(s) = state.read::<Scoring>(SCORE_KEY) else {
            return Ok(0);
        };
        if s.ignored.contains(&node.name) {
            return Ok(IGNORED);
        }
        let mut score = 0f64;
        for (k, c) in s.constraints.iter().enumerate() {
            let Some(v) = node.labels.get(&c.topology_key) else {
                continue;
            };
            let count = if c.topology_key == HOSTNAME {
                matching(pod, node, c)
            } else {
                s.per_value[k].get(v).copied().unwrap_or(0)
            };
            score += count as f64 * s.weight[k] + (c.max_skew as f64 - 1.0);
        }
        Ok(score.round() as i64)
    }
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        let counted = || scores.iter().copied().filter(|s| *s != IGNORED);
        let (min, max) = (counted().min().unwrap_or(0), counted().max().unwrap_or(0));
        for s in scores.iter_mut() {
            *s = if *s == IGNORED {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *s) / max
            };
        }
    }
}
