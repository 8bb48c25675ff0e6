//! Reservation pre-allocation (Koordinator v1.8, `spec.preAllocation`): a Restricted
//! Reservation may be placed on a node that lacks the free capacity by taking over running
//! pods — its owners (mode `Default`) or pods labelled `pod.koordinator.sh/is-pre-allocatable`
//! (mode `Cluster`, ordered by `pod.koordinator.sh/pre-allocatable-priority`, highest first).
//! Those pods are written as allocated to the reservation (`reservation-allocated`) when it is
//! bound, so the reservation holds what they use now and keeps it when they finish. One pod
//! is taken (the one filling the reservation most), or with `preAllocationPolicy.enableMultiple`
//! as many as it takes in order. `scheduling.koordinator.sh/pre-allocation-required: "true"`
//! on the reservation refuses a placement without them.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;

use super::fit::{by_node_reasons, reservation_score, short_on_node};
use crate::api::extension::keys::ANNOTATION_RESERVATION_ALLOCATED;
use crate::scheduler::framework::res::ResVec;
use crate::scheduler::framework::{ClusterState, Code, MAX_NODE_SCORE, NodeInfo, PodInfo, Status};
use crate::scheduler::model::reservation::{AllocatePolicy, IgnoredResources, ReservationInfo};

pub const ERR_REQUIRED: &str = "node(s) no pod match reservation with pre allocation required";
pub const ERR_UNSUPPORTED: &str =
    "node(s) reservation pre allocation is unsupported with current attributes";
pub const ERR_NO_PODS_MEET: &str = "node(s) no pod(s) to meet the pre-allocation requirements";
pub const ERR_CLUSTER_MODE_DISABLED: &str =
    "reservation requires cluster mode pre-allocation which is disabled";
/// On the Reservation: it must take over running pods.
pub const LABEL_REQUIRED: &str = "scheduling.koordinator.sh/pre-allocation-required";
pub const LABEL_PRE_ALLOCATABLE: &str = "pod.koordinator.sh/is-pre-allocatable";
pub const ANNOTATION_PRIORITY: &str = "pod.koordinator.sh/pre-allocatable-priority";

/// `ReservationArgs.preAllocationConfig`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    #[serde(default)]
    pub enable_cluster_mode: bool,
    #[serde(default)]
    pub cluster_label_key: String,
    #[serde(default)]
    pub cluster_priority_annotation_key: String,
    /// Place without taking pods when the node has room (unless required).
    #[serde(default)]
    pub prefer_no_pre_allocated_pods: bool,
}

impl Config {
    fn label_key(&self) -> &str {
        match self.cluster_label_key.as_str() {
            "" => LABEL_PRE_ALLOCATABLE,
            k => k,
        }
    }
    fn priority_key(&self) -> &str {
        match self.cluster_priority_annotation_key.as_str() {
            "" => ANNOTATION_PRIORITY,
            k => k,
        }
    }
}

/// A pre-allocating reserve pod's cycle: the candidates on each node, in the order they
/// are tried.
pub struct PreAllocation {
    pub required: bool,
    pub multiple: bool,
    pub prefer_none: bool,
    pub candidates: HashMap<String, Vec<Arc<PodInfo>>>,
}

impl PreAllocation {
    /// For the reserve pod of `r`, or why it cannot be scheduled; `None` when `r` does
    /// not pre-allocate.
    pub fn of(
        r: &ReservationInfo,
        cfg: &Config,
        cluster: &ClusterState,
    ) -> Result<Option<PreAllocation>, Status> {
        let spec = &r.object.spec;
        if !spec.pre_allocation.unwrap_or(false) {
            return Ok(None);
        }
        // Koordinator: pre-allocation is only available on a Restricted Reservation.
        if r.policy != AllocatePolicy::Restricted {
            return Err(Status::unresolvable(ERR_UNSUPPORTED));
        }
        let policy = spec.pre_allocation_policy.as_ref();
        let cluster_mode = policy.and_then(|p| p.mode.as_deref()) == Some("Cluster");
        if cluster_mode && !cfg.enable_cluster_mode {
            return Err(Status::unresolvable(ERR_CLUSTER_MODE_DISABLED));
        }
        let candidates = if cluster_mode {
            cluster_candidates(cfg, cluster)
        } else {
            owner_candidates(r, cluster)
        };
        let required = r.labels.get(LABEL_REQUIRED).is_some_and(|v| v == "true");
        if required && candidates.is_empty() {
            return Err(Status::unresolvable(ERR_REQUIRED));
        }
        let multiple = policy.and_then(|p| p.enable_multiple).unwrap_or(false);
        let mut pre = PreAllocation {
            required,
            multiple,
            prefer_none: cfg.prefer_no_pre_allocated_pods,
            candidates,
        };
        if multiple && !cluster_mode {
            // Default mode tries the pods that fill the reservation most first.
            for pods in pre.candidates.values_mut() {
                pods.sort_by_key(|p| std::cmp::Reverse(reservation_score(r, p)));
            }
        }
        Ok(Some(pre))
    }

    /// What NodeResourcesFit may count as free on each node: every candidate's requests
    /// (Reservation's Filter then checks the pods actually taken).
    pub fn restored(&self) -> HashMap<String, (ResVec, i64)> {
        self.candidates
            .iter()
            .map(|(node, pods)| {
                let mut v = ResVec::default();
                for p in pods {
                    v.add(&p.req);
                }
                (node.clone(), (v, pods.len() as i64))
            })
            .collect()
    }
}

/// Placed pods not yet allocated to a reservation and not reserve pods.
fn takeable(p: &PodInfo) -> bool {
    p.reserve_of.is_none()
        && !p
            .pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANNOTATION_RESERVATION_ALLOCATED))
}

/// Mode `Default`: the reservation's owners matched by label selector (Koordinator lists
/// pods by the owners' selectors only).
fn owner_candidates(
    r: &ReservationInfo,
    cluster: &ClusterState,
) -> HashMap<String, Vec<Arc<PodInfo>>> {
    let selects = r.owners.iter().any(|o| o.label_selector.is_some());
    let mut out: HashMap<String, Vec<Arc<PodInfo>>> = HashMap::new();
    if !selects {
        return out;
    }
    for node in &cluster.nodes {
        let pods: Vec<Arc<PodInfo>> = node
            .pods
            .iter()
            .filter(|p| takeable(p) && r.owner_selected(&p.pod))
            .cloned()
            .collect();
        if !pods.is_empty() {
            out.insert(node.name.clone(), pods);
        }
    }
    out
}

/// Mode `Cluster`: pods carrying the label "true", highest priority annotation first, then
/// by UID.
fn cluster_candidates(cfg: &Config, cluster: &ClusterState) -> HashMap<String, Vec<Arc<PodInfo>>> {
    let (label, priority) = (cfg.label_key(), cfg.priority_key());
    let mut out: HashMap<String, Vec<Arc<PodInfo>>> = HashMap::new();
    for node in &cluster.nodes {
        let mut pods: Vec<Arc<PodInfo>> = node
            .pods
            .iter()
            .filter(|p| takeable(p) && p.labels.get(label).is_some_and(|v| v == "true"))
            .cloned()
            .collect();
        let prio = |p: &PodInfo| -> i64 {
            p.pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(priority))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        pods.sort_by(|a, b| prio(b).cmp(&prio(a)).then_with(|| a.uid.cmp(&b.uid)));
        if !pods.is_empty() {
            out.insert(node.name.clone(), pods);
        }
    }
    out
}

/// The reservation's reserve pod on one node.
struct Trial<'a> {
    reserve: &'a PodInfo,
    r: &'a ReservationInfo,
    node: &'a NodeInfo,
    skip: &'a IgnoredResources,
}

impl Trial<'_> {
    /// Why the reservation cannot take `taken` (requests summed, pod count): what the node
    /// lacks with them given back, and what the reservation itself cannot hold.
    fn check(
        &self,
        taken: (&ResVec, &crate::api::pod::Amounts, usize),
    ) -> (Vec<String>, Vec<String>) {
        let (vec, amounts, count) = taken;
        let by_node = short_on_node(self.reserve, self.node, Some(vec), count as i64, self.skip);
        let by_res = self.r.insufficient(amounts, false, self.skip);
        (by_node, by_res)
    }
}

/// The pods the reservation takes over on `node` (empty: none, the node has room), or why
/// it cannot be placed there (Koordinator's `filterWithPreAllocatablePod(s)` and the
/// nomination that follows).
pub fn select(
    pre: &PreAllocation,
    reserve: &PodInfo,
    r: &ReservationInfo,
    node: &NodeInfo,
    skip: &IgnoredResources,
) -> Result<Vec<Arc<PodInfo>>, Status> {
    let alone = || short_on_node(reserve, node, None, 0, skip);
    if !pre.required && pre.prefer_none && alone().is_empty() {
        return Ok(Vec::new());
    }
    let pods = pre
        .candidates
        .get(&node.name)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut short = std::collections::BTreeSet::new();
    let mut by_reservation = Vec::new();
    let trial = Trial {
        reserve,
        r,
        node,
        skip,
    };
    let chosen = if pre.multiple {
        accumulate(&trial, pods, (&mut short, &mut by_reservation))
    } else {
        best_single(&trial, pods, (&mut short, &mut by_reservation))
    };
    if let Some(chosen) = chosen {
        return Ok(chosen);
    }
    let mut reasons = by_node_reasons(&short);
    if pre.required {
        reasons.extend(by_reservation);
        if reasons.is_empty() {
            reasons.push(ERR_NO_PODS_MEET.to_string());
        }
    } else if short.is_empty() {
        reasons = by_node_reasons(&alone().into_iter().collect());
    }
    if reasons.is_empty() {
        return Ok(Vec::new());
    }
    Err(Status {
        code: Code::Unschedulable,
        reasons: reasons.into_iter().map(Into::into).collect(),
    })
}

type Reasons<'a> = (
    &'a mut std::collections::BTreeSet<String>,
    &'a mut Vec<String>,
);

fn shares(r: &ReservationInfo, p: &PodInfo) -> bool {
    r.shares_resource_with(&p.requests)
}

/// One pod: of those the reservation can take alone, the one it fills most.
fn best_single(
    t: &Trial,
    pods: &[Arc<PodInfo>],
    (short, by_reservation): Reasons,
) -> Option<Vec<Arc<PodInfo>>> {
    let mut best: Option<(i64, &Arc<PodInfo>)> = None;
    for p in pods.iter().filter(|p| shares(t.r, p)) {
        let (by_node, by_res) = t.check((&p.req, &p.requests, 1));
        if by_node.is_empty() && by_res.is_empty() {
            let score = reservation_score(t.r, p);
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, p));
            }
            continue;
        }
        short.extend(by_node);
        by_reservation.extend(by_res);
    }
    best.map(|(_, p)| vec![p.clone()])
}

/// Several pods, in order: each added while the reservation can hold them all, until the
/// node has room for the reservation.
fn accumulate(
    t: &Trial,
    pods: &[Arc<PodInfo>],
    (short, by_reservation): Reasons,
) -> Option<Vec<Arc<PodInfo>>> {
    let mut taken: Vec<Arc<PodInfo>> = Vec::new();
    let (mut vec, mut amounts) = (ResVec::default(), crate::api::pod::Amounts::new());
    let mut last_short = Vec::new();
    for p in pods.iter().filter(|p| shares(t.r, p)) {
        let mut trial_vec = vec.clone();
        trial_vec.add(&p.req);
        let mut trial = amounts.clone();
        for (k, v) in &p.requests {
            *trial.entry(k.clone()).or_default() += v;
        }
        let (by_node, by_res) = t.check((&trial_vec, &trial, taken.len() + 1));
        if !by_res.is_empty() {
            by_reservation.extend(by_res);
            continue;
        }
        taken.push(p.clone());
        (vec, amounts) = (trial_vec, trial);
        if by_node.is_empty() {
            return Some(taken);
        }
        last_short = by_node;
    }
    short.extend(last_short);
    None
}

/// Score of `node` for the reserve pod (Koordinator's `scoreForPreAllocation`): one pod —
/// how fully it fills the reservation; several — fewer pods taken scores higher.
pub fn score(taken: &[Arc<PodInfo>], r: &ReservationInfo, multiple: bool) -> i64 {
    if multiple {
        return MAX_NODE_SCORE / (1 + taken.len() as i64);
    }
    taken.first().map(|p| reservation_score(r, p)).unwrap_or(0)
}
