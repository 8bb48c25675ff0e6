//! `/mutate-pod`: ClusterColocationProfile, then ExtendedResourceSpec and
//! DeviceResourceSpec (`pkg/webhook/pod/mutating/`). Create only; update is a no-op.

use crate::api::field::FieldError;
use crate::manager::features;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value, json};

use super::Handlers;
use super::json::{self as j};
use super::review::{Operation, Request, Verdict};
use crate::api::config::ClusterColocationProfile;
use crate::api::extension::keys::*;
use crate::api::extension::priority::translate;
use crate::api::extension::priority::{PriorityClass, pod_priority_class};
use crate::api::extension::resources as res;
use crate::api::patch::{PatchType, apply};
use crate::api::quantity;
use crate::api::selector::Selector;

pub fn handle(h: &Handlers, req: &Request) -> Verdict {
    if req.operation != Operation::Create {
        return Verdict::Allow;
    }
    let Some(original) = req.object.as_ref() else {
        return Verdict::deny("pod create without an object");
    };
    if let Err(e) = serde_json::from_value::<Pod>(original.clone()) {
        return Verdict::deny(format!("decoding the pod: {e}"));
    }
    let mut pod = original.clone();
    match mutate(h, req, &mut pod) {
        Ok(()) => Verdict::patched(original, &pod),
        Err(v) => v,
    }
}

/// All sub-steps in Koordinator's order.
pub fn mutate(h: &Handlers, req: &Request, pod: &mut Value) -> Result<(), Verdict> {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(&req.namespace)
        .to_string();
    apply_profiles(h, &ns, pod)?;
    if !h.gates.on(features::DISABLE_EXTENDED_RESOURCE_SPEC) {
        extended_resource_spec(pod)?;
    }
    if !h.gates.on(features::DISABLE_DEVICE_RESOURCE_SPEC) {
        device_resource_spec(pod);
    }
    if req.operation == Operation::Create && h.gates.on(features::MULTI_QUOTA_TREE) {
        super::quota::tree_affinity::add(h, pod, &ns);
    }
    Ok(())
}

pub fn selector_matches(
    sel: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> bool {
    let Some(sel) = sel else { return true };
    match Selector::from_label_selector(sel) {
        // Koordinator's quirk: a selector that does not parse counts as a match.
        Err(_) => true,
        Ok(s) if s.is_empty() => true,
        Ok(s) => labels.is_none_or(|l| s.matches(l)),
    }
}

/// Profiles whose namespace and object selectors match, by name.
pub fn matching_profiles(
    h: &Handlers,
    ns: &str,
    pod: &Value,
) -> Vec<std::sync::Arc<ClusterColocationProfile>> {
    let pod_labels = j::labels(pod);
    let ns_labels = h.lookup.namespace_labels(ns);
    let mut out: Vec<_> = h
        .lookup
        .profiles()
        .into_iter()
        .filter(|p| {
            // An unknown namespace is Koordinator's failed GET: counts as a match.
            selector_matches(p.spec.namespace_selector.as_ref(), ns_labels.as_ref())
                && selector_matches(p.spec.selector.as_ref(), Some(&pod_labels))
        })
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// `probability` scaled to 100: `None` is 100, `"30%"` is 30, `30` is 30.
pub fn probability(p: Option<&IntOrString>) -> Result<i64, FieldError> {
    match p {
        None => Ok(100),
        Some(IntOrString::Int(i)) => Ok(*i as i64),
        Some(IntOrString::String(s)) => s
            .strip_suffix('%')
            .and_then(|n| n.trim().parse::<i64>().ok())
            .ok_or_else(|| {
                FieldError::new(
                    "probability",
                    format!("{s:?} is neither an integer nor a percentage"),
                )
            }),
    }
}

/// Whether the profile applies this time, by its `probability` (Koordinator: skipped when
/// the roll in [0, 100) is above it).
pub fn rolls_in(h: &Handlers, p: &ClusterColocationProfile) -> Result<bool, Verdict> {
    let name = p.metadata.name.as_deref().unwrap_or("");
    let percent = probability(p.spec.probability.as_ref()).map_err(|e| {
        let e = e
            .under("spec")
            .within(format!("ClusterColocationProfile {name}"));
        Verdict::internal(e.to_string())
    })?;
    Ok(!(percent <= 0 || (percent < 100 && i64::from((h.roll)() % 100) > percent)))
}

fn apply_profiles(h: &Handlers, ns: &str, pod: &mut Value) -> Result<(), Verdict> {
    let profiles = matching_profiles(h, ns, pod);
    if profiles.is_empty() {
        return Ok(());
    }
    let mut skip_resources = h
        .gates
        .on(features::COLOCATION_PROFILE_SKIP_MUTATING_RESOURCES);
    for p in &profiles {
        skip_resources |= p
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANNOTATION_SKIP_UPDATE_RESOURCES));
        if rolls_in(h, p)? {
            apply_profile(p, pod, Some((h, &["spec"])))?;
        }
    }
    if !skip_resources {
        let class = serde_json::from_value::<Pod>(pod.clone())
            .map(|p| pod_priority_class(&p))
            .unwrap_or(PriorityClass::None);
        translate_resources(pod, class);
    }
    Ok(())
}

fn malformed() -> Verdict {
    Verdict::deny("pod metadata is malformed")
}

/// One profile onto an object: its metadata, and — with `scheduling`, at the spec path
/// given when present (a pod's `spec`, a Reservation's `spec.template.spec`) — the
/// scheduler name and priority (the webhooks; the colocationprofile controller leaves
/// them alone, as Koordinator's).
pub fn apply_profile(
    p: &ClusterColocationProfile,
    pod: &mut Value,
    scheduling: Option<(&Handlers, &[&str])>,
) -> Result<(), Verdict> {
    let spec = &p.spec;
    let name = p.metadata.name.as_deref().unwrap_or("");
    {
        let labels = j::path(pod, &["metadata", "labels"]).ok_or_else(malformed)?;
        for (k, v) in spec.labels.iter().flatten() {
            labels.insert(k.clone(), v.clone().into());
        }
    }
    {
        let ann = j::path(pod, &["metadata", "annotations"]).ok_or_else(malformed)?;
        for (k, v) in spec.annotations.iter().flatten() {
            ann.insert(k.clone(), v.clone().into());
        }
    }
    map_keys(pod, "labels", spec.label_keys_mapping.as_ref())?;
    map_keys(pod, "annotations", spec.annotation_keys_mapping.as_ref())?;
    if let Some(suffixes) = &spec.label_suffixes {
        let labels = j::path(pod, &["metadata", "labels"]).ok_or_else(malformed)?;
        for (k, suffix) in suffixes {
            if let Some(Value::String(v)) = labels.get_mut(k) {
                v.push_str(suffix);
            }
        }
    }
    if let Some((h, at)) = scheduling {
        set_scheduling(h, p, pod, at)?;
    }
    let labels = j::path(pod, &["metadata", "labels"]).ok_or_else(malformed)?;
    if let Some(q) = spec.qos_class.as_deref().filter(|s| !s.is_empty()) {
        labels.insert(LABEL_POD_QOS.into(), q.into());
    }
    if let Some(prio) = spec.koordinator_priority {
        labels.insert(LABEL_POD_PRIORITY.into(), prio.to_string().into());
    }
    if let Some(patch) = spec.patch.as_ref().filter(|p| p.is_object()) {
        let bytes = serde_json::to_vec(patch).unwrap_or_default();
        *pod = apply(PatchType::Strategic, pod, &bytes).map_err(|e| {
            Verdict::internal(format!("ClusterColocationProfile {name}: spec.patch: {e}"))
        })?;
    }
    Ok(())
}

/// The profile's scheduler name and PriorityClass on the pod spec at `at` (a
/// Reservation without a template has none to set).
fn set_scheduling(
    h: &Handlers,
    p: &ClusterColocationProfile,
    obj: &mut Value,
    at: &[&str],
) -> Result<(), Verdict> {
    let (spec, name) = (&p.spec, p.metadata.name.as_deref().unwrap_or(""));
    let pod_spec = if at.len() == 1 {
        j::child(obj, at[0]).ok_or_else(malformed)?
    } else {
        let mut cur = &mut *obj;
        for k in at {
            match cur.get_mut(*k) {
                Some(v) if v.is_object() => cur = v,
                _ => return Ok(()),
            }
        }
        cur.as_object_mut().ok_or_else(malformed)?
    };
    if let Some(s) = spec.scheduler_name.as_deref().filter(|s| !s.is_empty()) {
        pod_spec.insert("schedulerName".into(), s.into());
    }
    if let Some(pc_name) = spec
        .priority_class_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        let pc = h.lookup.priority_class(pc_name).ok_or_else(|| {
            Verdict::internal(format!(
                "ClusterColocationProfile {name}: PriorityClass {pc_name:?} not found"
            ))
        })?;
        pod_spec.insert("priorityClassName".into(), pc_name.into());
        pod_spec.insert("priority".into(), pc.value.into());
        match &pc.preemption_policy {
            Some(pp) => pod_spec.insert("preemptionPolicy".into(), pp.clone().into()),
            None => pod_spec.remove("preemptionPolicy"),
        };
    }
    Ok(())
}

/// `labels[new] = labels[old]` (empty string when `old` is absent).
fn map_keys(
    pod: &mut Value,
    field: &str,
    mapping: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<(), Verdict> {
    let Some(mapping) = mapping else {
        return Ok(());
    };
    let m = j::path(pod, &["metadata", field]).ok_or_else(malformed)?;
    for (old, new) in mapping {
        let v = m.get(old).cloned().unwrap_or_else(|| "".into());
        m.insert(new.clone(), v);
    }
    Ok(())
}

/// `cpu` → `<tier>-cpu` (milli-cores as an integer), `memory` → `<tier>-memory` (bytes),
/// in requests and limits of every container and the overhead; batch and mid only.
pub fn translate_resources(pod: &mut Value, class: PriorityClass) {
    if !matches!(class, PriorityClass::Batch | PriorityClass::Mid) {
        return;
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) else {
                continue;
            };
            for key in ["requests", "limits"] {
                if let Some(m) = r.get_mut(key).and_then(Value::as_object_mut) {
                    translate_list(m, class);
                }
            }
            fill_requests_from_limits(r, class);
        }
    }
    if let Some(m) = spec.get_mut("overhead").and_then(Value::as_object_mut) {
        translate_list(m, class);
    }
}

fn translate_list(m: &mut Map<String, Value>, class: PriorityClass) {
    for (name, as_int) in [
        (res::CPU, quantity::milli as fn(&str) -> _),
        (res::MEMORY, quantity::value),
    ] {
        let Some(q) = m.remove(name) else { continue };
        let v = q.as_str().and_then(|s| as_int(s).ok()).unwrap_or(0);
        m.insert(translate(name, class).to_string(), v.to_string().into());
    }
}

fn fill_requests_from_limits(r: &mut Map<String, Value>, class: PriorityClass) {
    let limits = r
        .get("limits")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for name in [res::CPU, res::MEMORY] {
        let tier = translate(name, class);
        let Some(limit) = limits.get(tier) else {
            continue;
        };
        let requests = r
            .entry("requests")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(req) = requests.as_object_mut() {
            req.entry(tier.to_string()).or_insert_with(|| limit.clone());
        }
    }
}

fn batch_of(list: Option<&Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for name in [res::BATCH_CPU, res::BATCH_MEMORY] {
        if let Some(q) = list.and_then(|l| l.get(name)) {
            out.insert(name.to_string(), q.clone());
        }
    }
    out
}

/// `node.koordinator.sh/extended-resource-spec`: batch resources of regular containers.
fn extended_resource_spec(pod: &mut Value) -> Result<(), Verdict> {
    let mut containers = Map::new();
    for c in pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let requests = batch_of(c.pointer("/resources/requests"));
        let limits = batch_of(c.pointer("/resources/limits"));
        if requests.is_empty() && limits.is_empty() {
            continue;
        }
        let mut spec = Map::new();
        if !limits.is_empty() {
            spec.insert("limits".into(), limits.into());
        }
        if !requests.is_empty() {
            spec.insert("requests".into(), requests.into());
        }
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        containers.insert(name.to_string(), spec.into());
    }
    let wanted = if containers.is_empty() {
        json!({})
    } else {
        json!({ "containers": containers })
    };
    let annotations = j::annotations(pod);
    let current = match annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC) {
        None => json!({}),
        Some(raw) => serde_json::from_str::<Value>(raw).map_err(|e| {
            Verdict::internal(format!(
                "annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC} is not JSON: {e}"
            ))
        })?,
    };
    if current == wanted {
        return Ok(());
    }
    let ann = j::path(pod, &["metadata", "annotations"]).ok_or_else(malformed)?;
    ann.insert(
        ANNOTATION_EXTENDED_RESOURCE_SPEC.into(),
        wanted.to_string().into(),
    );
    Ok(())
}

const GPU_KEYS: [&str; 5] = [
    res::KOORD_GPU,
    res::GPU_CORE,
    res::GPU_MEMORY,
    res::GPU_MEMORY_RATIO,
    res::GPU_SHARED,
];

/// `koordinator.sh/gpu: N` becomes gpu-core/gpu-memory-ratio N; `gpu.shared` is injected.
fn device_resource_spec(pod: &mut Value) {
    let Some(containers) = pod
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in containers {
        let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) else {
            continue;
        };
        let requests = r
            .get("requests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if !GPU_KEYS.iter().any(|k| requests.contains_key(*k)) {
            continue;
        }
        for key in ["requests", "limits"] {
            if let Some(m) = r.get_mut(key).and_then(Value::as_object_mut)
                && let Some(n) = m.remove(res::KOORD_GPU)
            {
                m.insert(res::GPU_CORE.into(), n.clone());
                m.insert(res::GPU_MEMORY_RATIO.into(), n);
            }
        }
        let requests = r
            .get("requests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if requests.contains_key(res::GPU_SHARED) {
            continue;
        }
        let amount = |k: &str| {
            requests
                .get(k)
                .and_then(Value::as_str)
                .and_then(|s| quantity::value(s).ok())
        };
        let base = amount(res::GPU_MEMORY_RATIO).or_else(|| amount(res::GPU_CORE));
        let shared = match base {
            Some(v) if v > 100 && v % 100 == 0 => v / 100,
            _ => 1,
        };
        for key in ["requests", "limits"] {
            if let Some(m) = j::child_of_map(r, key) {
                m.insert(res::GPU_SHARED.into(), shared.to_string().into());
            }
        }
    }
}

#[cfg(test)]
#[path = "pod_mutate_tests.rs"]
mod tests;
