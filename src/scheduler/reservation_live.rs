//! The live scheduler's side of Reservations: pending ones enter the queue as reserve
//! pods, a placed one is "bound" by writing its status (Available, node, allocatable), and
//! the reservation controller expires, completes and garbage-collects them
//! (`pkg/scheduler/plugins/reservation/controller`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::binder::BindError;
use super::framework::PodInfo;
use super::framework::reservations::reserve_key;
use crate::api::extension::keys::ANNOTATION_RESERVATION_ALLOCATED;
use crate::api::scheduling::reservation::Reservation;
use crate::scheduler::model::reservation::{
    PHASE_AVAILABLE, PHASE_FAILED, PHASE_PENDING, PHASE_SUCCEEDED, ReservationInfo, reserve_pod,
};

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> serde_json::Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message,
        "lastProbeTime": now(), "lastTransitionTime": now()})
}

/// The reserve pod a pending reservation is queued as; `None` when it is not pending.
pub fn pending_pod(r: &Arc<Reservation>) -> Option<PodInfo> {
    let info = ReservationInfo::new(r.clone());
    if info.phase != PHASE_PENDING || info.node.is_some() || r.metadata.deletion_timestamp.is_some()
    {
        return None;
    }
    let mut p = PodInfo::new(Arc::new(reserve_pod(&info, None)));
    p.key = reserve_key(&info.name);
    p.reserve_of = Some(info.name);
    Some(p)
}

/// The reservation as it will be once bound to `node` (for the cache, before the write).
pub fn assumed(
    r: &Reservation,
    node: &str,
    allocatable: &BTreeMap<String, Quantity>,
    annotations: &BTreeMap<String, String>,
) -> Reservation {
    let mut r = r.clone();
    if !annotations.is_empty() {
        let a = r.metadata.annotations.get_or_insert_with(Default::default);
        a.extend(annotations.clone());
    }
    let status = r.status.get_or_insert_with(Default::default);
    status.phase = Some(PHASE_AVAILABLE.into());
    status.node_name = Some(node.into());
    status.allocatable = Some(allocatable.clone());
    r
}

pub const ANNOTATION_RESIZE_ALLOCATABLE: &str =
    "scheduling.koordinator.sh/reservation-resize-allocatable";

/// What the Reservation PreBind plugins write on the Reservation itself (Koordinator's
/// `ReservationPreBindPlugin`): DeviceShare's `device-allocated` and NodeNUMAResource's
/// `resource-status` (its cpuset), from the reserve pod's PreBind result.
pub fn prebind_annotations(
    modified: Option<&k8s_openapi::api::core::v1::Pod>,
) -> BTreeMap<String, String> {
    use crate::api::extension::keys::{ANNOTATION_DEVICE_ALLOCATED, ANNOTATION_RESOURCE_STATUS};
    let Some(a) = modified.and_then(|p| p.metadata.annotations.as_ref()) else {
        return BTreeMap::new();
    };
    [ANNOTATION_DEVICE_ALLOCATED, ANNOTATION_RESOURCE_STATUS]
        .into_iter()
        .filter_map(|k| Some((k.to_string(), a.get(k)?.clone())))
        .collect()
}

/// What a reservation holds once scheduled: its reserve pod's requests, with the resources
/// of its `reservation-resize-allocatable` annotation (`{"resources": {...}}`) replacing them.
pub fn allocatable_of(pod: &PodInfo) -> BTreeMap<String, Quantity> {
    let mut out = crate::api::pod::resource_list(&pod.requests);
    let resize = pod
        .pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_RESIZE_ALLOCATABLE))
        .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok())
        .and_then(|v| {
            serde_json::from_value::<BTreeMap<String, Quantity>>(v.get("resources")?.clone()).ok()
        });
    out.extend(resize.unwrap_or_default());
    out
}

/// Koordinator's `PreBindReservation` for pre-allocation: each pod taken over is written as
/// allocated to the reservation (refused when the pod was replaced by a namesake).
async fn pre_allocate(
    client: &kube::Client,
    name: &str,
    uid: &str,
    pods: &[Arc<PodInfo>],
) -> Result<(), kube::Error> {
    for p in pods {
        let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace);
        let pod_name = p.name.as_str();
        let key = ANNOTATION_RESERVATION_ALLOCATED;
        // The uid precondition keeps a namesake created since from being written.
        let patch = json!({"metadata": {"uid": p.uid, "annotations": {key: crate::scheduler::model::reservation::allocated_value(name, uid)}}});
        api.patch(pod_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// The Reservation plugin's Bind: the pods it pre-allocates written as its owners, then
/// status Available on `node`.
pub async fn bind(
    client: &kube::Client,
    (name, node): (&str, &str),
    allocatable: &BTreeMap<String, Quantity>,
    annotations: &BTreeMap<String, String>,
    pre_allocated: &[Arc<PodInfo>],
) -> Result<(), BindError> {
    let api: Api<Reservation> = Api::all(client.clone());
    let err = |source| BindError::Api {
        pod: format!("reservation/{name}"),
        node: node.to_string(),
        source,
    };
    let current = api.get(name).await.map_err(err)?;
    if current.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(PHASE_FAILED) {
        return Err(BindError::Rejected {
            pod: format!("reservation/{name}"),
            plugin: "Reservation".into(),
            message: "reservation is not active".into(),
        });
    }
    let uid = current.metadata.uid.clone().unwrap_or_default();
    pre_allocate(client, name, &uid, pre_allocated)
        .await
        .map_err(err)?;
    if !annotations.is_empty() {
        let meta = json!({"metadata": {"annotations": annotations}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&meta))
            .await
            .map_err(err)?;
    }
    let status = json!({"status": {"phase": PHASE_AVAILABLE, "nodeName": node, "allocatable": allocatable,
        "conditions": [condition("Scheduled", "True", "Scheduled", ""), condition("Ready", "True", "Available", "")]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map(|_| ())
        .map_err(err)
}

/// A reservation that fits nowhere: Scheduled=False, phase stays Pending.
pub async fn unschedulable(client: &kube::Client, name: &str, message: &str) {
    let api: Api<Reservation> = Api::all(client.clone());
    let status = json!({"status": {"phase": PHASE_PENDING, "conditions": [condition("Scheduled", "False", "Unschedulable", message)]}});
    if let Err(e) = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
    {
        tracing::debug!(reservation = name, error = %e, "Unschedulable condition not written");
    }
}

/// How long a terminal reservation is kept (Koordinator's default `gcDurationSeconds`).
pub const GC_AFTER_SECONDS: i64 = 86_400;

/// Koordinator's `isReservationNeedCleanup`: an expired reservation once its `Expired`
/// condition changed `after` seconds ago, a succeeded one once its `Succeeded` condition was
/// last probed that long ago; a reservation failed for another reason is kept.
pub fn needs_cleanup(r: &Reservation, after: i64, now_s: i64) -> bool {
    let status = r.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or_default();
    let conditions = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let since = |reason: &str, probe: bool| {
        let c = conditions
            .iter()
            .find(|c| c.reason.as_deref() == Some(reason))?;
        let t = if probe {
            &c.last_probe_time
        } else {
            &c.last_transition_time
        };
        t.as_ref().map(|t| t.0.as_second())
    };
    let at = match phase {
        PHASE_FAILED => since("Expired", false),
        PHASE_SUCCEEDED => since("Succeeded", true),
        _ => None,
    };
    at.is_some_and(|t| now_s - t > after)
}

fn ttl_seconds(r: &Reservation) -> Option<i64> {
    let raw = r.spec.ttl.as_deref().unwrap_or("24h");
    crate::api::duration::parse(raw)
        .ok()
        .map(|d| d.as_secs() as i64)
}

/// When a reservation expires (`spec.expires`, else creation + `ttl`; 0 never), in seconds.
pub fn expiry_s(r: &Reservation) -> Option<i64> {
    if let Some(t) = &r.spec.expires {
        return Some(t.0.as_second());
    }
    let created = r.metadata.creation_timestamp.as_ref()?.0.as_second();
    ttl_seconds(r)
        .filter(|ttl| *ttl > 0)
        .map(|ttl| created + ttl)
}

/// What the controller decides for one reservation: (phase, reason) to write, owners.
pub fn decide(
    r: &Reservation,
    owners: &[ObjectReference],
    now_s: i64,
    node_exists: bool,
) -> Option<(&'static str, &'static str)> {
    let phase = r
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or(PHASE_PENDING);
    if phase == PHASE_SUCCEEDED || phase == PHASE_FAILED {
        return None;
    }
    let created = r
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(now_s);
    let expired = match &r.spec.expires {
        Some(t) => t.0.as_second() <= now_s,
        None => ttl_seconds(r).is_some_and(|ttl| ttl > 0 && created + ttl <= now_s),
    };
    if expired {
        return Some((PHASE_FAILED, "Expired"));
    }
    let bound = r
        .status
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if bound && !node_exists {
        return Some((PHASE_FAILED, "Expired"));
    }
    if phase == PHASE_AVAILABLE && r.spec.allocate_once.unwrap_or(true) && !owners.is_empty() {
        return Some((PHASE_SUCCEEDED, "Succeeded"));
    }
    None
}

/// One controller round over every reservation; returns the next expiry (seconds) of a
/// reservation still pending or available, for the controller to wake up then.
/// `gc`: how long a terminal reservation is kept before it is deleted (None: never).
pub async fn reconcile(client: &kube::Client, gc: Option<i64>) -> Result<Option<i64>, kube::Error> {
    let rapi: Api<Reservation> = Api::all(client.clone());
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node_names: std::collections::HashSet<String> = nodes
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let mut owners: BTreeMap<String, Vec<ObjectReference>> = BTreeMap::new();
    for p in crate::kernel::watch::list_decodable::<Pod>(client).await? {
        let Some(raw) = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_RESERVATION_ALLOCATED))
        else {
            continue;
        };
        let Some(uid) = serde_json::from_str::<serde_json::Value>(raw)
            .ok()
            .and_then(|v| v["uid"].as_str().map(str::to_string))
        else {
            continue;
        };
        let finished = p
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
        if finished {
            continue;
        }
        owners.entry(uid).or_default().push(ObjectReference {
            namespace: p.metadata.namespace.clone(),
            name: p.metadata.name.clone(),
            uid: p.metadata.uid.clone(),
            ..Default::default()
        });
    }
    let now_s = k8s_openapi::jiff::Timestamp::now().as_second();
    let mut next_expiry: Option<i64> = None;
    for r in crate::kernel::watch::list_decodable::<Reservation>(client).await? {
        let name = r.metadata.name.clone().unwrap_or_default();
        let uid = r.metadata.uid.clone().unwrap_or_default();
        let mine = owners.get(&uid).cloned().unwrap_or_default();
        let node = r
            .status
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let phase = r
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phase == PHASE_SUCCEEDED || phase == PHASE_FAILED {
            let node_gone = !node.is_empty() && !node_names.contains(&node);
            if gc.is_some_and(|after| node_gone || needs_cleanup(&r, after, now_s)) {
                let _ = rapi.delete(&name, &DeleteParams::default()).await;
            }
            continue;
        }
        let mut status = serde_json::Map::new();
        let known: Vec<ObjectReference> = r
            .status
            .as_ref()
            .and_then(|s| s.current_owners.clone())
            .unwrap_or_default();
        if known != mine {
            status.insert("currentOwners".into(), json!(mine));
        }
        let decided = decide(
            &r,
            &mine,
            now_s,
            node.is_empty() || node_names.contains(&node),
        );
        if decided.is_none()
            && let Some(t) = expiry_s(&r).filter(|t| *t > now_s)
        {
            next_expiry = Some(next_expiry.map_or(t, |n: i64| n.min(t)));
        }
        if let Some((phase, reason)) = decided {
            status.insert("phase".into(), json!(phase));
            status.insert(
                "conditions".into(),
                json!([condition("Ready", "False", reason, "")]),
            );
        }
        if !status.is_empty() {
            let body = json!({"status": status});
            if let Err(e) = rapi
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                tracing::warn!(reservation = %name, error = %e, "reservation status not updated");
            }
        }
    }
    Ok(next_expiry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_annotation_replaces_requested_resources_and_the_controller_decides() {
        let r: Arc<Reservation> = Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "r", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z",
                    "annotations": {ANNOTATION_RESIZE_ALLOCATABLE: "{\"resources\":{\"cpu\":\"6\"}}"}},
                "spec": {"ttl": "1h", "owners": [{"object": {"name": "x"}}],
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}]}}}}))
            .unwrap(),
        );
        let p = pending_pod(&r).unwrap();
        let a = allocatable_of(&p);
        assert_eq!(
            (a["cpu"].0.as_str(), a["memory"].0.as_str()),
            ("6", "1073741824")
        );
        let created = k8s_openapi::jiff::Timestamp::from_second(1_767_225_600)
            .unwrap()
            .as_second();
        assert_eq!(decide(&r, &[], created + 60, true), None);
        assert_eq!(
            decide(&r, &[], created + 3600, true),
            Some((PHASE_FAILED, "Expired"))
        );
        let avail = assumed(&r, "n", &a, &Default::default());
        let owner = ObjectReference {
            name: Some("x".into()),
            ..Default::default()
        };
        assert_eq!(
            decide(&avail, std::slice::from_ref(&owner), created + 60, true),
            Some((PHASE_SUCCEEDED, "Succeeded"))
        );
        assert_eq!(
            decide(&avail, &[], created + 60, false),
            Some((PHASE_FAILED, "Expired")),
            "its node is gone"
        );
    }

    /// Koordinator's TestGC, the cleanup rule: a reservation succeeded 48 h ago goes
    /// (default 24 h), one expired a minute ago stays, one failed for another reason stays;
    /// a shorter gcDurationSeconds takes the fresh expired one too.
    #[test]
    fn terminal_reservations_are_collected_after_gc_duration() {
        let now_s = k8s_openapi::jiff::Timestamp::now().as_second();
        let at = |secs_ago: i64| {
            k8s_openapi::jiff::Timestamp::from_second(now_s - secs_ago)
                .unwrap()
                .to_string()
        };
        let r = |phase: &str, reason: &str, ago: i64| -> Reservation {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "r"},
                "spec": {"template": {}, "owners": []},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "False",
                    "reason": reason, "lastProbeTime": at(ago), "lastTransitionTime": at(ago)}]}}))
            .unwrap()
        };
        let day = GC_AFTER_SECONDS;
        assert!(needs_cleanup(
            &r("Succeeded", "Succeeded", 48 * 3600),
            day,
            now_s
        ));
        assert!(!needs_cleanup(&r("Failed", "Expired", 60), day, now_s));
        assert!(needs_cleanup(&r("Failed", "Expired", 60), 30, now_s));
        assert!(!needs_cleanup(
            &r("Failed", "Unschedulable", 48 * 3600),
            day,
            now_s
        ));
        assert!(!needs_cleanup(
            &r("Available", "Available", 48 * 3600),
            day,
            now_s
        ));
    }
}
