//! The fit arithmetic the Reservation plugin shares between owner pods and pre-allocating
//! reserve pods: what a node lacks with capacity given back, and how fully a pod fills a
//! reservation.

use std::collections::BTreeMap;

use crate::scheduler::framework::res::{R_PODS, ResVec};
use crate::scheduler::framework::{ClusterState, MAX_NODE_SCORE, NodeInfo, PodInfo};
use crate::scheduler::model::reservation::{IgnoredResources, ReservationInfo};

pub(super) fn available_vec(r: &ReservationInfo) -> ResVec {
    ResVec::from_amounts(&r.available())
}

/// MostAllocated-style fit of the pod into the reservation (Koordinator's reservation score).
pub(super) fn reservation_score(r: &ReservationInfo, pod: &PodInfo) -> i64 {
    let (mut sum, mut n) = (0i64, 0i64);
    let allocated: BTreeMap<&String, i64> =
        r.allocated
            .values()
            .flatten()
            .fold(BTreeMap::new(), |mut m, (k, v)| {
                *m.entry(k).or_default() += v;
                m
            });
    for (k, alloc) in r.allocatable.iter().filter(|(_, v)| **v > 0) {
        let used =
            pod.requests.get(k).copied().unwrap_or(0) + allocated.get(k).copied().unwrap_or(0);
        if used <= *alloc {
            sum += used * MAX_NODE_SCORE / alloc;
        }
        n += 1;
    }
    if n == 0 { 0 } else { sum / n }
}

/// `fitsNode`: resources (by name) the pod asks more of than the node has free, with
/// `restored` given back and `matched` reserve pods not counted as pods.
pub(super) fn short_on_node(
    pod: &PodInfo,
    node: &NodeInfo,
    restored: Option<&ResVec>,
    matched: i64,
    skip: &IgnoredResources,
) -> Vec<String> {
    let mut out = Vec::new();
    if node.req.get(R_PODS) - matched + 1 > node.alloc.get(R_PODS) {
        out.push("pods".to_string());
    }
    for (id, want) in pod.req.iter() {
        if id == R_PODS || want <= 0 {
            continue;
        }
        let back = restored.map(|r| r.get(id)).unwrap_or(0);
        if want > node.alloc.get(id) - node.req.get(id) + back {
            let name = crate::scheduler::framework::res::name(id);
            // Only extended resources may be ignored (the args refuse native ones).
            if !skip.has(&name) {
                out.push(name);
            }
        }
    }
    out
}

pub(super) fn by_node_reasons(names: &std::collections::BTreeSet<String>) -> Vec<String> {
    names
        .iter()
        .map(|n| format!("Insufficient {n} by node"))
        .collect()
}

/// The reservation as `node` counts it: owners a preemption trial took off the node give
/// their share back to it (Koordinator's `preemptibleInRRs`).
pub(super) fn as_on<'a>(
    r: &'a ReservationInfo,
    node: &NodeInfo,
) -> std::borrow::Cow<'a, ReservationInfo> {
    let on_node = |k: &String| node.pods.iter().any(|p| &p.key == k);
    if r.allocated.keys().all(on_node) {
        return std::borrow::Cow::Borrowed(r);
    }
    let mut r = r.clone();
    r.allocated.retain(|k, _| on_node(k));
    std::borrow::Cow::Owned(r)
}

/// The holding of the reservations `names` counted on `node` (their reserve pods) less what
/// each keeps back, and a pod slot each.
pub(super) fn held_on(node: &NodeInfo, names: &[String], cluster: &ClusterState) -> (ResVec, i64) {
    let mut credit = (ResVec::default(), 0);
    for p in &node.pods {
        let Some(r) = p.reserve_of.as_ref().filter(|n| names.contains(n)) else {
            continue;
        };
        let mut held = p.req.clone();
        if let Some(info) = cluster.reservations.get(r) {
            held.sub_floored(&ResVec::from_amounts(&info.reserved));
        }
        credit.0.add(&held);
        credit.1 += 1;
    }
    credit
}
