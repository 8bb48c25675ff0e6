//! The part of kube-controller-manager's PersistentVolume controller a small cluster needs,
//! for pre-provisioned PVs:
//! - a new PV without a claim becomes Available;
//! - a pending claim that binds immediately (no class, or a class without
//!   `WaitForFirstConsumer`) gets the best matching Available PV (`FindMatchingVolume`
//!   without a node, as kube's `syncUnboundClaim`): the PV's `claimRef` names it, with
//!   `pv.kubernetes.io/bound-by-controller`;
//! - a PV whose `claimRef` names an unbound claim (set above, or by the scheduler at
//!   VolumeBinding's PreBind for `WaitForFirstConsumer` claims) completes the binding — the
//!   claim gets `volumeName`, `pv.kubernetes.io/bind-completed` and phase Bound, the PV
//!   phase Bound;
//! - a Bound PV whose claim is gone is Released (`Retain`, `Recycle`) or Failed (`Delete`:
//!   no deleter for pre-provisioned volumes here).
//!
//! Dynamic provisioning is not done.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use super::store::{Change, Filter, Skippable, Store, Stored};
use crate::api::volumes;

fn key(kind: &str) -> (String, String) {
    (String::new(), kind.to_string())
}

fn phase(v: &Value) -> &str {
    v.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Writes `edit` of the object's current version (skipped when it vanished).
fn update(store: &Store, kind: &str, ns: &str, name: &str, edit: impl FnOnce(&mut Value)) -> bool {
    store
        .commit(&key(kind), ns, name, |cur| match cur {
            Some(c) => {
                let mut v = c.value();
                edit(&mut v);
                Ok(Change::Put(v))
            }
            None => Err(Skippable::Skip),
        })
        .is_ok()
}

fn typed<T: serde::de::DeserializeOwned>(items: &[Arc<Stored>]) -> Vec<Arc<T>> {
    let typed = items.iter().map(|i| serde_json::from_value(i.value()));
    typed.filter_map(Result::ok).map(Arc::new).collect()
}

/// Immediate claims get a PV: its `claimRef` is set (the completion follows).
fn match_immediate(store: &Store) {
    let (_, claims) = store.list(&key("persistentvolumeclaims"), &Filter::default());
    let claims: Vec<Arc<PersistentVolumeClaim>> = typed(&claims);
    let waiting = claims.iter().filter(|c| {
        volumes::claim_volume_name(c).is_empty()
            && c.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("Pending")
                == "Pending"
            && c.metadata.deletion_timestamp.is_none()
    });
    let mut waiting = waiting.peekable();
    if waiting.peek().is_none() {
        return;
    }
    let classes_key = ("storage.k8s.io".to_string(), "storageclasses".to_string());
    let (_, classes) = store.list(&classes_key, &Filter::default());
    let classes: HashMap<String, Arc<StorageClass>> = typed::<StorageClass>(&classes)
        .into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
        .collect();
    let (_, pvs) = store.list(&key("persistentvolumes"), &Filter::default());
    let pvs: Vec<Arc<PersistentVolume>> = typed(&pvs);
    let mut taken: Vec<String> = Vec::new();
    for pvc in waiting.filter(|c| !volumes::delay_binding(c, &classes)) {
        let refs: Vec<&str> = taken.iter().map(String::as_str).collect();
        let Some(pv) = volumes::find_matching_volume(pvc, pvs.iter(), None, &refs) else {
            continue;
        };
        let name = pv.metadata.name.clone().unwrap_or_default();
        if let Some(bound) = volumes::bind_volume_to_claim(&pv, pvc) {
            let bound = serde_json::to_value(bound).unwrap_or_default();
            update(store, "persistentvolumes", "", &name, |o| {
                o["spec"]["claimRef"] = bound["spec"]["claimRef"].clone();
                o["metadata"]["annotations"] = bound["metadata"]["annotations"].clone();
            });
        }
        taken.push(name);
    }
}

/// A Bound PV whose claim is gone: kube's phase for its reclaim policy.
fn release(store: &Store, pv: &Stored, v: &Value) {
    let policy = v
        .pointer("/spec/persistentVolumeReclaimPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Retain");
    let name = pv.name.clone();
    update(store, "persistentvolumes", "", &pv.name, |o| {
        if policy == "Delete" {
            o["status"]["phase"] = "Failed".into();
            o["status"]["message"] = format!(
                "error getting deleter volume plugin for volume {name:?}: no deletable volume plugin matched"
            )
            .into();
        } else {
            o["status"]["phase"] = "Released".into();
        }
    });
}

/// One pass over the claims and PVs; returns the claims it bound (`namespace/name`).
pub fn pass(store: &Store) -> Vec<String> {
    match_immediate(store);
    let (_, pvs) = store.list(&key("persistentvolumes"), &Filter::default());
    let mut bound = Vec::new();
    for pv in &pvs {
        let v = pv.value();
        let claim = v.pointer("/spec/claimRef");
        let Some(claim) = claim.filter(|c| c.get("name").is_some()) else {
            if phase(&v) == "Pending" || phase(&v).is_empty() {
                update(store, "persistentvolumes", "", &pv.name, |o| {
                    o["status"]["phase"] = "Available".into();
                });
            }
            continue;
        };
        let ns = claim["namespace"].as_str().unwrap_or("default").to_string();
        let name = claim["name"].as_str().unwrap_or_default().to_string();
        let pvc = store.get(&key("persistentvolumeclaims"), &ns, &name);
        if phase(&v) == "Bound" {
            let uid = claim.get("uid").and_then(Value::as_str).unwrap_or_default();
            if pvc.is_none_or(|c| !uid.is_empty() && c.uid != uid) {
                release(store, pv, &v);
            }
            continue;
        }
        if matches!(phase(&v), "Released" | "Failed") {
            continue;
        }
        let Some(pvc) = pvc else {
            continue;
        };
        let c = pvc.value();
        let volume = c
            .pointer("/spec/volumeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let uid_ok = claim
            .get("uid")
            .and_then(Value::as_str)
            .is_none_or(|u| u.is_empty() || u == pvc.uid);
        if !uid_ok || (!volume.is_empty() && volume != pv.name) {
            continue;
        }
        let modes = v.pointer("/spec/accessModes").cloned().unwrap_or(json!([]));
        let capacity = v.pointer("/spec/capacity").cloned().unwrap_or(json!({}));
        let by_controller = volume.is_empty();
        let done = update(store, "persistentvolumeclaims", &ns, &name, |o| {
            o["spec"]["volumeName"] = pv.name.clone().into();
            let ann = &mut o["metadata"]["annotations"];
            if !ann.is_object() {
                *ann = json!({});
            }
            ann["pv.kubernetes.io/bind-completed"] = "yes".into();
            if by_controller {
                ann["pv.kubernetes.io/bound-by-controller"] = "yes".into();
            }
            o["status"] = json!({"phase": "Bound", "accessModes": modes, "capacity": capacity});
        });
        if done
            && update(store, "persistentvolumes", "", &pv.name, |o| {
                o["status"]["phase"] = "Bound".into();
            })
        {
            tracing::info!(claim = %format!("{ns}/{name}"), pv = %pv.name, "claim bound");
            bound.push(format!("{ns}/{name}"));
        }
    }
    bound
}

/// Runs [`pass`] and the storage protection controllers ([`super::protection::pass`]) every
/// half second until `stop`, when anything was written since the last
/// pass (a pass depends only on what the store holds, so an idle cluster skips it), and at
/// least every 10 s (a write of the pass that failed is retried).
pub async fn run(store: Arc<Store>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let (mut seen, mut skipped) = (None, 0u32);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let rev = store.rev();
        if seen == Some(rev) && skipped < 20 {
            skipped += 1;
            continue;
        }
        (seen, skipped) = (Some(rev), 0);
        pass(&store);
        super::protection::pass(&store);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::store::{StoreError, StoreOptions};

    fn put(s: &Store, kind: &str, ns: &str, name: &str, v: Value) {
        s.commit::<StoreError>(&key(kind), ns, name, |_| Ok(Change::Put(v)))
            .unwrap();
    }

    #[test]
    fn free_volumes_become_available_and_pre_bound_ones_bind_their_claim() {
        let s = Store::temporary(StoreOptions::default()).unwrap();
        put(
            &s,
            "persistentvolumes",
            "",
            "free",
            json!({"metadata": {"name": "free", "uid": "u1"},
            "spec": {"capacity": {"storage": "1Gi"}}, "status": {"phase": "Pending"}}),
        );
        put(
            &s,
            "persistentvolumes",
            "",
            "taken",
            json!({"metadata": {"name": "taken", "uid": "u2"},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                "claimRef": {"name": "data", "namespace": "d", "uid": "c1"}},
            "status": {"phase": "Available"}}),
        );
        put(
            &s,
            "persistentvolumeclaims",
            "d",
            "data",
            json!({"metadata": {"name": "data", "namespace": "d", "uid": "c1"},
            "spec": {}, "status": {"phase": "Pending"}}),
        );
        assert_eq!(pass(&s), ["d/data"]);
        let get = |k: &str, ns: &str, n: &str| s.get(&key(k), ns, n).unwrap().value();
        assert_eq!(phase(&get("persistentvolumes", "", "free")), "Available");
        assert_eq!(phase(&get("persistentvolumes", "", "taken")), "Bound");
        let claim = get("persistentvolumeclaims", "d", "data");
        assert_eq!(claim["spec"]["volumeName"], "taken");
        assert_eq!(
            claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"],
            "yes"
        );
        assert_eq!(claim["status"]["capacity"]["storage"], "5Gi");
        assert!(pass(&s).is_empty(), "nothing left to do");
    }

    #[test]
    fn immediate_claims_get_the_smallest_fit_and_released_volumes_follow_their_policy() {
        let s = Store::temporary(StoreOptions::default()).unwrap();
        let pv = |name: &str, size: &str, policy: &str| {
            json!({"metadata": {"name": name, "uid": format!("u-{name}")},
                "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": policy},
                "status": {"phase": "Available"}})
        };
        put(
            &s,
            "persistentvolumes",
            "",
            "big",
            pv("big", "10Gi", "Retain"),
        );
        put(
            &s,
            "persistentvolumes",
            "",
            "small",
            pv("small", "2Gi", "Delete"),
        );
        put(
            &s,
            "persistentvolumes",
            "",
            "tiny",
            pv("tiny", "1Mi", "Retain"),
        );
        let claim = |name: &str, class: Option<&str>| {
            let mut c = json!({"metadata": {"name": name, "namespace": "d", "uid": format!("c-{name}")},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                "status": {"phase": "Pending"}});
            if let Some(class) = class {
                c["spec"]["storageClassName"] = class.into();
            }
            c
        };
        put(
            &s,
            "persistentvolumeclaims",
            "d",
            "data",
            claim("data", None),
        );
        // A class that waits for the first consumer: the scheduler chooses, not this.
        let sc_key = ("storage.k8s.io".to_string(), "storageclasses".to_string());
        s.commit::<StoreError>(&sc_key, "", "local", |_| {
            Ok(Change::Put(
                json!({"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer"}),
            ))
        })
        .unwrap();
        put(
            &s,
            "persistentvolumeclaims",
            "d",
            "later",
            claim("later", Some("local")),
        );
        assert_eq!(pass(&s), ["d/data"]);
        let get = |k: &str, ns: &str, n: &str| s.get(&key(k), ns, n).unwrap().value();
        let small = get("persistentvolumes", "", "small");
        assert_eq!(phase(&small), "Bound", "the smallest PV large enough");
        assert_eq!(small["spec"]["claimRef"]["uid"], "c-data");
        assert_eq!(
            small["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
            "yes"
        );
        let data = get("persistentvolumeclaims", "d", "data");
        assert_eq!(data["spec"]["volumeName"], "small");
        assert_eq!(phase(&data), "Bound");
        assert_eq!(
            phase(&get("persistentvolumeclaims", "d", "later")),
            "Pending"
        );

        // The claim goes: a Delete volume has no deleter here, so it fails as kube's does.
        s.commit::<StoreError>(&key("persistentvolumeclaims"), "d", "data", |_| {
            Ok(Change::Delete)
        })
        .unwrap();
        pass(&s);
        let small = get("persistentvolumes", "", "small");
        assert_eq!(phase(&small), "Failed");
        assert!(
            small["status"]["message"]
                .as_str()
                .unwrap()
                .contains("no deletable volume plugin")
        );
        assert_eq!(phase(&get("persistentvolumes", "", "big")), "Available");
    }
}
