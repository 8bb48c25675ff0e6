//! What kube-apiserver's strategies and built-in admission do on create and update:
//! metadata bookkeeping, status-subresource rules, pod defaults and priority, pod spec
//! immutability, CRD acceptance.

use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::registry::ResourceInfo;
use super::store::Store;
use crate::api::extension::qos::kube_qos;

pub use crate::api::time::now;

/// The finalizer kube-apiserver puts into every namespace's `spec.finalizers`.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// Whether namespace `ns` exists and is being deleted (nothing new may be created in it).
pub fn namespace_terminating(store: &Store, ns: &str) -> bool {
    let key = (String::new(), "namespaces".to_string());
    store
        .get(&key, "", ns)
        .is_some_and(|n| n.value().pointer("/metadata/deletionTimestamp").is_some())
}

pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// Fills the metadata and status of a new object and applies per-kind defaults.
pub fn prepare_create(info: &ResourceInfo, obj: &mut Value, store: &Store) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let has_spec = obj.get("spec").is_some();
    let meta = meta_mut(obj);
    meta.insert("uid".into(), new_uid().into());
    meta.insert("creationTimestamp".into(), now().into());
    for k in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    ] {
        meta.remove(k);
    }
    if has_spec {
        meta.insert("generation".into(), 1.into());
    }
    if info.has_status()
        && !info.builtin
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "pods") => prepare_pod(info, &name, obj, store)?,
        ("", "namespaces") => {
            obj["status"] = json!({"phase": "Active"});
            if obj.pointer("/spec/finalizers").is_none() {
                obj["spec"]["finalizers"] = json!([NAMESPACE_FINALIZER]);
            }
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            super::crd_lifecycle::accept_crd(info, &name, obj, None)?
        }
        ("", "persistentvolumes" | "persistentvolumeclaims") => {
            super::defaults::storage(&info.resource, obj);
            super::protection::protect(&info.resource, obj);
        }
        ("storage.k8s.io", "storageclasses") => super::defaults::storage(&info.resource, obj),
        ("apps", "deployments" | "daemonsets" | "statefulsets") | ("batch", "jobs") => {
            super::defaults::workload(&info.resource, obj)
        }
        _ => {}
    }
    Ok(())
}

/// Carries over what an update may not change and applies the status-subresource rules.
/// `sub` is `Some("status")` for writes to `/status`.
pub fn prepare_update(
    info: &ResourceInfo,
    old: &Value,
    new: &mut Value,
    sub: Option<&str>,
) -> Result<(), ApiError> {
    let name = old
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !old.is_object() || !new.is_object() {
        return Err(ApiError::invalid(
            info,
            &name,
            "<root>: Invalid value: the object is not a JSON object",
        ));
    }
    if sub == Some("status") {
        let status = new.get("status").cloned();
        let rv = new.pointer("/metadata/resourceVersion").cloned();
        *new = old.clone();
        match status {
            Some(s) => new["status"] = s,
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        if let Some(rv) = rv {
            meta_mut(new).insert("resourceVersion".into(), rv);
        }
        return Ok(());
    }
    if info.has_status() {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
    let old_meta = old.get("metadata").cloned().unwrap_or_default();
    // Without a status subresource, status is part of what the generation counts.
    let spec_changed = if info.has_status() {
        strip_meta_status(old) != strip_meta_status(new)
    } else {
        strip(old, &["metadata"]) != strip(new, &["metadata"])
    };
    let meta = meta_mut(new);
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
    ] {
        match old_meta.get(k) {
            Some(v) => meta.insert(k.into(), v.clone()),
            None => meta.remove(k),
        };
    }
    if let Some(g) = old_meta.get("generation").and_then(Value::as_i64) {
        meta.insert(
            "generation".into(),
            (if spec_changed { g + 1 } else { g }).into(),
        );
    }
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "namespaces") => {
            // spec.finalizers changes only through `finalize`, and only it changes there.
            let finalizers = new.pointer("/spec/finalizers").cloned();
            if sub == Some("finalize") {
                let meta = new.get("metadata").cloned();
                *new = old.clone();
                if let Some(m) = meta.and_then(|m| m.get("resourceVersion").cloned()) {
                    meta_mut(new).insert("resourceVersion".into(), m);
                }
                new["spec"]["finalizers"] = finalizers.unwrap_or_else(|| json!([]));
            } else if let Some(f) = old.pointer("/spec/finalizers") {
                new["spec"]["finalizers"] = f.clone();
            }
            Ok(())
        }
        ("", "pods") => check_pod_spec_update(info, &name, old, new),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            super::crd_lifecycle::accept_crd(info, &name, new, Some(old))
        }
        _ => Ok(()),
    }
}

fn strip_meta_status(v: &Value) -> Value {
    strip(v, &["metadata", "status"])
}

fn strip(v: &Value, keys: &[&str]) -> Value {
    let mut c = v.clone();
    if let Some(o) = c.as_object_mut() {
        for k in keys {
            o.remove(*k);
        }
    }
    c
}

fn prepare_pod(
    info: &ResourceInfo,
    name: &str,
    pod: &mut Value,
    store: &Store,
) -> Result<(), ApiError> {
    let spec = pod
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ApiError::invalid(info, name, "spec: Required value"))?;
    let defaults = [
        ("restartPolicy", json!("Always")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("securityContext", json!({})),
        ("enableServiceLinks", json!(true)),
    ];
    for (k, v) in defaults {
        spec.entry(k).or_insert(v);
    }
    // kube-apiserver (1.27+) turns a negative grace period into 1 s: "now" is 0, and a
    // negative one meant the kubelet killed at once without the pod ever being told.
    if spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|g| g < 0)
    {
        spec.insert("terminationGracePeriodSeconds".into(), 1.into());
    }
    validate_pod_spec(info, name, spec)?;
    super::label_keys::merge_label_keys(pod);
    if let Some(spec) = pod.get("spec").and_then(Value::as_object) {
        super::error::check_causes(info, name, super::label_keys::causes(spec))?;
    }
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    super::sa_admission::admit_pod(&ns, name, pod, store)?;
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    for list in ["containers", "initContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            default_container(c);
        }
    }
    resolve_priority(name, spec, store)?;
    pod["status"] = json!({"phase": "Pending"});
    set_qos_class(pod);
    Ok(())
}

/// The containers' resources, all the QoS class reads (decoding the whole pod, volumes
/// and all, was a tenth of a create).
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct QosSpec {
    containers: Vec<QosContainer>,
    init_containers: Vec<QosContainer>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct QosContainer {
    resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
}

fn set_qos_class(pod: &mut Value) {
    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
    use serde::Deserialize;
    let spec = pod.get("spec").map(QosSpec::deserialize);
    let qos = match spec {
        Some(Ok(s)) => {
            let typed = |list: Vec<QosContainer>| -> Vec<Container> {
                let each = list.into_iter();
                each.map(|c| Container {
                    resources: c.resources,
                    ..Default::default()
                })
                .collect()
            };
            let p = Pod {
                spec: Some(PodSpec {
                    containers: typed(s.containers),
                    init_containers: Some(typed(s.init_containers)),
                    ..Default::default()
                }),
                ..Default::default()
            };
            kube_qos(&p).name()
        }
        _ => "BestEffort",
    };
    if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("qosClass".into(), qos.into());
    }
}

/// What kube-apiserver's strategy does after mutating admission: a pod's QoS class is
/// computed from the admitted spec (a webhook may have moved cpu/memory to batch
/// resources, making it BestEffort).
pub fn after_mutation(info: &ResourceInfo, obj: &mut Value) {
    if info.group.is_empty() && info.resource == "pods" {
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
            status.remove("qosClass");
        }
        set_qos_class(obj);
    }
}

fn validate_pod_spec(
    info: &ResourceInfo,
    name: &str,
    spec: &Map<String, Value>,
) -> Result<(), ApiError> {
    super::error::check_causes(info, name, super::podspec::causes(spec))
}

fn default_container(c: &mut Value) {
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(obj) = c.as_object_mut() else { return };
    let tag = image
        .rsplit('/')
        .next()
        .and_then(|last| last.split_once(':'))
        .map(|(_, t)| t);
    let pull = if image.contains('@') || tag.is_some_and(|t| t != "latest") {
        "IfNotPresent"
    } else {
        "Always"
    };
    obj.entry("imagePullPolicy").or_insert(pull.into());
    obj.entry("terminationMessagePath")
        .or_insert("/dev/termination-log".into());
    obj.entry("terminationMessagePolicy")
        .or_insert("File".into());
    // Requests default to limits, resource by resource.
    if let Some(res) = obj.get_mut("resources").and_then(Value::as_object_mut)
        && let Some(limits) = res.get("limits").and_then(Value::as_object).cloned()
    {
        let requests = res.entry("requests").or_insert_with(|| json!({}));
        if let Some(req) = requests.as_object_mut() {
            for (k, v) in limits {
                req.entry(k).or_insert(v);
            }
        }
    }
}

/// The Priority admission plugin: `priorityClassName` → `priority` and
/// `preemptionPolicy`, or the global default class, or 0.
fn resolve_priority(
    name: &str,
    spec: &mut Map<String, Value>,
    store: &Store,
) -> Result<(), ApiError> {
    let key = (
        "scheduling.k8s.io".to_string(),
        "priorityclasses".to_string(),
    );
    let class_name = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let class = match class_name.as_deref() {
        Some(c) => Some(store.get(&key, "", c).map(|s| s.value()).ok_or_else(|| {
            ApiError::forbidden(format!(
                "pods \"{name}\" is forbidden: no PriorityClass with name {c} was found"
            ))
        })?),
        None => {
            let (_, all) = store.list(&key, &Default::default());
            all.iter()
                .map(|s| s.value())
                .find(|v| v.get("globalDefault") == Some(&Value::Bool(true)))
        }
    };
    let (value, policy) = match &class {
        Some(c) => (
            c.get("value").and_then(Value::as_i64).unwrap_or(0),
            c.get("preemptionPolicy")
                .and_then(Value::as_str)
                .unwrap_or("PreemptLowerPriority")
                .to_string(),
        ),
        None => (0, "PreemptLowerPriority".to_string()),
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != value
    {
        return Err(ApiError::forbidden(format!(
            "pods \"{name}\" is forbidden: the integer value of priority ({given}) must not be provided in pod spec; \
             priority admission controller computed {value} from the given PriorityClass name"
        )));
    }
    spec.insert("priority".into(), value.into());
    if let Some(c) = &class
        && class_name.is_none()
        && let Some(n) = c.pointer("/metadata/name")
    {
        spec.insert("priorityClassName".into(), n.clone());
    }
    spec.entry("preemptionPolicy").or_insert(policy.into());
    Ok(())
}

/// Pod specs are immutable but for images, activeDeadlineSeconds, tolerations,
/// schedulingGates and terminationGracePeriodSeconds.
fn check_pod_spec_update(
    info: &ResourceInfo,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let mask = |v: &Value| -> Value {
        let mut s = v.get("spec").cloned().unwrap_or_default();
        if let Some(o) = s.as_object_mut() {
            for k in [
                "activeDeadlineSeconds",
                "tolerations",
                "schedulingGates",
                "terminationGracePeriodSeconds",
            ] {
                o.remove(k);
            }
            for list in ["containers", "initContainers"] {
                for c in o
                    .get_mut(list)
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
        s
    };
    if mask(old) == mask(new) {
        return Ok(());
    }
    Err(ApiError::invalid(
        info,
        name,
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`, \
         `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to \
         existing tolerations), `spec.terminationGracePeriodSeconds`, `spec.schedulingGates`",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;
    use crate::apiserver::store::{Change, StoreError, StoreOptions};

    fn pods() -> ResourceInfo {
        (*Registry::with_builtins().get("", "pods").unwrap()).clone()
    }

    fn store_with_class() -> Store {
        let s = Store::temporary(StoreOptions::default()).unwrap();
        let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "koord-batch"}, "value": 5000});
        s.commit::<StoreError>(
            &("scheduling.k8s.io".into(), "priorityclasses".into()),
            "",
            "koord-batch",
            |_| Ok(Change::Put(pc)),
        )
        .unwrap();
        s
    }

    #[test]
    fn pod_defaults_priority_and_status() {
        let s = store_with_class();
        let mut pod = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {
            "priorityClassName": "koord-batch",
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        prepare_create(&pods(), &mut pod, &s).unwrap();
        assert_eq!(pod["spec"]["priority"], 5000);
        assert_eq!(pod["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "1"
        );
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        assert_eq!(pod["metadata"]["generation"], 1);
        assert!(pod["metadata"]["uid"].as_str().unwrap().len() == 36);
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 30);
        let mut negative = json!({"metadata": {"name": "n", "namespace": "default"}, "spec": {
            "terminationGracePeriodSeconds": -5, "containers": [{"name": "c", "image": "busybox"}]}});
        prepare_create(&pods(), &mut negative, &s).unwrap();
        assert_eq!(
            negative["spec"]["terminationGracePeriodSeconds"], 1,
            "as kube 1.27+"
        );
    }

    #[test]
    fn pod_priority_rules() {
        let s = store_with_class();
        let mut missing = json!({"metadata": {"name": "p"}, "spec": {"priorityClassName": "nope", "containers": [{"name": "c", "image": "i"}]}});
        let err = prepare_create(&pods(), &mut missing, &s).unwrap_err();
        assert_eq!(err.code, 403);
        let mut mismatch = json!({"metadata": {"name": "p"}, "spec": {"priority": 7, "containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(
            prepare_create(&pods(), &mut mismatch, &s).unwrap_err().code,
            403
        );
        let mut no_image =
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        let err = prepare_create(&pods(), &mut no_image, &s).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(err.message.contains("image"), "{}", err.message);
    }

    #[test]
    fn updates_keep_status_and_immutable_fields() {
        let info = pods();
        let old = json!({"metadata": {"name": "p", "uid": "u1", "generation": 1}, "spec": {"nodeName": "", "containers": [{"name": "c", "image": "a"}]}, "status": {"phase": "Running"}});
        let mut new = json!({"metadata": {"name": "p", "uid": "u2", "labels": {"x": "y"}}, "spec": {"containers": [{"name": "c", "image": "b"}], "nodeName": ""}, "status": {"phase": "Failed"}});
        prepare_update(&info, &old, &mut new, None).unwrap();
        assert_eq!(new["metadata"]["uid"], "u1");
        assert_eq!(
            new["status"]["phase"], "Running",
            "main resource writes ignore status"
        );
        assert_eq!(new["metadata"]["generation"], 2);
        let mut status_write = json!({"metadata": {"name": "p", "labels": {"ignored": "1"}}, "status": {"phase": "Succeeded"}});
        prepare_update(&info, &old, &mut status_write, Some("status")).unwrap();
        assert_eq!(status_write["status"]["phase"], "Succeeded");
        assert!(
            status_write["metadata"].get("labels").is_none(),
            "status writes ignore metadata"
        );
        let mut rebind = old.clone();
        rebind["spec"]["nodeName"] = "n1".into();
        assert_eq!(
            prepare_update(&info, &old, &mut rebind, None)
                .unwrap_err()
                .code,
            422
        );
    }
}
