//! DefaultPreemption: when no node fits, find the node where evicting the fewest and
//! least important lower-priority pods lets the pod fit, and nominate it. Never picks a
//! victim of equal or higher priority; a pod with `preemptionPolicy: Never` preempts
//! nothing. PodDisruptionBudgets are not consulted yet.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::framework::runtime::NodeVerdict;
use super::super::framework::{
    ClusterState, Code, CycleState, Fits, NodeInfo, Nomination, Plugin, PodInfo, Point, Status,
};

pub struct DefaultPreemption;

/// Victims on `node` that let `pod` fit: remove every lower-priority pod, then give back
/// the most important ones while the pod still fits.
pub fn select_victims(
    pod: &PodInfo,
    node: &NodeInfo,
    fits: &Fits<'_>,
) -> Option<Vec<Arc<PodInfo>>> {
    let mut lower: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority < pod.priority)
        .cloned()
        .collect();
    if lower.is_empty() {
        return None;
    }
    let mut trial = node.clone();
    for v in &lower {
        trial.remove_pod(&v.key);
    }
    if !fits(&trial) {
        return None;
    }
    // Most important first, then the longest running (kept in preference).
    // Upstream drops a node where the pod fits with no victims (its rejection came from
    // elsewhere, e.g. a quota's PreFilter).
    lower.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.created_ms.cmp(&b.created_ms))
    });
    let mut victims = Vec::new();
    for v in lower {
        trial.add_pod(v.clone());
        if !fits(&trial) {
            trial.remove_pod(&v.key);
            victims.push(v);
        }
    }
    (!victims.is_empty()).then_some(victims)
}

/// kube-scheduler's preference: lowest highest-victim priority, smallest priority sum,
/// fewest victims, then the first node by name.
pub fn better(a: &[Arc<PodInfo>], b: &[Arc<PodInfo>]) -> bool {
    let key = |v: &[Arc<PodInfo>]| {
        let top = v
            .iter()
            .map(|p| p.priority as i64)
            .max()
            .unwrap_or(i64::MIN);
        let sum: i64 = v
            .iter()
            .map(|p| p.priority as i64 + i32::MAX as i64 + 1)
            .sum();
        (top, sum, v.len())
    };
    key(a) < key(b)
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        "DefaultPreemption"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PostFilter]
    }
    fn post_filter(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        rejected: &BTreeMap<String, NodeVerdict>,
        fits: &Fits<'_>,
    ) -> (Status, Option<Nomination>) {
        if pod.spec().and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
            return (
                Status::unresolvable("not eligible due to preemptionPolicy=Never"),
                None,
            );
        }
        let mut best: Option<(String, Vec<Arc<PodInfo>>)> = None;
        for (name, v) in rejected {
            if v.code != Code::Unschedulable {
                continue;
            }
            let Some(node) = cluster.node(name) else {
                continue;
            };
            let Some(victims) = select_victims(pod, node, fits) else {
                continue;
            };
            if best.as_ref().is_none_or(|(_, b)| better(&victims, b)) {
                best = Some((name.clone(), victims));
            }
        }
        match best {
            Some((node, victims)) => (Status::success(), Some(Nomination { node, victims })),
            None => (
                Status::unschedulable("No preemption victims found for incoming pod"),
                None,
            ),
        }
    }
}
