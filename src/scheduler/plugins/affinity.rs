//! NodeAffinity: `nodeSelector` and required node affinity filter (terms ORed,
//! expressions ANDed, matchFields on metadata.name); preferred terms score the sum of
//! matching weights, normalized to 0..100.

use super::super::framework::{
    ClusterState, CycleState, NodeInfo, Plugin, PodInfo, Point, PreFilterResult, Status,
};
use super::taint::default_normalize;
pub use crate::api::placement::term_matches;

/// nodeSelector and required affinity of `pod` hold on `node`.
pub fn required_matches(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.spec()
        .is_none_or(|spec| crate::api::placement::node_matches(spec, &node.labels, &node.name))
}

pub struct NodeAffinity;

fn node_affinity(pod: &PodInfo) -> Option<&k8s_openapi::api::core::v1::NodeAffinity> {
    pod.spec()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
}

fn preferred(pod: &PodInfo) -> Option<&Vec<k8s_openapi::api::core::v1::PreferredSchedulingTerm>> {
    node_affinity(pod).and_then(|na| {
        na.preferred_during_scheduling_ignored_during_execution
            .as_ref()
    })
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        "NodeAffinity"
    }
    fn points(&self) -> &'static [Point] {
        &[
            Point::PreFilter,
            Point::Filter,
            Point::PreScore,
            Point::Score,
        ]
    }
    /// kube-scheduler's Skip: without a nodeSelector or required node affinity, Filter has
    /// nothing to do with the pod.
    fn pre_filter(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &ClusterState,
    ) -> (Status, PreFilterResult) {
        let spec = pod.spec();
        let selector = spec.and_then(|s| s.node_selector.as_ref());
        let required = node_affinity(pod).and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
        if selector.is_none_or(|s| s.is_empty()) && required.is_none() {
            return (Status::skip(), None);
        }
        (Status::success(), None)
    }
    /// kube-scheduler's Skip: without preferred terms every node scores 0.
    fn pre_score(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &[usize],
        _: &ClusterState,
    ) -> Status {
        match preferred(pod) {
            None => Status::skip(),
            Some(_) => Status::success(),
        }
    }
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        if required_matches(pod, node) {
            Status::success()
        } else {
            Status::unresolvable("node(s) didn't match Pod's node affinity/selector")
        }
    }
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, String> {
        Ok(preferred(pod)
            .into_iter()
            .flatten()
            .filter(|p| p.weight != 0 && term_matches(&p.preference, &node.labels, &node.name))
            .map(|p| p.weight as i64)
            .sum())
    }
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        default_normalize(scores, false);
    }
}
