//! Storage object in-use protection, as kube does it in three parts: the
//! `StorageObjectInUseProtection` admission plugin puts `kubernetes.io/pvc-protection` on
//! every new claim and `kubernetes.io/pv-protection` on every new volume; the
//! pvc-protection controller takes the claim's off once it is being deleted and no pod
//! uses it; the pv-protection controller takes the volume's off once it is being deleted
//! and not Bound. Until then a deleted claim or volume stays, with its
//! `deletionTimestamp`, as `kubectl delete pvc` shows in a cluster ("Terminating").
//! Here the API server does all three itself (it runs the PV binder too), so they work
//! whether or not koord's workload controllers run.

use serde_json::{Value, json};

use super::store::{Change, Filter, Skippable, Store, Stored};

pub const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_FINALIZER: &str = "kubernetes.io/pv-protection";

fn key(kind: &str) -> (String, String) {
    (String::new(), kind.to_string())
}

fn finalizer_of(resource: &str) -> Option<&'static str> {
    match resource {
        "persistentvolumeclaims" => Some(PVC_FINALIZER),
        "persistentvolumes" => Some(PV_FINALIZER),
        _ => None,
    }
}

fn has(obj: &Value, finalizer: &str) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// The admission plugin: a new claim or volume gets its protection finalizer.
pub fn protect(resource: &str, obj: &mut Value) {
    let Some(f) = finalizer_of(resource) else {
        return;
    };
    if has(obj, f) {
        return;
    }
    match obj
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    {
        Some(list) => list.push(json!(f)),
        None => obj["metadata"]["finalizers"] = json!([f]),
    }
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// kube's `podIsShutDown`: deleted with no grace left (the kubelet is done, or forced).
fn pod_is_shut_down(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_some()
        && pod.pointer("/metadata/deletionGracePeriodSeconds") == Some(&json!(0))
}

/// kube's `podUsesPVC`: a scheduled pod whose volume names the claim, or whose generic
/// ephemeral volume is this claim (named `<pod>-<volume>`, controlled by the pod) and the
/// pod is not shut down.
pub fn pod_uses_claim(pod: &Value, claim: &Value) -> bool {
    if str_at(pod, "/spec/nodeName").is_empty() {
        return false;
    }
    let name = str_at(claim, "/metadata/name");
    let pod_name = str_at(pod, "/metadata/name");
    let pod_uid = str_at(pod, "/metadata/uid");
    let for_pod = || {
        let owners = claim
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array);
        owners
            .into_iter()
            .flatten()
            .any(|o| o.get("controller") == Some(&json!(true)) && str_at(o, "/uid") == pod_uid)
    };
    let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array);
    volumes.into_iter().flatten().any(|v| {
        let direct = str_at(v, "/persistentVolumeClaim/claimName") == name;
        let ephemeral = v.get("ephemeral").is_some()
            && format!("{pod_name}-{}", str_at(v, "/name")) == name
            && !pod_is_shut_down(pod)
            && for_pod();
        direct || ephemeral
    })
}

/// The pv-protection controller's test: a Bound volume is in use.
pub fn volume_in_use(pv: &Value) -> bool {
    pv.pointer("/status/phase").and_then(Value::as_str) == Some("Bound")
}

/// Writes the object without `finalizer` (or with it added), deleting it when it was being
/// deleted and nothing else holds it.
fn set_finalizer(store: &Store, resource: &str, item: &Stored, finalizer: &str, on: bool) -> bool {
    store
        .commit(&key(resource), &item.namespace, &item.name, |cur| {
            let Some(cur) = cur.filter(|c| c.uid == item.uid) else {
                return Err(Skippable::Skip);
            };
            let mut v = cur.value();
            let mut list: Vec<Value> = v
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            list.retain(|f| f != finalizer);
            if on {
                list.push(json!(finalizer));
            }
            let deleting = v.pointer("/metadata/deletionTimestamp").is_some();
            if !on && deleting && list.is_empty() {
                return Ok(Change::Delete);
            }
            v["metadata"]["finalizers"] = json!(list);
            Ok(Change::Put(v))
        })
        .is_ok()
}

/// One pass of both controllers; returns what it released (`resource namespace/name`).
/// A live object without its finalizer (stored before this) gets it, as kube's
/// controllers add it.
pub fn pass(store: &Store) -> Vec<String> {
    let mut released = Vec::new();
    let mut pods: Option<Vec<Value>> = None;
    for (resource, f) in [
        ("persistentvolumeclaims", PVC_FINALIZER),
        ("persistentvolumes", PV_FINALIZER),
    ] {
        let (_, items) = store.list(&key(resource), &Filter::default());
        for item in &items {
            let v = item.value();
            let deleting = v.pointer("/metadata/deletionTimestamp").is_some();
            if !deleting {
                if !has(&v, f) {
                    set_finalizer(store, resource, item, f, true);
                }
                continue;
            }
            if !has(&v, f) {
                continue;
            }
            let in_use = if resource == "persistentvolumes" {
                volume_in_use(&v)
            } else {
                let pods = pods.get_or_insert_with(|| {
                    let (_, all) = store.list(&key("pods"), &Filter::default());
                    all.iter().map(|p| p.value()).collect()
                });
                let ns = &item.namespace;
                pods.iter()
                    .filter(|p| {
                        p.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)
                    })
                    .any(|p| pod_uses_claim(p, &v))
            };
            if !in_use && set_finalizer(store, resource, item, f, false) {
                tracing::info!(resource, object = %format!("{}/{}", item.namespace, item.name), "no longer in use: protection finalizer removed");
                released.push(format!("{resource} {}/{}", item.namespace, item.name));
            }
        }
    }
    released
}

#[cfg(test)]
#[path = "protection_tests.rs"]
mod tests;
