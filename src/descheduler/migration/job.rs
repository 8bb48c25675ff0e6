//! PodMigrationJobs as plain data: the job a plugin's eviction becomes, the Reservation a
//! `ReservationFirst` job creates, and [`step`] — what a job needs next given what the
//! cluster shows. The controller only carries steps out, so they are tested here.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::args::MigrationArgs;
use super::{
    ANNOTATION_EVICT_REASON, ANNOTATION_EVICT_TRIGGER, ANNOTATION_JOB_CREATED_BY, CREATOR,
    LABEL_CREATED_BY,
};
use crate::api::extension::keys::ANNOTATION_RESERVATION_ALLOCATED;
use crate::api::scheduling::migration::{
    PodMigrationJob, PodMigrationJobSpec, PodMigrationJobStatus,
};
use crate::api::scheduling::reservation::{
    Reservation, ReservationControllerReference, ReservationOwner, ReservationSpec,
};
use crate::descheduler::framework::podview::PodView;

/// The job for one eviction (`name`: a fresh UUID; `instance`: this controller's).
pub fn new_job(
    name: &str,
    pod: &PodView,
    plugin: &str,
    reason: &str,
    a: &MigrationArgs,
    instance: &str,
) -> PodMigrationJob {
    let annotations = BTreeMap::from([
        (ANNOTATION_EVICT_REASON.to_string(), reason.to_string()),
        (ANNOTATION_EVICT_TRIGGER.to_string(), plugin.to_string()),
        (ANNOTATION_JOB_CREATED_BY.to_string(), instance.to_string()),
    ]);
    let mut job = PodMigrationJob::new(
        name,
        PodMigrationJobSpec {
            ttl: Some(format!("{}s", a.default_job_ttl.as_secs())),
            mode: Some(a.default_job_mode.clone()),
            pod_ref: Some(ObjectReference {
                namespace: Some(pod.namespace.clone()),
                name: Some(pod.name.clone()),
                uid: pod.uid.clone(),
                kind: Some("Pod".into()),
                api_version: Some("v1".into()),
                ..Default::default()
            }),
            delete_options: a
                .default_delete_options
                .clone()
                .and_then(|v| serde_json::from_value(v).ok()),
            ..Default::default()
        },
    );
    job.metadata.annotations = Some(annotations);
    job.status = Some(PodMigrationJobStatus {
        phase: Some("Pending".into()),
        ..Default::default()
    });
    job
}

/// `PodScheduled` of a pod: `Some(true)`/`Some(false)`, or `None` without the condition.
fn scheduled(pod: &Pod) -> Option<bool> {
    let c = pod.status.as_ref()?.conditions.as_ref()?;
    c.iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| c.status == "True")
}

/// Koordinator's `GenerateReserveResourceOwners`: a pending pod the scheduler could not
/// place owns its Reservation itself (it will take the room, no eviction); otherwise the
/// pod's controller does; a bare running pod gives none.
fn owners(pod: &Pod) -> Vec<ReservationOwner> {
    let ns = pod.metadata.namespace.clone();
    let pending = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
    if pending && scheduled(pod) == Some(false) {
        return vec![ReservationOwner {
            object: Some(ObjectReference {
                namespace: ns,
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                kind: Some("Pod".into()),
                ..Default::default()
            }),
            ..Default::default()
        }];
    }
    let ctrl = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    ctrl.map(|o| ReservationOwner {
        controller: Some(ReservationControllerReference {
            api_version: Some(o.api_version.clone()),
            kind: Some(o.kind.clone()),
            name: Some(o.name.clone()),
            uid: Some(o.uid.clone()),
            controller: Some(true),
            namespace: ns,
            ..Default::default()
        }),
        ..Default::default()
    })
    .into_iter()
    .collect()
}

/// Koordinator's `IsMigratePendingPod`: the Reservation is owned by one object (the pending
/// pod itself), not a controller or a selector.
fn for_pending_pod(r: &Reservation) -> bool {
    r.spec
        .owners
        .iter()
        .any(|o| o.object.is_some() && o.controller.is_none() && o.label_selector.is_none())
}

/// The Reservation a `ReservationFirst` job creates: the pod's template off its current
/// node, owned by the pod's controller, used once, living as long as the job.
pub fn reservation_for(
    job: &PodMigrationJob,
    pod: &Pod,
    ttl: Option<Duration>,
    now_ms: i64,
) -> Reservation {
    let mut spec = pod.spec.clone().unwrap_or_default();
    let node = spec.node_name.take();
    if let Some(node) = node {
        let skip = NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "NotIn".into(),
            values: Some(vec![node]),
        };
        let na = spec
            .affinity
            .get_or_insert_with(Default::default)
            .node_affinity
            .get_or_insert_with(Default::default);
        let req = na
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default);
        if req.node_selector_terms.is_empty() {
            req.node_selector_terms.push(NodeSelectorTerm::default());
        }
        for t in &mut req.node_selector_terms {
            t.match_fields
                .get_or_insert_with(Vec::new)
                .push(skip.clone());
        }
    }
    let name = job
        .metadata
        .uid
        .clone()
        .unwrap_or_else(|| job.metadata.name.clone().unwrap_or_default());
    let labels = BTreeMap::from([
        (LABEL_CREATED_BY.to_string(), CREATOR.to_string()),
        (
            crate::api::extension::keys::LABEL_RESERVATION_ORDER.to_string(),
            now_ms.to_string(),
        ),
    ]);
    let template = serde_json::json!({
        "metadata": {
            "namespace": pod.metadata.namespace,
            "labels": pod.metadata.labels,
            "annotations": pod.metadata.annotations.as_ref().map(|a| {
                a.iter().filter(|(k, _)| k.as_str() != ANNOTATION_RESERVATION_ALLOCATED).collect::<BTreeMap<_, _>>()
            }),
        },
        "spec": spec,
    });
    let mut r = Reservation::new(
        &name,
        ReservationSpec {
            template: serde_json::from_value(template).ok(),
            owners: owners(pod),
            ttl: ttl.map(|d| format!("{}s", d.as_secs())),
            allocate_once: Some(true),
            ..Default::default()
        },
    );
    r.metadata = ObjectMeta {
        name: Some(name),
        labels: Some(labels),
        ..Default::default()
    };
    r
}

/// What a job needs next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Terminal failure: (reason, message).
    Fail(&'static str, String),
    /// Pending → Running, with the pod's UID filled in.
    Start(String),
    CreateReservation,
    /// A condition to record, then look again in a few seconds.
    Wait(Condition),
    /// Evict the pod (condition Eviction=False/Evicting).
    Evict,
    /// Record the reservation's node (ReservationScheduled=True) and go on.
    Scheduled(String),
    Succeed(Option<String>),
    /// A pending pod's job: the pod was scheduled (onto this node) into the Reservation.
    Assigned(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

fn cond(
    type_: &'static str,
    status: &'static str,
    reason: &'static str,
    message: impl Into<String>,
) -> Condition {
    Condition {
        type_,
        status,
        reason,
        message: message.into(),
    }
}

/// What the cluster shows about a job.
pub struct Seen<'a> {
    pub pod: Option<&'a Pod>,
    pub reservation: Option<&'a Reservation>,
    /// A pod that took the job's reservation.
    pub bound: Option<&'a PodView>,
    pub now_ms: i64,
}

fn has_condition(job: &PodMigrationJob, type_: &str, status: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == status))
}

fn ttl_of(job: &PodMigrationJob) -> Option<Duration> {
    crate::api::duration::parse(job.spec.ttl.as_deref()?)
        .ok()
        .filter(|d| !d.is_zero())
}

/// Koordinator's scavenger: any job (finished or not) older than its TTL plus 5 minutes,
/// or 30 minutes without a TTL, is deleted with its Reservation.
pub fn scavengeable(job: &PodMigrationJob, now_ms: i64) -> bool {
    let limit = ttl_of(job).map_or(Duration::from_secs(30 * 60), |t| {
        t + Duration::from_secs(300)
    });
    job.metadata
        .creation_timestamp
        .as_ref()
        .is_some_and(|c| now_ms - c.0.as_millisecond() >= limit.as_millis() as i64)
}

/// The next step of an active job.
pub fn step(job: &PodMigrationJob, seen: &Seen, default_mode: &str) -> Step {
    let created = job
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond());
    if let (Some(ttl), Some(c)) = (ttl_of(job), created)
        && seen.now_ms - c >= ttl.as_millis() as i64
    {
        return Step::Fail(
            "Timeout",
            format!("the job is older than its TTL {}s", ttl.as_secs()),
        );
    }
    let phase = job
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    let Some(r) = job.spec.pod_ref.as_ref().filter(|r| r.name.is_some()) else {
        return Step::Fail("InvalidPodRef", "spec.podRef names no pod".into());
    };
    let uid_now = seen.pod.and_then(|p| p.metadata.uid.clone());
    let gone = seen.pod.is_none() || (r.uid.is_some() && uid_now != r.uid);
    if phase != "Running" {
        return match (gone, uid_now) {
            (false, Some(uid)) => Step::Start(uid),
            _ => Step::Fail("MissingPod", "the pod to migrate does not exist".into()),
        };
    }
    let evicting = has_condition(job, "Eviction", "False");
    let mode = job.spec.mode.as_deref().unwrap_or(default_mode);
    if mode == "EvictDirectly" {
        return match (gone, evicting) {
            (true, _) => Step::Succeed(None),
            (false, _) => Step::Evict,
        };
    }
    let reserved = job
        .spec
        .reservation_options
        .as_ref()
        .and_then(|o| o.reservation_ref.as_ref());
    if reserved.is_none() {
        return Step::CreateReservation;
    }
    let Some(res) = seen.reservation else {
        return Step::Fail("MissingReservation", "the job's Reservation is gone".into());
    };
    let st = res.status.as_ref();
    let rphase = st.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let rnode = st.and_then(|s| s.node_name.clone());
    let conditions = st.and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
    let unschedulable = conditions
        .iter()
        .find(|c| {
            c.type_.as_deref() == Some("Scheduled") && c.reason.as_deref() == Some("Unschedulable")
        })
        .and_then(|c| c.message.clone());
    let expired = conditions
        .iter()
        .any(|c| c.type_.as_deref() == Some("Ready") && c.reason.as_deref() == Some("Expired"));
    if rphase == "Failed" && !expired && rnode.is_none() {
        // Koordinator's open-source reservations never ask for preemption: a Reservation
        // that failed to schedule fails the job.
        return Step::Fail("Unschedulable", unschedulable.unwrap_or_default());
    }
    if rphase == "Failed" || (rphase == "Succeeded" && seen.bound.is_none()) {
        return Step::Fail(
            "ReservationExpired",
            "the Reservation expired or failed".into(),
        );
    }
    let Some(rnode) = rnode else {
        let msg = unschedulable;
        return Step::Wait(match msg {
            Some(m) => cond("ReservationScheduled", "False", "Unschedulable", m),
            None => cond(
                "ReservationScheduled",
                "False",
                "Pending",
                "waiting for the Reservation to be scheduled",
            ),
        });
    };
    if for_pending_pod(res) {
        // The pending pod itself takes the room: no eviction, no same-node check.
        if !has_condition(job, "ReservationScheduled", "True") {
            return Step::Scheduled(rnode);
        }
        return pending_pod_scheduled(seen, gone);
    }
    let pod_node = seen.pod.and_then(|p| p.spec.as_ref()?.node_name.clone());
    if !gone && pod_node.as_deref() == Some(rnode.as_str()) {
        return Step::Fail(
            "ForbiddenMigratePod",
            "the Reservation landed on the pod's own node".into(),
        );
    }
    if !has_condition(job, "ReservationScheduled", "True") {
        return Step::Scheduled(rnode);
    }
    if !gone {
        return Step::Evict;
    }
    match seen.bound {
        None => Step::Wait(cond(
            "PodBoundReservation",
            "False",
            "WaitForPodBindReservation",
            "waiting for a pod to take the Reservation",
        )),
        Some(p) => {
            let name = Some(p.name.clone());
            if p.ready {
                Step::Succeed(name)
            } else {
                Step::Wait(cond(
                    "BoundPodReady",
                    "False",
                    "WaitForBoundPodReady",
                    "waiting for the new pod to be ready",
                ))
            }
        }
    }
}

/// `waitForPendingPodScheduled`: a pending pod's job succeeds once the pod is scheduled.
fn pending_pod_scheduled(seen: &Seen, gone: bool) -> Step {
    let Some(pod) = seen.pod.filter(|_| !gone) else {
        return Step::Fail("MissingPod", "the pod to migrate does not exist".into());
    };
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    match (scheduled(pod), node) {
        (Some(true), Some(n)) => Step::Assigned(n),
        _ => {
            let msg = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
                .and_then(|c| c.message.clone())
                .unwrap_or_default();
            Step::Wait(cond("PodScheduled", "False", "Unschedulable", msg))
        }
    }
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
