//! PodTopologySpread: `DoNotSchedule` constraints filter on skew, `ScheduleAnyway` ones
//! score (fewer matching pods in the node's domain is better), with kube-scheduler's
//! counting: only nodes passing the pod's node affinity count, only pods in the pod's
//! namespace matching the constraint's selector count, `minDomains` honoured.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use super::super::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Point, Status,
};
use super::affinity::required_matches;
use crate::api::selector::label_selector_matches;

const KEY: &str = "PodTopologySpread";

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

fn constraints(pod: &PodInfo, mode: &str) -> Vec<TopologySpreadConstraint> {
    pod.spec()
        .and_then(|s| s.topology_spread_constraints.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.when_unsatisfiable == mode)
        .cloned()
        .collect()
}

fn counts(
    pod: &PodInfo,
    list: Vec<TopologySpreadConstraint>,
    cluster: &ClusterState,
) -> Vec<Counts> {
    list.into_iter()
        .map(|c| {
            let mut per_value: HashMap<String, i64> = HashMap::new();
            let honor_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
            for node in &cluster.nodes {
                let Some(v) = node.labels.get(&c.topology_key) else {
                    continue;
                };
                if honor_affinity && !required_matches(pod, node) {
                    continue;
                }
                let n = node
                    .pods
                    .iter()
                    .filter(|p| p.namespace == pod.namespace && p.key != pod.key)
                    .filter(|p| label_selector_matches(c.label_selector.as_ref(), Some(&p.labels)))
                    .count() as i64;
                *per_value.entry(v.clone()).or_insert(0) += n;
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

pub struct PodTopologySpread;

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        KEY
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
        let hard = constraints(pod, "DoNotSchedule");
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
        _: &[usize],
        cluster: &ClusterState,
    ) -> Status {
        let soft = constraints(pod, "ScheduleAnyway");
        if soft.is_empty() {
            return Status::skip();
        }
        state.write("PodTopologySpread/score", counts(pod, soft, cluster));
        Status::success()
    }
    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, String> {
        let Some(all) = state.read::<Vec<Counts>>("PodTopologySpread/score") else {
            return Ok(0);
        };
        let mut score = 0f64;
        for c in all {
            let Some(v) = node.labels.get(&c.constraint.topology_key) else {
                continue;
            };
            // Upstream weighs each constraint by log(domains + 2).
            let weight = ((c.per_value.len() + 2) as f64).ln();
            score += c.per_value.get(v).copied().unwrap_or(0) as f64 * weight
                + (c.constraint.max_skew as f64 - 1.0);
        }
        Ok(score.round() as i64)
    }
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        let (min, max) = (
            scores.iter().copied().min().unwrap_or(0),
            scores.iter().copied().max().unwrap_or(0),
        );
        for s in scores.iter_mut() {
            *s = if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *s) / max
            };
        }
    }
}
