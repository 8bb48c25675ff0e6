//! Which reservations a pod is matched against at PreFilter, as Koordinator narrows them:
//! the one its reservation affinity names, the `reservationSelectorIndex` candidates for
//! its selector, or all of them (every candidate is still matched in full); and what the
//! matched ones give back to it on a node.

use super::fit::held_on;
use std::borrow::Cow;

use super::state::{NAME, PreState, Restored};
use crate::scheduler::framework::res::ResVec;
use crate::scheduler::framework::{ClusterState, CycleState, NodeInfo};
use crate::scheduler::model::reservation::{ReservationAffinity, ReservationInfo};

/// The cycle-state key of this cycle's reservationSelector index query: `Some(nodes)` on a
/// hit, `None` on a miss (read by the live scheduler for its series).
pub const INDEX_QUERY: &str = "Reservation/selectorIndex";

/// The reservations a pod may be matched to: the one it names, the index's candidates for
/// its selector, or all (Koordinator's name / index / list-all paths; the same matches).
pub(super) fn candidates<'a>(
    cluster: &'a ClusterState,
    aff: Option<&ReservationAffinity>,
    state: &mut CycleState,
) -> Box<dyn Iterator<Item = &'a ReservationInfo> + 'a> {
    let all = || Box::new(cluster.reservations.values()) as Box<dyn Iterator<Item = _>>;
    let Some(aff) = aff else {
        return all();
    };
    if let Some(name) = aff.name.as_deref().filter(|n| !n.is_empty()) {
        return Box::new(cluster.reservations.get(name).into_iter());
    }
    let (Some(ix), Some(sel)) = (&cluster.reservation_index, &aff.reservation_selector) else {
        return all();
    };
    match ix.candidates(sel) {
        None => {
            state.write(INDEX_QUERY, None::<usize>);
            all()
        }
        Some(c) => {
            state.write(INDEX_QUERY, Some(c.nodes()));
            let names: Vec<&String> = c.names().collect();
            Box::new(
                names
                    .into_iter()
                    .filter_map(|n| cluster.reservations.get(n)),
            )
        }
    }
}

/// What the pod's reservations on `node` give back to it for NodeResourcesFit: each
/// matched reservation's holding (its counted reserve pod) less what it keeps back, and a
/// pod slot each; for a pre-allocating reserve pod, what the pods it would take over hold.
/// Read from the node, so a preemption trial that evicts an owner sees its share return to
/// the reservation — for that reservation's owners only (Koordinator's `preemptibleInRRs`).
pub fn restored_on<'a>(
    restored: &'a Restored,
    state: &CycleState,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Option<Cow<'a, (ResVec, i64)>> {
    match restored {
        Restored::Taken(by_node) => by_node.get(&node.name).map(Cow::Borrowed),
        Restored::Matched => {
            let names = state.read::<PreState>(NAME)?.matched.get(&node.name)?;
            Some(Cow::Owned(held_on(node, names, cluster)))
        }
    }
}

#[cfg(test)]
#[path = "candidates_tests.rs"]
mod tests;
