//! One scheduling cycle, the only one: PreEnqueue → PreFilter/Filter/Score → PostFilter →
//! Reserve → assume → Permit, the Reservation and gang branches included. It changes only
//! the `ClusterState` it is given and returns what happened; the live scheduler turns the
//! outcome into API calls, `koord explain schedule` reports it. Two drivers, one decision.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use super::framework::fit_error::fit_error;
use super::framework::gangs;
use super::framework::runtime::{CycleResult, Framework, NodeVerdict, Scope};
use super::framework::{ClusterState, Code, Nomination, PodInfo, Status};
use super::plugins::coscheduling::topology;
use super::reservation_live;
use crate::api::scheduling::reservation::Reservation;

/// Waiting gang members a failure took down with it (their places already released).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GangRejection {
    pub keys: Vec<String>,
    /// Koordinator's "GangGroup … gets rejected …" message, for their PodScheduled condition.
    pub message: String,
}

/// What Permit said for a placed pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Permit {
    /// Bind now; these gang members waiting at Permit go on too.
    Allowed { released: Vec<String> },
    /// Wait (a gang not yet complete) at most this long.
    Wait(Duration),
}

/// How one attempt ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A PreEnqueue plugin keeps the pod out of the active queue.
    Gated {
        plugin: &'static str,
        reason: String,
    },
    /// No node fits: kube-scheduler's FitError message, and PostFilter's nomination.
    /// `rejected`: pods waiting at Permit sent back (the gang's failure, the preempting
    /// job's own members, victims that were waiting), each group with its message.
    Unschedulable {
        message: String,
        nomination: Option<Nomination>,
        rejected: Vec<GangRejection>,
    },
    /// A Reserve or PreBind plugin refused the chosen node; nothing stays assumed.
    Failed {
        node: String,
        plugin: &'static str,
        reason: String,
    },
    /// A pending Reservation's reserve pod placed: the Reservation is counted on `node`
    /// (Available) in the cluster state; `before` is it as it was.
    Reservation {
        name: String,
        node: String,
        before: Arc<Reservation>,
        allocatable: BTreeMap<String, Quantity>,
        annotations: BTreeMap<String, String>,
        /// The running pods it takes over (pre-allocation), as they were; assumed with
        /// `reservation-allocated` naming it.
        pre_allocated: Vec<Arc<PodInfo>>,
    },
    /// Assumed on `node` with what PreBind writes (`modified`, when it changes the pod).
    Placed {
        node: String,
        modified: Option<Box<Pod>>,
        permit: Permit,
    },
    /// A Permit plugin refused: the pod is forgotten and unreserved.
    PermitRejected {
        node: String,
        plugin: &'static str,
        reason: String,
        rejected: GangRejection,
    },
}

/// One attempt: the outcome, the framework's per-node result (not for a gated pod), and
/// what the plugins report about a placement (`cpuset`, `devices`, `reservation`).
pub struct Attempt {
    pub outcome: Outcome,
    pub result: Option<CycleResult>,
    pub details: BTreeMap<&'static str, Value>,
    /// The PostFilter plugins that ran, for their series.
    pub post_filter: Vec<crate::scheduler::framework::runtime::PostFilterRun>,
    /// Inline batch scheduling: the other members of the pod's gang group scheduled in
    /// this same cycle, in order, each with its attempt.
    pub batch: Vec<(Arc<PodInfo>, Attempt)>,
}

impl Attempt {
    fn new(outcome: Outcome, result: Option<CycleResult>) -> Attempt {
        Attempt {
            outcome,
            result,
            details: BTreeMap::new(),
            post_filter: Vec::new(),
            batch: Vec::new(),
        }
    }

    /// The node the pod ends this attempt assumed on (placed or waiting at Permit).
    pub fn node(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Placed { node, .. } | Outcome::Reservation { node, .. } => Some(node),
            _ => None,
        }
    }
}

/// Runs one cycle for `pod` under `fw`, changing `cluster` as the decision requires.
pub fn run(fw: &Framework, pod: &PodInfo, cluster: &mut ClusterState, scope: Scope) -> Attempt {
    if let Err((plugin, s)) = fw.pre_enqueue(pod, cluster) {
        let reason = s.message();
        return Attempt::new(Outcome::Gated { plugin, reason }, None);
    }
    cluster.gangs.attempt(&pod.key);
    // A gang group placed whole in its network topology before its first member's cycle.
    let planned = topology::plan_job(fw, pod, cluster);
    let mut attempt = schedule(fw, pod, cluster, scope, true);
    if let Some(p) = planned {
        attempt.details.insert("networkTopology", p);
    }
    if fw.inline_batch && matches!(attempt.outcome, Outcome::Placed { .. }) {
        attempt.batch = batch(fw, pod, cluster, scope);
        if !attempt.batch.is_empty() {
            let keys: Vec<&str> = attempt.batch.iter().map(|(m, _)| m.key.as_str()).collect();
            attempt
                .details
                .insert("inlineBatch", serde_json::json!(keys));
        }
    }
    attempt
}

/// What a cycle would decide for `pod` on `cluster` as it stands, changing nothing:
/// PreEnqueue, Filter and Score on every node, and for an unschedulable pod PostFilter's
/// preemption (its victims found, nobody nominated) — no Reserve, no assume, no Permit.
/// ScheduleExplanation's answers come from here.
pub fn dry_run(fw: &Framework, pod: &PodInfo, cluster: &ClusterState) -> Attempt {
    if let Err((plugin, s)) = fw.pre_enqueue(pod, cluster) {
        let reason = s.message();
        return Attempt::new(Outcome::Gated { plugin, reason }, None);
    }
    let result = fw.schedule(pod, cluster, Scope::Everything);
    if let Some(node) = result.node.clone() {
        let permit = Permit::Allowed {
            released: Vec::new(),
        };
        let outcome = Outcome::Placed {
            node,
            modified: None,
            permit,
        };
        return Attempt::new(outcome, Some(result));
    }
    let message = fit_error(cluster.nodes.len(), &result);
    let (nomination, post_filter) = if cluster.victims_leaving(pod) {
        (None, Vec::new())
    } else {
        fw.post_filter_runs(&result, pod, cluster)
    };
    let outcome = Outcome::Unschedulable {
        message,
        nomination,
        rejected: Vec::new(),
    };
    let mut attempt = Attempt::new(outcome, Some(result));
    attempt.post_filter = post_filter;
    attempt
}

/// Koordinator's inline batch scheduling (`EnableInlineBatchSchedule`): once the pod whose
/// cycle planned its gang group's network-topology placement is placed, every other pending
/// member of the group is scheduled in the same cycle on its planned node — so the plan is
/// realised against the state it was made in — without preemption (a stale plan fails fast
/// rather than evicting for a job that may not fit). The first member that fails ends the
/// batch; its failure sends the members waiting at Permit back, as any member's does.
fn batch(
    fw: &Framework,
    pod: &PodInfo,
    cluster: &mut ClusterState,
    scope: Scope,
) -> Vec<(Arc<PodInfo>, Attempt)> {
    let g = &cluster.gangs;
    let plan = g.plan_of(&pod.key).filter(|p| p.trigger == pod.key);
    let Some(Ok((planned, _))) = plan.map(|p| &p.result) else {
        return Vec::new();
    };
    let Some(id) = g.gang_id(&pod.key) else {
        return Vec::new();
    };
    let mut members = g.pending_members(id, &cluster.assumed);
    members.retain(|m| planned.contains_key(&m.key));
    topology::by_index(&mut members);
    let mut out = Vec::with_capacity(members.len());
    for m in members {
        cluster.gangs.attempt(&m.key);
        let attempt = schedule(fw, &m, cluster, scope, false);
        let placed = matches!(attempt.outcome, Outcome::Placed { .. });
        out.push((m, attempt));
        if !placed {
            break;
        }
    }
    out
}

fn schedule(
    fw: &Framework,
    pod: &PodInfo,
    cluster: &mut ClusterState,
    scope: Scope,
    may_preempt: bool,
) -> Attempt {
    let mut result = fw.schedule(pod, cluster, scope);
    let Some(node) = result.node.clone() else {
        let message = fit_error(cluster.nodes.len(), &result);
        // While its victims are still leaving the pod waits on its nomination (kube-scheduler:
        // "not eligible due to a terminating pod on the nominated node").
        let waiting = cluster.victims_leaving(pod);
        let (nomination, post_filter) = if waiting || !may_preempt {
            (None, Vec::new())
        } else {
            fw.post_filter_runs(&result, pod, cluster)
        };
        // The nomination stands until the pod is placed (or the next attempt's replaces it).
        let mut rejected = Vec::new();
        match &nomination {
            Some(n) => {
                cluster.nominated.set(Arc::new(pod.clone()), &n.node);
                rejected = nominated(cluster, pod, n);
            }
            None if waiting => {}
            None => cluster.nominated.clear(&pod.key),
        }
        rejected.push(gang_failed(cluster, &pod.key, &message));
        rejected.retain(|r| !r.keys.is_empty());
        let outcome = Outcome::Unschedulable {
            message,
            nomination,
            rejected,
        };
        let mut attempt = Attempt::new(outcome, Some(result));
        attempt.post_filter = post_filter;
        return attempt;
    };
    if let Err((plugin, s)) = fw.reserve(&mut result.state, pod, &node, cluster) {
        return failed(result, node, plugin, s);
    }
    let details = fw.report(&result.state);
    // The pod is assumed with what PreBind will write (NodeNUMAResource's cpuset), so the
    // next cycle sees those CPUs taken before the binding lands.
    let modified = match fw.pre_bind(&result.state, pod, &node) {
        Ok(m) => m,
        Err((plugin, s)) => {
            fw.unreserve(&mut result.state, pod, &node);
            return failed(result, node, plugin, s);
        }
    };
    let outcome = match &pod.reserve_of {
        Some(name) => match assume_reservation(
            cluster,
            (name, pod, &node),
            modified.as_ref(),
            crate::scheduler::plugins::reservation::plugin::pre_allocated(&result.state),
        ) {
            Some(o) => o,
            None => {
                // The Reservation vanished between the queue and this cycle.
                fw.unreserve(&mut result.state, pod, &node);
                let s = Status::unresolvable(format!("reservation {name:?} is gone"));
                return failed(result, node, "Reservation", s);
            }
        },
        None => place(fw, &mut result, pod, node, modified, cluster),
    };
    if !matches!(outcome, Outcome::PermitRejected { .. }) {
        return Attempt {
            outcome,
            result: Some(result),
            details,
            post_filter: Vec::new(),
            batch: Vec::new(),
        };
    }
    result.node = None;
    Attempt::new(outcome, Some(result))
}

/// The chosen node refused at Reserve or PreBind: reported on that node, nothing placed.
fn failed(mut result: CycleResult, node: String, plugin: &'static str, s: Status) -> Attempt {
    let reason = s.message();
    let v = rejected(plugin, s.code, &reason);
    result.verdicts.insert(node.as_str().into(), v);
    result.node = None;
    let outcome = Outcome::Failed {
        node,
        plugin,
        reason,
    };
    Attempt::new(outcome, Some(result))
}

/// Assume, then Permit: a rejection forgets the pod again.
fn place(
    fw: &Framework,
    result: &mut CycleResult,
    pod: &PodInfo,
    node: String,
    modified: Option<Pod>,
    cluster: &mut ClusterState,
) -> Outcome {
    let assumed = match &modified {
        Some(m) => PodInfo::new(Arc::new(m.clone())),
        None => pod.clone(),
    };
    // The PVs and claims VolumeBinding chose are taken before the binding cycle writes them.
    if let Some(v) = super::plugins::volumes::binding::chosen(&result.state) {
        cluster.volumes.assume(&pod.key, v);
    }
    cluster.assume(&assumed, &node);
    if let Some(lock) = super::plugins::deviceshare::node_lock(&result.state) {
        // Held in the cache too, so the next pod for this vendor waits for the watch.
        cluster.annotate_node(&node, lock);
    }
    cluster.gangs.placed(&pod.key);
    match fw.permit(&result.state, pod, &node, cluster) {
        Err((plugin, s)) => {
            cluster.forget(&pod.key);
            fw.unreserve(&mut result.state, pod, &node);
            let reason = s.message();
            let rejected = gang_failed(cluster, &pod.key, &reason);
            let v = self::rejected(plugin, s.code, &reason);
            result.verdicts.insert(node.as_str().into(), v);
            Outcome::PermitRejected {
                node,
                plugin,
                reason,
                rejected,
            }
        }
        Ok(None) => {
            let released = cluster.gangs.release(&pod.key);
            Outcome::Placed {
                node,
                modified: modified.map(Box::new),
                permit: Permit::Allowed { released },
            }
        }
        Ok(Some(timeout)) => {
            cluster.gangs.wait(&pod.key);
            Outcome::Placed {
                node,
                modified: modified.map(Box::new),
                permit: Permit::Wait(timeout),
            }
        }
    }
}

/// A reserve pod placed: its Reservation counted on `node` as Available, and the pods it
/// pre-allocates counted as its owners.
fn assume_reservation(
    cluster: &mut ClusterState,
    (name, pod, node): (&str, &PodInfo, &str),
    modified: Option<&Pod>,
    pre: Vec<Arc<PodInfo>>,
) -> Option<Outcome> {
    let before = cluster.reservations.get(name)?.object.clone();
    let allocatable = reservation_live::allocatable_of(pod);
    let annotations = reservation_live::prebind_annotations(modified);
    let placed = reservation_live::assumed(&before, node, &allocatable, &annotations);
    let uid = placed.metadata.uid.clone().unwrap_or_default();
    cluster.upsert_reservation(Arc::new(placed));
    for p in &pre {
        let mut owner = (**p).clone();
        let mut obj = (*owner.pod).clone();
        obj.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                crate::api::extension::keys::ANNOTATION_RESERVATION_ALLOCATED.into(),
                crate::scheduler::model::reservation::allocated_value(name, &uid),
            );
        owner.pod = Arc::new(obj);
        owner.reservation_allocated = Some(uid.clone());
        cluster.replace_placed(Arc::new(owner));
    }
    Some(Outcome::Reservation {
        name: name.to_string(),
        node: node.to_string(),
        before,
        allocatable,
        annotations,
        pre_allocated: pre,
    })
}

/// What a nomination changes beyond the preemptor's own: victims waiting at Permit are
/// rejected (with their Strict gangs) rather than deleted; a preempting job's pending
/// members are nominated, its members waiting at Permit go back to the queue nominated where
/// they waited, and the group's round remembers who preempted.
fn nominated(cluster: &mut ClusterState, pod: &PodInfo, n: &Nomination) -> Vec<GangRejection> {
    let mut out = Vec::new();
    for v in &n.victims {
        if !cluster.gangs.waiting.contains(&v.key) {
            continue;
        }
        out.push(gang_failed(cluster, &v.key, PREEMPTED));
        cluster.forget(&v.key);
        out.push(GangRejection {
            keys: vec![v.key.clone()],
            message: PREEMPTED.into(),
        });
    }
    let Some(job) = &n.job else {
        return out;
    };
    for (member, node) in &job.pending {
        cluster.nominated.set(member.clone(), node);
    }
    let mut sent_back = Vec::new();
    for (member, node) in &job.waiting {
        cluster.gangs.waiting.remove(&member.key);
        cluster.forget(&member.key);
        let mut pending = (**member).clone();
        pending.node_name = None;
        cluster.nominated.set(Arc::new(pending), node);
        sent_back.push(member.key.clone());
    }
    out.push(GangRejection {
        keys: sent_back,
        message: job.message.clone(),
    });
    if cluster.gangs.gang_id(&pod.key).is_some() {
        cluster
            .gangs
            .set_preempted(&job.preemptor, &pod.key, &job.message);
    }
    out
}

/// Why a victim waiting at Permit was sent back (kube-scheduler's word).
pub const PREEMPTED: &str = "preempted";

/// A member failed: in Strict mode its group's waiting members are rejected and their
/// places released at once, so the next cycle does not count them.
pub fn gang_failed(cluster: &mut ClusterState, key: &str, reason: &str) -> GangRejection {
    let keys = cluster.gangs.member_failed(key);
    if keys.is_empty() {
        return GangRejection::default();
    }
    let group = cluster
        .gangs
        .gang_id(key)
        .map(|id| cluster.gangs.group_id(id))
        .unwrap_or_default();
    let message = gangs::rejected_message(&group, key, reason, keys.len());
    for k in &keys {
        cluster.forget(k);
    }
    GangRejection { keys, message }
}

/// A node verdict saying `plugin` refused the pod there.
pub fn rejected(plugin: &'static str, code: Code, reason: &str) -> NodeVerdict {
    NodeVerdict {
        feasible: false,
        plugin: Some(plugin),
        code,
        reason: reason.to_string().into(),
        scores: BTreeMap::new(),
        total: 0,
    }
}
