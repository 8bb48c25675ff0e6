//! TaintToleration: NoSchedule/NoExecute taints must be tolerated; untolerated
//! PreferNoSchedule taints lower the score (normalized, reversed).

use k8s_openapi::api::core::v1::Toleration;

use super::super::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Point, Status,
};
use crate::scheduler::framework::events::{ClusterEvent, Events};

pub use crate::api::placement::{tolerates, toleration_matches};

pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        "TaintToleration"
    }
    fn events(&self) -> Events {
        Events::NODE_ADD.or(Events::NODE_TAINT)
    }
    /// Only when the pod tolerates the node's taints now.
    fn hint(&self, pod: &PodInfo, ev: &ClusterEvent, cluster: &ClusterState) -> bool {
        match ev.node_in(cluster) {
            Some(node) => self
                .filter(&CycleState::default(), pod, node, cluster)
                .is_success(),
            None => true,
        }
    }
    fn points(&self) -> &'static [Point] {
        &[Point::Filter, Point::PreScore, Point::Score]
    }
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let tolerations = pod
            .spec()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or(&[]);
        let bad = node
            .taints
            .iter()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .find(|t| !tolerates(tolerations, t));
        match bad {
            None => Status::success(),
            Some(t) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.as_deref().unwrap_or("")
            )),
        }
    }
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, Status> {
        let tolerations: Vec<&Toleration> = pod
            .spec()
            .and_then(|s| s.tolerations.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| {
                t.effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == "PreferNoSchedule")
            })
            .collect();
        let count = node
            .taints
            .iter()
            .filter(|t| t.effect == "PreferNoSchedule")
            .filter(|t| !tolerations.iter().any(|tol| toleration_matches(tol, t)))
            .count();
        Ok(count as i64)
    }
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        default_normalize(scores, true);
    }
}

/// Upstream `DefaultNormalizeScore`: scale to 0..100 by the maximum, optionally reversed.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let v = MAX_NODE_SCORE * *s / max;
        *s = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}
