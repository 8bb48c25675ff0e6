//! The Reservation plugin's extension points for owner pods and reserve pods.
//!
//! Owner pods: PreFilter finds, per node, the Available reservations that serve the pod;
//! their unused capacity is "restored" for the pod (NodeResourcesFit reads
//! [`Restored`] from the cycle state), Filter applies the allocate policy, Score prefers
//! nodes with a nominated reservation (weight 5000 in Koordinator's profile), Reserve picks
//! the reservation and PreBind writes `scheduling.koordinator.sh/reservation-allocated`.
//! Reserve pods (a pending Reservation being scheduled) are held to their pinned node.

use std::collections::HashMap;
use std::sync::Arc;

use super::candidates::candidates;
pub use super::candidates::{INDEX_QUERY, restored_on};
use super::fit::{as_on, available_vec, by_node_reasons, reservation_score, short_on_node};
use super::pre_allocation::{self, PreAllocation};
use crate::api::extension::keys::ANNOTATION_RESERVATION_ALLOCATED;
use crate::scheduler::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodDraft, PodInfo, Point,
    PreFilterResult, Status,
};
use crate::scheduler::model::reservation::{
    ANNOTATION_RESERVATION_NODE, AllocatePolicy, IgnoredResources, ReservationInfo, affinity,
    ignores_reservations, matches,
};
use crate::scheduler::model::reservation_index::{IndexArgs, SelectorIndex};

use super::state::PreState;
pub use super::state::{NAME, RESTORED, Restored};
const CHOSEN: &str = "Reservation/chosen";
const CHOSEN_PODS: &str = "Reservation/preAllocated";

pub const ERR_AFFINITY: &str = "node(s) no reservations match reservation affinity";
pub const ERR_NODE_NOT_MATCH: &str = "node(s) didn't match the nodeName specified by reservation";
pub const ERR_NO_RESERVATION_FITS: &str = "node(s) no reservation(s) to meet the requirements";
pub const ERR_POLICY_CONFLICT: &str = "node(s) reservation allocate policy conflict";
/// The Score of the node holding the lowest `reservation-order` (before normalizing).
const MOST_PREFERRED_SCORE: i64 = 1000;
const PREFERRED: &str = "Reservation/preferred";

/// A pending Reservation's reserve pod: its pinned node, if any, its policy, and the
/// running pods it may take over.
struct ReservePod {
    node: Option<String>,
    policy: AllocatePolicy,
    name: String,
    pre: Option<PreAllocation>,
}

#[derive(Debug, Clone)]
struct Chosen {
    name: String,
    uid: String,
}

#[derive(Default)]
pub struct ReservationPlugin {
    pub ignored: Arc<IgnoredResources>,
    pub pre_allocation: Arc<pre_allocation::Config>,
    /// `enablePreemption`: PostFilter preempts lower-priority pods (never one labelled
    /// `scheduling.koordinator.sh/disable-preemptible: "true"`) for pods and reservations.
    pub preemption: bool,
    /// `reservationSelectorIndex`.
    pub selector_index: IndexArgs,
}

/// The running pods a pre-allocating reservation takes over (Reserve's choice).
struct PreAllocated(Vec<Arc<PodInfo>>);

impl ReservationPlugin {
    /// The running pods a pre-allocating reserve pod takes over on `node` (none for a
    /// reservation that does not pre-allocate), or why it cannot be placed there.
    fn pre_allocated_on(
        &self,
        rp: &ReservePod,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<Vec<Arc<PodInfo>>, Status> {
        let (Some(pre), Some(r)) = (&rp.pre, cluster.reservations.get(&rp.name)) else {
            return Ok(Vec::new());
        };
        pre_allocation::select(pre, pod, r, node, &self.ignored)
    }

    fn pre_allocation_score(
        &self,
        rp: &ReservePod,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> i64 {
        let (Some(pre), Some(r)) = (&rp.pre, cluster.reservations.get(&rp.name)) else {
            return 0;
        };
        self.pre_allocated_on(rp, pod, node, cluster)
            .map_or(0, |taken| pre_allocation::score(&taken, r, pre.multiple))
    }

    /// The reservation a pod would use on `node` (Koordinator's `NominateReservation`):
    /// among the matched ones that can hold it, the lowest non-zero order label, else the
    /// best score.
    fn nominate<'a>(
        &self,
        st: &PreState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &'a ClusterState,
    ) -> Option<&'a ReservationInfo> {
        let infos = matched_infos(st, node, cluster);
        let matched = infos.len();
        let fits: Vec<&ReservationInfo> = infos
            .into_iter()
            .filter(|r| {
                let (by_node, by_res) = check(r, pod, node, matched, st);
                by_node.is_empty() && by_res.is_empty()
            })
            .collect();
        let ordered = fits.iter().filter(|r| r.order > 0).min_by_key(|r| r.order);
        ordered.copied().or_else(|| {
            fits.iter()
                .copied()
                .max_by_key(|r| (reservation_score(r, pod), std::cmp::Reverse(r.name.clone())))
        })
    }
}

fn matched_infos<'a>(
    st: &PreState,
    node: &NodeInfo,
    cluster: &'a ClusterState,
) -> Vec<&'a ReservationInfo> {
    st.matched
        .get(&node.name)
        .into_iter()
        .flatten()
        .filter_map(|n| cluster.reservations.get(n))
        .collect()
}

/// `fitsNodeAndReservation`: the resources the node lacks even with this reservation's
/// available capacity (and the pod slots of the `matched` reservations) given back, and —
/// Restricted — why the reservation itself cannot hold the pod.
fn check(
    r: &ReservationInfo,
    pod: &PodInfo,
    node: &NodeInfo,
    matched: usize,
    st: &PreState,
) -> (Vec<String>, Vec<String>) {
    let by_node = short_on_node(pod, node, Some(&available_vec(r)), matched as i64, &st.skip);
    let by_res = if r.policy == AllocatePolicy::Restricted {
        let detailed = st.named.as_deref() == Some(r.name.as_str());
        r.insufficient(&pod.requests, detailed, &st.skip)
    } else {
        Vec::new()
    };
    (by_node, by_res)
}

impl Plugin for ReservationPlugin {
    fn name(&self) -> &'static str {
        NAME
    }
    fn setup(&self, cluster: &mut ClusterState) {
        if let Some(index) = SelectorIndex::new(&self.selector_index) {
            cluster.index_reservations(index);
        }
    }
    /// A node added or grown, a Reservation changed, a pod gone from a node.
    fn events(&self) -> crate::scheduler::framework::events::Events {
        use crate::scheduler::framework::events::Events as E;
        E::NODE_ADD
            .or(E::NODE_ALLOCATABLE)
            .or(E::RESERVATION)
            .or(E::POD_ASSIGNED_DELETE)
    }

    fn points(&self) -> &'static [Point] {
        &[
            Point::PreFilter,
            Point::Filter,
            Point::PostFilter,
            Point::PreScore,
            Point::Score,
            Point::Reserve,
            Point::PreBind,
        ]
    }

    /// Koordinator's reservation preemption (`PreemptionMgr`, with `enablePreemption`):
    /// kube-scheduler's default preemption, for a pending Reservation too, sparing pods
    /// that disable it.
    fn post_filter(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        rejected: &crate::scheduler::framework::runtime::Verdicts,
        fits: &crate::scheduler::framework::Fits<'_>,
        _: &crate::scheduler::framework::FitsPod<'_>,
    ) -> (Status, Option<crate::scheduler::framework::Nomination>) {
        if !self.preemption {
            return (Status::unschedulable(""), None);
        }
        super::preempt::post_filter(pod, cluster, rejected, fits)
    }

    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> (Status, PreFilterResult) {
        if pod.reserve_of.is_some() || is_reserve_pod(pod) {
            let node = pod
                .pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_RESERVATION_NODE))
                .cloned();
            let r = pod
                .reserve_of
                .as_ref()
                .and_then(|n| cluster.reservations.get(n));
            let pre = match r.map(|r| PreAllocation::of(r, &self.pre_allocation, cluster)) {
                Some(Err(s)) => return (s, None),
                Some(Ok(p)) => p,
                None => None,
            };
            let allowed = pre
                .as_ref()
                .filter(|p| p.required)
                .map(|p| p.candidates.keys().cloned().collect());
            if let Some(p) = &pre {
                state.write(RESTORED, Restored::Taken(p.restored()));
            }
            let rp = ReservePod {
                node,
                policy: r.map(|r| r.policy).unwrap_or_default(),
                name: r.map(|r| r.name.clone()).unwrap_or_default(),
                pre,
            };
            // Filter says "didn't match the nodeName specified by reservation" elsewhere.
            state.write(NAME, rp);
            return (Status::success(), allowed);
        }
        let aff = match affinity(&pod.pod) {
            Ok(a) => a,
            Err(e) => return (Status::unresolvable(e.to_string()), None),
        };
        if cluster.reservations.is_empty() && aff.is_none() {
            return (Status::skip(), None);
        }
        let ignored = ignores_reservations(&pod.pod);
        let mut matched: HashMap<String, Vec<String>> = HashMap::new();
        for r in candidates(cluster, aff.as_ref(), state).filter(|r| r.is_available()) {
            // A pod asking none of what a reservation reserves is not placed into it,
            // unless its reservation affinity asks for one.
            let ok = if ignored {
                true
            } else {
                matches(r, &pod.pod, aff.as_ref(), &pod.requests)
                    && (aff.is_some() || r.shares_resource_with(&pod.requests))
            };
            let Some(node) = r.node.clone().filter(|_| ok) else {
                continue;
            };
            matched.entry(node).or_default().push(r.name.clone());
        }
        let required = aff.is_some();
        if required && matched.is_empty() {
            return (Status::unresolvable(ERR_AFFINITY), None);
        }
        let allowed = required.then(|| matched.keys().cloned().collect());
        if matched.is_empty() {
            return (Status::skip(), None);
        }
        state.write(RESTORED, Restored::Matched);
        state.write(
            NAME,
            PreState {
                matched,
                required,
                ignored,
                named: aff
                    .as_ref()
                    .and_then(|a| a.name.clone())
                    .filter(|n| !n.is_empty()),
                skip: self.ignored.clone(),
            },
        );
        (Status::success(), allowed)
    }

    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        if let Some(rp) = state.read::<ReservePod>(NAME) {
            if rp.node.as_ref().is_some_and(|n| *n != node.name) {
                return Status::unresolvable(ERR_NODE_NOT_MATCH);
            }
            // A Default-policy reservation does not share a node with Aligned/Restricted ones.
            let default = rp.policy == AllocatePolicy::Default;
            let conflict = node
                .pods
                .iter()
                .filter_map(|p| cluster.reservations.get(p.reserve_of.as_ref()?))
                .any(|r| (r.policy == AllocatePolicy::Default) != default);
            if conflict {
                return Status::unresolvable(ERR_POLICY_CONFLICT);
            }
            return match self.pre_allocated_on(rp, pod, node, cluster) {
                Err(s) => s,
                Ok(_) => Status::success(),
            };
        }
        let Some(st) = state.read::<PreState>(NAME) else {
            return Status::success();
        };
        if st.ignored || !st.matched.contains_key(&node.name) {
            return Status::success();
        }
        filter_with_reservations(st, pod, node, cluster)
    }

    /// The node holding the matched reservation with the lowest non-zero order among the
    /// feasible ones scores most (Koordinator's cross-node `reservation-order` preference).
    fn pre_score(
        &self,
        state: &mut CycleState,
        _: &PodInfo,
        feasible: &[usize],
        cluster: &ClusterState,
    ) -> Status {
        let Some(st) = state.read::<PreState>(NAME) else {
            return Status::skip();
        };
        if st.ignored {
            return Status::skip();
        }
        let mut best: Option<(i64, String)> = None;
        for &i in feasible {
            let node = &cluster.nodes[i];
            let order = matched_infos(st, node, cluster)
                .iter()
                .map(|r| r.order)
                .filter(|o| *o != 0)
                .min();
            if let Some(o) = order
                && best.as_ref().is_none_or(|(b, _)| o < *b)
            {
                best = Some((o, node.name.clone()));
            }
        }
        if let Some((_, node)) = best {
            state.write(PREFERRED, node);
        }
        Status::success()
    }

    fn score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<i64, Status> {
        if let Some(rp) = state.read::<ReservePod>(NAME) {
            return Ok(self.pre_allocation_score(rp, pod, node, cluster));
        }
        let Some(st) = state.read::<PreState>(NAME) else {
            return Ok(0);
        };
        if st.ignored {
            return Ok(0);
        }
        if state.read::<String>(PREFERRED) == Some(&node.name) {
            return Ok(MOST_PREFERRED_SCORE);
        }
        Ok(self
            .nominate(st, pod, node, cluster)
            .map(|r| reservation_score(r, pod))
            .unwrap_or(0))
    }

    /// No reservation matched (PreFilter skipped), or the pod ignores reservations: every
    /// node scores 0.
    fn scores_nothing(&self, state: &CycleState, _: &PodInfo) -> bool {
        if let Some(rp) = state.read::<ReservePod>(NAME) {
            return rp.pre.is_none();
        }
        state.read::<PreState>(NAME).is_none_or(|st| st.ignored)
    }

    /// Koordinator's NormalizeScore: the best node gets 100 (a reserve pod's scores stay).
    fn normalize(&self, state: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        if state.read::<ReservePod>(NAME).is_some() {
            return;
        }
        let max = scores.iter().copied().max().unwrap_or(0);
        if max > 0 {
            for s in scores.iter_mut() {
                *s = *s * MAX_NODE_SCORE / max;
            }
        }
    }

    fn reserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
        cluster: &ClusterState,
    ) -> Status {
        if let Some(rp) = state.read::<ReservePod>(NAME) {
            let Some(n) = cluster.node(node) else {
                return Status::success();
            };
            return match self.pre_allocated_on(rp, pod, n, cluster) {
                Err(s) => s,
                Ok(taken) if taken.is_empty() && rp.pre.as_ref().is_some_and(|p| p.required) => {
                    Status::unschedulable(pre_allocation::ERR_NO_PODS_MEET)
                }
                Ok(taken) => {
                    state.write(CHOSEN_PODS, PreAllocated(taken));
                    Status::success()
                }
            };
        }
        let Some(st) = state.read::<PreState>(NAME) else {
            return Status::success();
        };
        if st.ignored {
            return Status::success();
        }
        let Some(n) = cluster.node(node) else {
            return Status::success();
        };
        let chosen = self.nominate(st, pod, n, cluster).map(|r| Chosen {
            name: r.name.clone(),
            uid: r.uid.clone(),
        });
        match chosen {
            Some(c) => {
                state.write(CHOSEN, c);
                Status::success()
            }
            None if st.required => Status::unschedulable(ERR_NO_RESERVATION_FITS),
            None => Status::success(),
        }
    }

    fn report(&self, state: &CycleState) -> Option<(&'static str, serde_json::Value)> {
        let taken = pre_allocated(state);
        if !taken.is_empty() {
            let keys: Vec<&str> = taken.iter().map(|p| p.key.as_str()).collect();
            return Some(("preAllocated", keys.into()));
        }
        chosen(state).map(|n| ("reservation", n.into()))
    }

    fn unreserve(&self, state: &mut CycleState, _: &PodInfo, _: &str) {
        state.remove(CHOSEN);
        state.remove(CHOSEN_PODS);
    }

    fn pre_bind(
        &self,
        state: &CycleState,
        _: &PodInfo,
        _: &str,
        modified: &mut PodDraft,
    ) -> Status {
        let Some(c) = state.read::<Chosen>(CHOSEN) else {
            return Status::success();
        };
        modified.annotations_mut().insert(
            ANNOTATION_RESERVATION_ALLOCATED.to_string(),
            crate::scheduler::model::reservation::allocated_value(&c.name, &c.uid),
        );
        Status::success()
    }
}

/// `filterWithReservations`: the pod fits on the node with one of the matched
/// reservations; otherwise Koordinator's reasons — what the node lacks ("… by node") and
/// what the reservations lack ("Reservation(s) …"), or, for a pod that need not use a
/// reservation, whether the node alone holds it.
fn filter_with_reservations(
    st: &PreState,
    pod: &PodInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Status {
    let infos = matched_infos(st, node, cluster);
    let matched = infos.len();
    let mut short = std::collections::BTreeSet::new();
    let mut by_reservation = Vec::new();
    for r in infos {
        let r = as_on(r, node);
        let (by_node, by_res) = check(&r, pod, node, matched, st);
        if by_node.is_empty() && by_res.is_empty() {
            return Status::success();
        }
        short.extend(by_node);
        by_reservation.extend(by_res);
    }
    let mut reasons = by_node_reasons(&short);
    if st.required {
        reasons.extend(by_reservation);
        if reasons.is_empty() {
            reasons.push(ERR_NO_RESERVATION_FITS.to_string());
        }
    } else if short.is_empty() {
        let alone: std::collections::BTreeSet<String> =
            short_on_node(pod, node, None, matched as i64, &st.skip)
                .into_iter()
                .collect();
        reasons = by_node_reasons(&alone);
    }
    if reasons.is_empty() {
        Status::success()
    } else {
        Status {
            code: crate::scheduler::framework::Code::Unschedulable,
            reasons: reasons.into_iter().map(Into::into).collect(),
        }
    }
}

fn is_reserve_pod(pod: &PodInfo) -> bool {
    pod.pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::api::extension::keys::ANNOTATION_RESERVE_POD))
        .is_some_and(|v| v == "true")
}

/// The reservations on `node` this pod may be placed into (DeviceShare allocates from
/// their devices first).
pub fn matched_on(state: &CycleState, node: &str) -> Vec<String> {
    state
        .read::<PreState>(NAME)
        .filter(|p| !p.ignored)
        .and_then(|p| p.matched.get(node).cloned())
        .unwrap_or_default()
}

/// The running pods a pre-allocating reservation took over in this cycle.
pub fn pre_allocated(state: &CycleState) -> Vec<Arc<PodInfo>> {
    state
        .read::<PreAllocated>(CHOSEN_PODS)
        .map(|p| p.0.clone())
        .unwrap_or_default()
}

/// The name of the reservation `state` put the pod into, if any.
pub fn chosen(state: &CycleState) -> Option<String> {
    state.read::<Chosen>(CHOSEN).map(|c| c.name.clone())
}

#[cfg(test)]
#[path = "plugin_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "koord_cases_tests.rs"]
mod koord_cases;
