//! A CRD's life after its DELETE, as kube's apiextensions-apiserver keeps it: the
//! `customresourcecleanup.apiextensions.k8s.io` finalizer, the `Terminating` condition,
//! and no new instances meanwhile. The cleanup controller (`crd_cleanup`) does the rest.

use serde_json::{Value, json};

use super::error::ApiError;
use super::registry::{ResourceInfo, from_crd};
use super::store::Store;
use crate::api::time::now;

pub const FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub(crate) fn crd_key() -> (String, String) {
    (
        "apiextensions.k8s.io".to_string(),
        "customresourcedefinitions".to_string(),
    )
}

/// Sets the `Terminating` condition, keeping its transition time when the status holds.
pub(crate) fn set_terminating(crd: &mut Value, status: &str, reason: &str, message: &str) {
    if !crd["status"].is_object() {
        crd["status"] = json!({});
    }
    let conds = &mut crd["status"]["conditions"];
    if !conds.is_array() {
        *conds = json!([]);
    }
    let Some(list) = conds.as_array_mut() else {
        return;
    };
    let at = list
        .iter()
        .find(|c| c["type"] == "Terminating" && c["status"] == status)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| now().into());
    list.retain(|c| c["type"] != "Terminating");
    list.push(
        json!({"type": "Terminating", "status": status, "reason": reason,
        "message": message, "lastTransitionTime": at}),
    );
}

/// What a DELETE of a CRD writes: the deletion mark, the cleanup finalizer and the
/// pending condition (a CRD already terminating stays as it is).
pub fn mark_deleted(cur: &Value) -> Value {
    let mut v = cur.clone();
    if cur.pointer("/metadata/deletionTimestamp").is_some() {
        return v;
    }
    v["metadata"]["deletionTimestamp"] = now().into();
    v["metadata"]["deletionGracePeriodSeconds"] = 0.into();
    if !v["metadata"]["finalizers"].is_array() {
        v["metadata"]["finalizers"] = json!([]);
    }
    if let Some(f) = v["metadata"]["finalizers"].as_array_mut()
        && !f.iter().any(|x| x == FINALIZER)
    {
        f.push(FINALIZER.into());
    }
    set_terminating(
        &mut v,
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    );
    v
}

/// The CRD serving `group`/`resource` is being deleted: creates are refused (kube: 405).
pub fn terminating(store: &Store, group: &str, resource: &str) -> bool {
    store
        .get(&crd_key(), "", &format!("{resource}.{group}"))
        .is_some_and(|c| c.value().pointer("/metadata/deletionTimestamp").is_some())
}

/// A CRD is served only with a structural schema and one storage version; every version
/// ever stored stays in `status.storedVersions`.
pub(crate) fn accept_crd(
    info: &ResourceInfo,
    name: &str,
    crd: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let served = from_crd(crd).map_err(|e| ApiError::invalid(info, name, e.to_string()))?;
    super::error::check_causes(info, name, super::schema::check_crd(crd, old))?;
    let ts = now();
    let mut storage: Vec<String> = old
        .and_then(|o| o.pointer("/status/storedVersions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if let Some(s) = served.versions.first()
        && !storage.contains(s)
    {
        storage.push(s.clone());
    }
    let terminating = old
        .and_then(|o| o.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Terminating").cloned());
    crd["status"] = json!({
        "acceptedNames": crd.pointer("/spec/names").cloned().unwrap_or_default(),
        "storedVersions": storage,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": ts},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": ts},
        ]
    });
    if let (Some(t), Some(c)) = (terminating, crd["status"]["conditions"].as_array_mut()) {
        c.push(t);
    }
    Ok(())
}
