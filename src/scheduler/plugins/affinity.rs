//! NodeAffinity: `nodeSelector` and required node affinity filter (terms ORed,
//! expressions ANDed, matchFields on metadata.name); preferred terms score the sum of
//! matching weights, normalized to 0..100.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

use super::super::framework::{ClusterState, CycleState, NodeInfo, Plugin, PodInfo, Point, Status};
use super::taint::default_normalize;

fn requirement(r: &NodeSelectorRequirement, get: impl Fn(&str) -> Option<String>) -> bool {
    let v = get(&r.key);
    let values = r.values.as_deref().unwrap_or(&[]);
    let num = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(&v)),
        "NotIn" => v.is_none_or(|v| !values.contains(&v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        "Gt" => {
            matches!((v.as_deref().and_then(num), values.first().and_then(|s| num(s))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((v.as_deref().and_then(num), values.first().and_then(|s| num(s))), (Some(a), Some(b)) if a < b)
        }
        _ => false,
    }
}

/// A term matches when all its expressions and fields match; an empty term matches nothing.
pub fn term_matches(
    t: &NodeSelectorTerm,
    labels: &BTreeMap<String, String>,
    node_name: &str,
) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or(&[]);
    let fields = t.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement(r, |k| labels.get(k).cloned()))
        && fields
            .iter()
            .all(|r| requirement(r, |k| (k == "metadata.name").then(|| node_name.to_string())))
}

/// nodeSelector and required affinity of `pod` hold on `node`.
pub fn required_matches(pod: &PodInfo, node: &NodeInfo) -> bool {
    let Some(spec) = pod.spec() else { return true };
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice());
    let affinity_ok = match terms {
        None => true,
        Some(terms) => terms
            .iter()
            .any(|t| term_matches(t, &node.labels, &node.name)),
    };
    selector_ok && affinity_ok
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
