//! NodeAffinity: `nodeSelector` and required node affinity filter (terms ORed,
//! expressions ANDed, matchFields on metadata.name); preferred terms score the sum of
//! matching weights, normalized to 0..100.

use super::super::framework::{ClusterState, CycleState, NodeInfo, Plugin, PodInfo, Point, Status};
use super::taint::default_normalize;
pub use crate::api::placement::term_matches;

/// nodeSelector and required affinity of `pod` hold on `node`.
pub fn required_matches(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.spec()
        .is_none_or(|spec| crate::api::placement::node_matches(spec, &node.labels, &node.name))
}

pub struct NodeAffinity;

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
        let preferred = pod
            .spec()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        Ok(preferred
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
