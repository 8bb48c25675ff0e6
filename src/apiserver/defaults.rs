//! kube-apiserver's defaulting of the objects the embedded controllers and kubectl read
//! (`pkg/apis/*/v1/defaults.go`): storage objects, and the apps/batch workloads' strategies
//! and limits (`kubectl rollout status` refuses a DaemonSet without `updateStrategy`).

use serde_json::{Value, json};

/// Sets `path` to `v` unless a value is there.
fn set(obj: &mut Value, path: &[&str], v: Value) {
    let mut at = &mut *obj;
    for p in &path[..path.len() - 1] {
        if !at.get(*p).is_some_and(Value::is_object) {
            at[*p] = json!({});
        }
        at = &mut at[*p];
    }
    let last = path[path.len() - 1];
    if at.get(last).is_none_or(Value::is_null) {
        at[last] = v;
    }
}

/// A class binds Immediate and deletes; PVs retain; both PVs and claims are Filesystem
/// volumes and start Pending.
pub fn storage(resource: &str, obj: &mut Value) {
    match resource {
        "storageclasses" => {
            set(obj, &["reclaimPolicy"], "Delete".into());
            set(obj, &["volumeBindingMode"], "Immediate".into());
        }
        "persistentvolumes" => {
            set(
                obj,
                &["spec", "persistentVolumeReclaimPolicy"],
                "Retain".into(),
            );
            set(obj, &["spec", "volumeMode"], "Filesystem".into());
            set(obj, &["status", "phase"], "Pending".into());
        }
        _ => {
            set(obj, &["spec", "volumeMode"], "Filesystem".into());
            set(obj, &["status", "phase"], "Pending".into());
        }
    }
}

/// apps/v1 Deployment, DaemonSet and StatefulSet, batch/v1 Job.
pub fn workload(resource: &str, obj: &mut Value) {
    match resource {
        "deployments" => {
            set(obj, &["spec", "replicas"], 1.into());
            set(obj, &["spec", "revisionHistoryLimit"], 10.into());
            set(obj, &["spec", "progressDeadlineSeconds"], 600.into());
            set(obj, &["spec", "strategy", "type"], "RollingUpdate".into());
            if obj.pointer("/spec/strategy/type") == Some(&json!("RollingUpdate")) {
                set(
                    obj,
                    &["spec", "strategy", "rollingUpdate", "maxSurge"],
                    "25%".into(),
                );
                set(
                    obj,
                    &["spec", "strategy", "rollingUpdate", "maxUnavailable"],
                    "25%".into(),
                );
            }
        }
        "daemonsets" => {
            set(obj, &["spec", "revisionHistoryLimit"], 10.into());
            set(
                obj,
                &["spec", "updateStrategy", "type"],
                "RollingUpdate".into(),
            );
            if obj.pointer("/spec/updateStrategy/type") == Some(&json!("RollingUpdate")) {
                let ru = ["spec", "updateStrategy", "rollingUpdate"];
                set(obj, &[ru[0], ru[1], ru[2], "maxUnavailable"], 1.into());
                set(obj, &[ru[0], ru[1], ru[2], "maxSurge"], 0.into());
            }
        }
        "statefulsets" => {
            set(obj, &["spec", "replicas"], 1.into());
            set(obj, &["spec", "revisionHistoryLimit"], 10.into());
            set(obj, &["spec", "podManagementPolicy"], "OrderedReady".into());
            set(
                obj,
                &["spec", "updateStrategy", "type"],
                "RollingUpdate".into(),
            );
            if obj.pointer("/spec/updateStrategy/type") == Some(&json!("RollingUpdate")) {
                let ru = ["spec", "updateStrategy", "rollingUpdate", "partition"];
                set(obj, &ru, 0.into());
            }
            let policy = ["spec", "persistentVolumeClaimRetentionPolicy"];
            set(obj, &[policy[0], policy[1], "whenDeleted"], "Retain".into());
            set(obj, &[policy[0], policy[1], "whenScaled"], "Retain".into());
            let templates = obj.pointer_mut("/spec/volumeClaimTemplates");
            for t in templates
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                storage("persistentvolumeclaims", t);
            }
        }
        "jobs" => {
            // Neither set: one pod to one completion; parallelism alone: a work queue.
            let unset = |obj: &Value, k: &str| obj.pointer(k).is_none_or(Value::is_null);
            if unset(obj, "/spec/completions") && unset(obj, "/spec/parallelism") {
                set(obj, &["spec", "completions"], 1.into());
            }
            set(obj, &["spec", "parallelism"], 1.into());
            set(obj, &["spec", "backoffLimit"], 6.into());
            set(obj, &["spec", "completionMode"], "NonIndexed".into());
            set(obj, &["spec", "suspend"], false.into());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_get_kubes_defaults_and_keep_what_is_set() {
        let mut d = json!({"spec": {"strategy": {"type": "Recreate"}}});
        workload("deployments", &mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert!(d["spec"]["strategy"].get("rollingUpdate").is_none());
        let mut ds = json!({"spec": {}});
        workload("daemonsets", &mut ds);
        assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
        assert_eq!(
            ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
            1
        );
        let mut j = json!({"spec": {}});
        workload("jobs", &mut j);
        assert_eq!(
            (
                j["spec"]["completions"].clone(),
                j["spec"]["backoffLimit"].clone()
            ),
            (json!(1), json!(6))
        );
        let mut sts =
            json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]}});
        workload("statefulsets", &mut sts);
        assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
            0
        );
        assert_eq!(
            sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"],
            "Retain"
        );
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        let mut pv = json!({"spec": {}});
        storage("persistentvolumes", &mut pv);
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    }
}
