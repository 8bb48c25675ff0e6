//! NodeAffinity: `nodeSelector` and required node affinity filter (terms ORed,
//! expressions ANDed, matchFields on metadata.name); preferred terms score the sum of
//! matching weights, normalized to 0..100. `NodeAffinityArgs.addedAffinity` applies a
//! scheduler-enforced node affinity to every pod of the profile on top of its own.

use super::super::framework::{
    ClusterState, CycleState, NodeInfo, Plugin, PodInfo, Point, PreFilterResult, Status,
};
use super::taint::default_normalize;
use crate::api::field::FieldError;
pub use crate::api::placement::term_matches;
use crate::scheduler::framework::events::{ClusterEvent, Events};

/// nodeSelector and required affinity of `pod` hold on `node`.
pub fn required_matches(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.spec()
        .is_none_or(|spec| crate::api::placement::node_matches(spec, &node.labels, &node.name))
}

/// `NodeAffinityArgs`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    pub added_affinity: Option<k8s_openapi::api::core::v1::NodeAffinity>,
}

#[derive(Default)]
pub struct NodeAffinity {
    /// `addedAffinity`'s required terms (every pod must also match them).
    added_required: Option<k8s_openapi::api::core::v1::NodeSelector>,
    /// `addedAffinity`'s preferred terms (added to every pod's).
    added_preferred: Vec<k8s_openapi::api::core::v1::PreferredSchedulingTerm>,
}

const ERR_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";

impl NodeAffinity {
    pub fn new(args: Args) -> Result<NodeAffinity, FieldError> {
        let added = args.added_affinity.unwrap_or_default();
        if let Some(r) = &added.required_during_scheduling_ignored_during_execution
            && r.node_selector_terms.is_empty()
        {
            return Err(FieldError::required(
                "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                "must have at least one node selector term",
            ));
        }
        Ok(NodeAffinity {
            added_required: added.required_during_scheduling_ignored_during_execution,
            added_preferred: added
                .preferred_during_scheduling_ignored_during_execution
                .unwrap_or_default(),
        })
    }

    fn added_matches(&self, node: &NodeInfo) -> bool {
        self.added_required.as_ref().is_none_or(|r| {
            r.node_selector_terms
                .iter()
                .any(|t| term_matches(t, &node.labels, &node.name))
        })
    }
}

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
    fn events(&self) -> Events {
        Events::NODE_ADD.or(Events::NODE_LABEL)
    }
    /// Only when the added or relabelled node matches the pod's required affinity.
    fn hint(&self, pod: &PodInfo, ev: &ClusterEvent, cluster: &ClusterState) -> bool {
        match ev.node_in(cluster) {
            Some(node) => self.added_matches(node) && required_matches(pod, node),
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
        if selector.is_none_or(|s| s.is_empty())
            && required.is_none()
            && self.added_required.is_none()
        {
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
        if preferred(pod).is_none() && self.added_preferred.is_empty() {
            Status::skip()
        } else {
            Status::success()
        }
    }
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        if !self.added_matches(node) {
            return Status::unresolvable(ERR_ENFORCED);
        }
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
    ) -> Result<i64, Status> {
        Ok(preferred(pod)
            .into_iter()
            .flatten()
            .chain(&self.added_preferred)
            .filter(|p| p.weight != 0 && term_matches(&p.preference, &node.labels, &node.name))
            .map(|p| p.weight as i64)
            .sum())
    }
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        default_normalize(scores, false);
    }
}
