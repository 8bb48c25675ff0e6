//! The part of kube-controller-manager's PersistentVolume controller a small cluster needs:
//! a new PV without a claim becomes Available, and a PV whose `claimRef` names an unbound
//! claim (the scheduler pre-binds one at VolumeBinding's PreBind) completes the binding —
//! the claim gets `volumeName`, `pv.kubernetes.io/bind-completed` and phase Bound, the PV
//! phase Bound. Without it, `--embedded` pods with `WaitForFirstConsumer` claims would wait
//! at PreBind for ever. Dynamic provisioning is not done.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::store::{Change, Filter, Skippable, Store};

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

/// One pass over the PVs; returns the claims it bound (`namespace/name`).
pub fn pass(store: &Store) -> Vec<String> {
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
        if phase(&v) == "Bound" {
            continue;
        }
        let ns = claim["namespace"].as_str().unwrap_or("default").to_string();
        let name = claim["name"].as_str().unwrap_or_default().to_string();
        let Some(pvc) = store.get(&key("persistentvolumeclaims"), &ns, &name) else {
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

/// Runs [`pass`] every half second until `stop`.
pub async fn run(store: Arc<Store>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        pass(&store);
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
}
