//! The StatefulSet controller (kube-controller-manager's `statefulset`): pods
//! `<set>-<ordinal>` with a stable hostname, each with its own claims from
//! `volumeClaimTemplates` (`<template>-<set>-<ordinal>`, created before the pod, kept when
//! the pod or the set goes: the `Retain` policy). `OrderedReady` (the default) creates in
//! ordinal order, each once its predecessors run and are ready, and removes from the
//! highest ordinal, one at a time; `Parallel` does all at once. A new template rolls out
//! from the highest ordinal down to `partition`, one pod at a time (`RollingUpdate`), or
//! when pods are deleted (`OnDelete`); a pod below the partition is recreated at the
//! current revision (its template from the set's ControllerRevisions). Failed pods are replaced. The status carries what
//! `kubectl rollout status statefulset` reads (ready, updated, current and update
//! revisions).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use serde_json::{Value, json};

use super::replicaset::{active, available, owned_pod, ready};

pub use super::revisions::LABEL_HASH as LABEL_REVISION;
pub const LABEL_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
pub const LABEL_POD_INDEX: &str = "apps.kubernetes.io/pod-index";

/// What one pass does for one StatefulSet.
#[derive(Debug, Default)]
pub struct Plan {
    /// Pods to create, each with the claims it needs (created first; existing ones stay).
    pub create: Vec<(Value, Vec<Value>)>,
    /// Pods to delete (name).
    pub delete: Vec<String>,
    pub status: Option<Value>,
    /// Claims whose `ownerReferences` change (name, the new list), before any deletion.
    pub claim_owners: Vec<(String, Value)>,
}

fn name_of(s: &StatefulSet) -> &str {
    s.metadata.name.as_deref().unwrap_or_default()
}

/// The hash of the set's template.
pub fn template_hash(s: &StatefulSet) -> String {
    let t = s.spec.as_ref().map(|s| &s.template);
    super::deployment::template_hash(&serde_json::to_value(t).unwrap_or_default())
}

/// `<set>-<hash>`: the name of the template's ControllerRevision, and the label its pods
/// carry.
pub fn update_revision(s: &StatefulSet) -> String {
    super::revisions::name_for(&s.metadata, &template_hash(s))
}

fn revision(p: &Pod) -> Option<&str> {
    p.metadata
        .labels
        .as_ref()?
        .get(LABEL_REVISION)
        .map(String::as_str)
}

fn ordinal(set: &str, p: &Pod) -> Option<i32> {
    let name = p.metadata.name.as_deref()?;
    name.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

fn healthy(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    active(p) && phase == Some("Running") && ready(p)
}

fn failed(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.metadata.deletion_timestamp.is_none() && matches!(phase, Some("Failed" | "Succeeded"))
}

/// The claims of ordinal `ord` from the templates (labels: the template's and the set's
/// selector labels, as kube's `getPersistentVolumeClaims`).
fn claims_for(s: &StatefulSet, ord: i32) -> Vec<Value> {
    let Some(spec) = s.spec.as_ref() else {
        return Vec::new();
    };
    let selector = spec.selector.match_labels.clone().unwrap_or_default();
    let templates = spec.volume_claim_templates.iter().flatten();
    templates
        .map(|t| {
            let mut c = serde_json::to_value(t).unwrap_or_default();
            let tname = t.metadata.name.clone().unwrap_or_default();
            c["apiVersion"] = "v1".into();
            c["kind"] = "PersistentVolumeClaim".into();
            c["metadata"]["name"] = format!("{tname}-{}-{ord}", name_of(s)).into();
            c["metadata"]["namespace"] = s.metadata.namespace.clone().unwrap_or_default().into();
            let mut labels: BTreeMap<String, String> =
                t.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector.clone());
            c["metadata"]["labels"] = json!(labels);
            if let Some(st) = c.get_mut("status") {
                *st = json!({"phase": "Pending"});
            }
            c
        })
        .collect()
}

/// Pod `ord` of the set from `template` (the set's own when `None`) at `revision`, with
/// its identity and claims mounted.
pub fn pod_for(
    s: &StatefulSet,
    ord: i32,
    revision: &str,
    template: Option<&PodTemplateSpec>,
) -> Option<Value> {
    let spec = s.spec.as_ref()?;
    let template = template.unwrap_or(&spec.template);
    let mut pod = owned_pod(template, "apps/v1", "StatefulSet", &s.metadata)?;
    let name = format!("{}-{ord}", name_of(s));
    let meta = pod["metadata"].as_object_mut()?;
    meta.remove("generateName");
    meta.insert("name".into(), name.clone().into());
    for (k, v) in [
        (LABEL_REVISION, revision.to_string()),
        (LABEL_POD_NAME, name.clone()),
        (LABEL_POD_INDEX, ord.to_string()),
    ] {
        pod["metadata"]["labels"][k] = v.into();
    }
    pod["spec"]["hostname"] = name.into();
    if !spec.service_name.as_deref().unwrap_or_default().is_empty() {
        pod["spec"]["subdomain"] = spec.service_name.clone().into();
    }
    for c in spec.volume_claim_templates.iter().flatten() {
        let vname = c.metadata.name.clone().unwrap_or_default();
        let claim = format!("{vname}-{}-{ord}", name_of(s));
        let vols = pod["spec"]["volumes"].as_array_mut();
        let mut vols: Vec<Value> = vols.map(std::mem::take).unwrap_or_default();
        vols.retain(|v| v["name"] != json!(vname));
        vols.push(json!({"name": vname, "persistentVolumeClaim": {"claimName": claim}}));
        pod["spec"]["volumes"] = Value::Array(vols);
    }
    Some(pod)
}

/// The revision and template pod `ord` is created at: below the partition of a rolling
/// update, the current revision's (kept in its ControllerRevision), else the update's.
fn version_for(
    s: &StatefulSet,
    ord: i32,
    start: i32,
    update_rev: &str,
    history: &[&ControllerRevision],
) -> (String, Option<PodTemplateSpec>) {
    let spec = s.spec.as_ref();
    let strategy = spec.and_then(|s| s.update_strategy.as_ref());
    let rolling = strategy.and_then(|u| u.type_.as_deref()) != Some("OnDelete");
    let partition = strategy
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let current = s
        .status
        .as_ref()
        .and_then(|st| st.current_revision.as_deref());
    if let Some(cur) = current.filter(|c| rolling && *c != update_rev && ord < start + partition) {
        let kept = history
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(cur))
            .and_then(|r| super::revisions::template_of(r));
        if kept.is_some() {
            return (cur.to_string(), kept);
        }
    }
    (update_rev.to_string(), None)
}

/// One pass for one StatefulSet over the pods it controls and its template history.
pub fn plan(s: &StatefulSet, owned: &[&Pod], history: &[&ControllerRevision]) -> Plan {
    let mut out = Plan::default();
    let Some(spec) = s.spec.as_ref() else {
        return out;
    };
    let set = name_of(s);
    let update_rev = update_revision(s);
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
    let by_ord: BTreeMap<i32, &Pod> = owned
        .iter()
        .filter_map(|p| Some((ordinal(set, p)?, *p)))
        .collect();
    out.status = status(s, &by_ord, &update_rev, replicas);
    if s.metadata.deletion_timestamp.is_some() {
        return out;
    }
    let range = start..start + replicas;
    // Failed or finished pods are replaced: deleted now, created again next pass.
    out.delete
        .extend(by_ord.values().filter(|p| failed(p)).map(|p| pod_name(p)));
    if !out.delete.is_empty() && !parallel {
        return out;
    }
    for ord in range.clone() {
        match by_ord.get(&ord) {
            None => {
                let (rev, template) = version_for(s, ord, start, &update_rev, history);
                if let Some(pod) = pod_for(s, ord, &rev, template.as_ref()) {
                    out.create.push((pod, claims_for(s, ord)));
                }
                if !parallel {
                    return out;
                }
            }
            Some(p) if !healthy(p) && !parallel => return out,
            Some(_) => {}
        }
    }
    // Scale down: ordinals beyond the range, highest first.
    let condemned: Vec<&Pod> = by_ord
        .iter()
        .rev()
        .filter(|(o, _)| !range.contains(o))
        .map(|(_, p)| *p)
        .collect();
    if !condemned.is_empty() {
        if parallel {
            let live = condemned.iter().filter(|p| active(p));
            out.delete.extend(live.map(|p| pod_name(p)));
        } else if condemned.iter().all(|p| active(p)) {
            out.delete.push(pod_name(condemned[0]));
        }
        return out;
    }
    rolling_update(spec, &by_ord, &range, &update_rev, &mut out);
    out
}

/// kube's claim ownership under `persistentVolumeClaimRetentionPolicy`, for the claims of
/// pods that exist: a condemned pod's (scaled away) is owned by that pod when
/// `whenScaled: Delete`, any other by the set when `whenDeleted: Delete`, else by neither —
/// the garbage collector then deletes it with its owner. Other owners are left alone.
pub fn claim_owners(
    s: &StatefulSet,
    owned: &[&Pod],
    claims: &[&PersistentVolumeClaim],
) -> Vec<(String, Value)> {
    let Some(spec) = s.spec.as_ref() else {
        return Vec::new();
    };
    let policy = spec.persistent_volume_claim_retention_policy.as_ref();
    let deletes =
        |f: fn(
            &k8s_openapi::api::apps::v1::StatefulSetPersistentVolumeClaimRetentionPolicy,
        ) -> Option<&String>| { policy.and_then(f).map(String::as_str) == Some("Delete") };
    let (when_deleted, when_scaled) = (
        deletes(|p| p.when_deleted.as_ref()),
        deletes(|p| p.when_scaled.as_ref()),
    );
    let set = name_of(s);
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    let range = start..start + spec.replicas.unwrap_or(1).max(0);
    let templates: Vec<String> = spec
        .volume_claim_templates
        .iter()
        .flatten()
        .filter_map(|t| t.metadata.name.clone())
        .collect();
    let set_uid = s.metadata.uid.clone().unwrap_or_default();
    let mut out = Vec::new();
    for c in claims {
        let cname = c.metadata.name.as_deref().unwrap_or_default();
        let Some(ord) = templates.iter().find_map(|t| {
            cname
                .strip_prefix(t.as_str())?
                .strip_prefix('-')?
                .strip_prefix(set)?
                .strip_prefix('-')?
                .parse::<i32>()
                .ok()
        }) else {
            continue;
        };
        let pod_name = format!("{set}-{ord}");
        // As kube, only the claims of pods that exist are updated.
        let Some(pod) = owned
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pod_name.as_str()))
        else {
            continue;
        };
        let wanted = if when_scaled && !range.contains(&ord) {
            Some(json!({"apiVersion": "v1", "kind": "Pod", "name": pod_name,
                "uid": pod.metadata.uid.clone().unwrap_or_default()}))
        } else if when_deleted {
            Some(super::replicaset::owner_ref(
                "apps/v1",
                "StatefulSet",
                &s.metadata,
            ))
        } else {
            None
        };
        let current: Vec<Value> = c
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .collect();
        let mut next: Vec<Value> = current
            .iter()
            .filter(|r| {
                r["uid"] != json!(set_uid) && !(r["kind"] == "Pod" && r["name"] == json!(pod_name))
            })
            .cloned()
            .collect();
        next.extend(wanted);
        let same_uids = |a: &[Value], b: &[Value]| {
            a.len() == b.len() && a.iter().all(|x| b.iter().any(|y| y["uid"] == x["uid"]))
        };
        if !same_uids(&current, &next) {
            out.push((cname.to_string(), Value::Array(next)));
        }
    }
    out
}

fn pod_name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// `RollingUpdate`: the highest ordinal at or above `partition` not at the update revision
/// is deleted (recreated next pass from the new template), once every pod is healthy.
fn rolling_update(
    spec: &k8s_openapi::api::apps::v1::StatefulSetSpec,
    by_ord: &BTreeMap<i32, &Pod>,
    range: &std::ops::Range<i32>,
    update_rev: &str,
    out: &mut Plan,
) {
    let strategy = spec.update_strategy.as_ref();
    if strategy.and_then(|u| u.type_.as_deref()) == Some("OnDelete") {
        return;
    }
    let partition = strategy
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    if !by_ord.values().all(|p| healthy(p)) {
        return;
    }
    let stale = by_ord
        .iter()
        .rev()
        .filter(|(o, _)| range.contains(o) && **o - range.start >= partition)
        .find(|(_, p)| revision(p) != Some(update_rev));
    if let Some((_, p)) = stale {
        out.delete.push(pod_name(p));
    }
}

fn status(
    s: &StatefulSet,
    by_ord: &BTreeMap<i32, &Pod>,
    update_rev: &str,
    replicas: i32,
) -> Option<Value> {
    let live: Vec<&Pod> = by_ord.values().copied().filter(|p| active(p)).collect();
    let updated = live
        .iter()
        .filter(|p| revision(p) == Some(update_rev))
        .count() as i32;
    let readies = live.iter().filter(|p| ready(p)).count() as i32;
    let min_ready = s
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let now_s = k8s_openapi::jiff::Timestamp::now().as_second();
    let availables = live
        .iter()
        .filter(|p| available(p, min_ready, now_s))
        .count();
    let cur = s.status.as_ref();
    let previous = cur.and_then(|c| c.current_revision.clone());
    let done = updated == replicas && live.len() as i32 == replicas;
    let current_rev = match previous {
        Some(p) if !done => p,
        _ => update_rev.to_string(),
    };
    let current = live
        .iter()
        .filter(|p| revision(p) == Some(current_rev.as_str()))
        .count() as i32;
    let status = json!({
        "replicas": live.len(),
        "readyReplicas": readies,
        "availableReplicas": availables,
        "currentReplicas": current,
        "updatedReplicas": updated,
        "currentRevision": current_rev,
        "updateRevision": update_rev,
        "observedGeneration": s.metadata.generation.unwrap_or(0),
        "collisionCount": cur.and_then(|c| c.collision_count).unwrap_or(0),
    });
    let was = serde_json::to_value(cur.cloned().unwrap_or_default()).unwrap_or_default();
    let same = status
        .as_object()
        .is_some_and(|m| m.iter().all(|(k, v)| was.get(k).unwrap_or(&json!(0)) == v));
    (!same).then_some(status)
}

#[cfg(test)]
#[path = "statefulset_tests.rs"]
mod tests;
