//! kube-apiserver's `ServiceAccount` admission plugin, on pod create: the pod runs as
//! `spec.serviceAccountName` (`default` when unset), which must exist, and — unless the pod
//! or its ServiceAccount turns `automountServiceAccountToken` off — every container mounts
//! a `kube-api-access-<suffix>` projected volume (a bound token, the cluster's CA from the
//! `kube-root-ca.crt` ConfigMap, the namespace) at
//! `/var/run/secrets/kubernetes.io/serviceaccount`, read-only. The node runtime fills it.

use serde_json::{Value, json};

use super::error::ApiError;
use super::store::Store;

pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// Where clients look for the in-cluster credentials.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
pub const VOLUME_PREFIX: &str = "kube-api-access-";
/// The ConfigMap kube's root CA publisher keeps in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// One hour, plus kube's 7 s that marks a token the kubelet will refresh in time.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The alphabet of kube's generated names (no vowels, no look-alikes).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The admission of `pod` (named `name`) into namespace `ns`.
pub fn admit_pod(ns: &str, name: &str, pod: &mut Value, store: &Store) -> Result<(), ApiError> {
    let mirror = pod
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some();
    if mirror {
        return Ok(());
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let sa_name = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => DEFAULT_SERVICE_ACCOUNT.to_string(),
    };
    spec.insert("serviceAccountName".into(), sa_name.clone().into());
    spec.insert("serviceAccount".into(), sa_name.clone().into());
    let key = (String::new(), "serviceaccounts".to_string());
    let sa = store.get(&key, ns, &sa_name).map(|s| s.value());
    // kube retries the lookup of `default` for a while, as its controller creates it right
    // after the namespace; koord's controller runs in this process, so it is taken as
    // there (with no opinion on automounting).
    if sa.is_none() && sa_name != DEFAULT_SERVICE_ACCOUNT {
        return Err(ApiError::forbidden(format!(
            "pods \"{name}\" is forbidden: error looking up service account {ns}/{sa_name}: serviceaccount \"{sa_name}\" not found"
        )));
    }
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            sa.as_ref()
                .and_then(|s| s.get("automountServiceAccountToken"))
                .and_then(Value::as_bool)
        })
        .unwrap_or(true);
    if automount {
        mount_token(spec);
    }
    Ok(())
}

fn mount_token(spec: &mut serde_json::Map<String, Value>) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .find(|n| n.starts_with(VOLUME_PREFIX))
        .map(str::to_string);
    let volume = existing.clone().unwrap_or_else(volume_name);
    let mount = json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        let containers = spec.get_mut(list).and_then(Value::as_array_mut);
        for c in containers.into_iter().flatten() {
            let mounts = &mut c["volumeMounts"];
            let taken = mounts
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH));
            if taken {
                continue;
            }
            if !mounts.is_array() {
                *mounts = json!([]);
            }
            if let Some(m) = mounts.as_array_mut() {
                m.push(mount.clone());
            }
            needed = true;
        }
    }
    if needed && existing.is_none() {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if !volumes.is_array() {
            *volumes = json!([]);
        }
        if let Some(v) = volumes.as_array_mut() {
            v.push(token_volume(&volume));
        }
    }
}

/// The volume kube's plugin adds: token, CA and namespace, files mode 0644.
pub fn token_volume(name: &str) -> Value {
    json!({"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
        {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
    ]}})
}

fn volume_name() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let suffix: String = bytes[..5]
        .iter()
        .map(|b| NAME_ALPHABET[*b as usize % NAME_ALPHABET.len()] as char)
        .collect();
    format!("{VOLUME_PREFIX}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::store::{Change, StoreError, StoreOptions};

    fn store_with_sa(name: &str, automount: Option<bool>) -> Store {
        let s = Store::temporary(StoreOptions::default()).unwrap();
        let mut sa = json!({"metadata": {"name": name, "namespace": "ns"}});
        if let Some(a) = automount {
            sa["automountServiceAccountToken"] = a.into();
        }
        let key = (String::new(), "serviceaccounts".to_string());
        s.commit::<StoreError>(&key, "ns", name, |_| Ok(Change::Put(sa)))
            .unwrap();
        s.settle().unwrap();
        s
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
    }

    fn mounts(p: &Value, list: &str, i: usize) -> Vec<Value> {
        p["spec"][list][i]["volumeMounts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    // Names from kube's plugin/pkg/admission/serviceaccount/admission_test.go.
    #[test]
    fn assigns_default_service_account() {
        let s = store_with_sa("default", None);
        let mut p = pod(json!({"containers": [{"name": "c"}]}));
        admit_pod("ns", "p", &mut p, &s).unwrap();
        assert_eq!(p["spec"]["serviceAccountName"], "default");
        assert_eq!(p["spec"]["serviceAccount"], "default");
    }

    #[test]
    fn fetches_uncached_service_account() {
        let s = Store::temporary(StoreOptions::default()).unwrap();
        let mut p = pod(json!({"serviceAccountName": "missing", "containers": [{"name": "c"}]}));
        let e = admit_pod("ns", "p", &mut p, &s).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "pods \"p\" is forbidden: error looking up service account ns/missing: serviceaccount \"missing\" not found"
        );
    }

    #[test]
    fn automounts_api_token() {
        let s = store_with_sa("default", None);
        let mut p = pod(json!({"initContainers": [{"name": "i"}], "containers": [{"name": "c"}]}));
        admit_pod("ns", "p", &mut p, &s).unwrap();
        let vols = p["spec"]["volumes"].as_array().unwrap();
        assert_eq!(vols.len(), 1);
        let name = vols[0]["name"].as_str().unwrap();
        assert!(name.starts_with(VOLUME_PREFIX) && name.len() == VOLUME_PREFIX.len() + 5);
        assert_eq!(vols[0], token_volume(name));
        let want = json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
        assert_eq!(mounts(&p, "containers", 0), vec![want.clone()]);
        assert_eq!(mounts(&p, "initContainers", 0), vec![want]);
    }

    #[test]
    fn respects_existing_mount() {
        let s = store_with_sa("default", None);
        let own = json!({"name": "mine", "mountPath": TOKEN_MOUNT_PATH});
        let mut p = pod(
            json!({"containers": [{"name": "c", "volumeMounts": [own.clone()]}],
            "volumes": [{"name": "mine", "emptyDir": {}}]}),
        );
        admit_pod("ns", "p", &mut p, &s).unwrap();
        assert_eq!(mounts(&p, "containers", 0), vec![own]);
        assert_eq!(p["spec"]["volumes"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn automount_is_off_where_the_pod_or_its_service_account_says_so() {
        let off = store_with_sa("default", Some(false));
        let mut p = pod(json!({"containers": [{"name": "c"}]}));
        admit_pod("ns", "p", &mut p, &off).unwrap();
        assert!(p["spec"].get("volumes").is_none());
        // The pod's preference wins over its ServiceAccount's.
        let mut p =
            pod(json!({"automountServiceAccountToken": true, "containers": [{"name": "c"}]}));
        admit_pod("ns", "p", &mut p, &off).unwrap();
        assert_eq!(p["spec"]["volumes"].as_array().unwrap().len(), 1);
        let on = store_with_sa("default", Some(true));
        let mut p =
            pod(json!({"automountServiceAccountToken": false, "containers": [{"name": "c"}]}));
        admit_pod("ns", "p", &mut p, &on).unwrap();
        assert!(mounts(&p, "containers", 0).is_empty());
    }

    #[test]
    fn ignores_mirror_pods() {
        let s = Store::temporary(StoreOptions::default()).unwrap();
        let mut p = pod(json!({"serviceAccountName": "missing", "containers": [{"name": "c"}]}));
        p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
        admit_pod("ns", "p", &mut p, &s).unwrap();
        assert!(p["spec"].get("volumes").is_none());
    }
}
