//! The ReplicaSet controller (kube-controller-manager's `replicaset`): a ReplicaSet's
//! selector adopts matching orphan pods and releases owned pods that no longer match; it
//! creates pods from its template up to `replicas` and deletes the surplus (unscheduled,
//! then not ready, then the newest first); its status counts them.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

use crate::api::selector::Selector;

/// What one pass does for one ReplicaSet.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Pods to create, from the template.
    pub create: usize,
    /// Pods to delete (namespace/name).
    pub delete: Vec<String>,
    /// Orphans to adopt / owned pods to release (name).
    pub adopt: Vec<String>,
    pub release: Vec<String>,
    /// The status to write, when it changed.
    pub status: Option<Value>,
}

pub fn controller_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// A pod that counts towards replicas: not finished, not being deleted.
pub fn active(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

pub fn ready(p: &Pod) -> bool {
    let conds = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    conds
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Ready for at least `min_ready` seconds (the Ready condition's transition time) at
/// `now_s`: kube's available.
pub fn available(p: &Pod, min_ready: i32, now_s: i64) -> bool {
    if min_ready <= 0 {
        return ready(p);
    }
    let conds = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    conds.into_iter().flatten().any(|c| {
        c.type_ == "Ready"
            && c.status == "True"
            && c.last_transition_time
                .as_ref()
                .is_some_and(|t| t.0.as_second() + i64::from(min_ready) <= now_s)
    })
}

/// Deletion order: unscheduled first, then not ready, then the newest.
fn deletion_rank(p: &Pod) -> (bool, bool, std::cmp::Reverse<Option<String>>) {
    let scheduled = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
    let created = p
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string());
    (scheduled, ready(p), std::cmp::Reverse(created))
}

pub fn plan(rs: &ReplicaSet, pods: &[&Pod]) -> Plan {
    let mut out = Plan::default();
    let uid = rs.metadata.uid.as_deref().unwrap_or("");
    let ns = rs.metadata.namespace.as_deref();
    let spec = rs.spec.as_ref();
    let selector = spec.and_then(|s| Selector::from_label_selector(&s.selector).ok());
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return out;
    };
    let matches = |p: &Pod| {
        let empty = Default::default();
        selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty))
    };
    let mut owned: Vec<&Pod> = Vec::new();
    for p in pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == ns)
    {
        let name = p.metadata.name.clone().unwrap_or_default();
        match controller_of(&p.metadata) {
            Some(o) if o.uid == uid => {
                if matches(p) {
                    owned.push(p);
                } else {
                    out.release.push(name);
                }
            }
            None if matches(p) && rs.metadata.deletion_timestamp.is_none() && active(p) => {
                out.adopt.push(name);
                owned.push(p);
            }
            _ => {}
        }
    }
    let mut live: Vec<&Pod> = owned.iter().copied().filter(|p| active(p)).collect();
    let want = spec.and_then(|s| s.replicas).unwrap_or(1).max(0) as usize;
    if rs.metadata.deletion_timestamp.is_none() {
        if live.len() < want {
            out.create = want - live.len();
        } else if live.len() > want {
            live.sort_by_key(|p| deletion_rank(p));
            out.delete = live[..live.len() - want]
                .iter()
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
        }
    }
    let labels_match = |p: &&&Pod| {
        let tmpl = spec
            .and_then(|s| s.template.as_ref())
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref());
        tmpl.is_none_or(|t| {
            t.iter()
                .all(|(k, v)| p.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
        })
    };
    let readies = live.iter().filter(|p| ready(p)).count() as i32;
    let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let now_s = k8s_openapi::jiff::Timestamp::now().as_second();
    let availables = live
        .iter()
        .filter(|p| available(p, min_ready, now_s))
        .count();
    let status = json!({
        "replicas": live.len(),
        "fullyLabeledReplicas": live.iter().filter(labels_match).count(),
        "readyReplicas": readies,
        "availableReplicas": availables,
        "observedGeneration": rs.metadata.generation.unwrap_or(0),
    });
    let current = serde_json::to_value(rs.status.clone().unwrap_or_default()).unwrap_or_default();
    let same = [
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
        "observedGeneration",
    ]
    .iter()
    .all(|k| {
        current.get(*k).and_then(Value::as_i64).unwrap_or(0) == status[*k].as_i64().unwrap_or(0)
    });
    if !same {
        out.status = Some(status);
    }
    out
}

/// A pod from the ReplicaSet's template, owned by it.
pub fn pod_from(rs: &ReplicaSet) -> Option<Value> {
    let tmpl = rs.spec.as_ref()?.template.as_ref()?;
    owned_pod(tmpl, "apps/v1", "ReplicaSet", &rs.metadata)
}

/// A pod from a workload's `template`, named after and controlled by its owner.
pub fn owned_pod(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
    api_version: &str,
    kind: &str,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<Value> {
    let name = owner.name.as_deref()?;
    let mut pod = serde_json::to_value(template).ok()?;
    let meta = pod
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    meta["generateName"] = format!("{name}-").into();
    meta["namespace"] = owner.namespace.clone().unwrap_or_default().into();
    meta["ownerReferences"] = json!([owner_ref(api_version, kind, owner)]);
    if let Some(m) = meta.as_object_mut() {
        m.remove("name");
    }
    pod["apiVersion"] = "v1".into();
    pod["kind"] = "Pod".into();
    Some(pod)
}

/// A controller owner reference to `meta` (blocking the owner's foreground deletion).
pub fn owner_ref(
    api_version: &str,
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
        "name": meta.name.clone().unwrap_or_default(), "uid": meta.uid.clone().unwrap_or_default(),
        "controller": true, "blockOwnerDeletion": true})
}

#[cfg(test)]
#[path = "replicaset_tests.rs"]
mod tests;
