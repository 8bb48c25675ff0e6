//! kube-apiserver's checks of what every object carries (label and annotation keys and
//! values, finalizers, the annotations' total size, the object's size) and of a pod's
//! container names, with its wording. A container name becomes a path on the host (its
//! log file), so a name the kubelet would refuse must never reach the node runtime.

use serde_json::Value;

use super::error::ApiError;
use super::registry::ResourceInfo;
#[cfg(test)]
use crate::api::names::NAME_PART;
use crate::api::names::{DNS_LABEL, LABEL_VALUE, dns_label, name_chars, qualified_name};

/// kube-apiserver's `TotalAnnotationSizeLimitB`.
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;
/// What one object may weigh once stored (etcd's default request limit, 1.5 MiB).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

fn label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !v.is_empty() && !name_chars(v) {
        errs.push(LABEL_VALUE.to_string());
    }
    errs
}

fn invalid(field: &str, value: &str, why: &str) -> String {
    format!("{field}: Invalid value: {value:?}: {why}")
}

fn string_map<'a>(v: &'a Value, field: &str) -> impl Iterator<Item = (&'a String, &'a str)> {
    v.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
}

/// Every problem with the object's labels, annotations and finalizers.
fn meta_errors(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (k, val) in string_map(v, "labels") {
        for e in qualified_name(k) {
            out.push(invalid("metadata.labels", k, &e));
        }
        for e in label_value(val) {
            out.push(invalid("metadata.labels", val, &e));
        }
    }
    let mut size = 0;
    for (k, val) in string_map(v, "annotations") {
        size += k.len() + val.len();
        for e in qualified_name(&k.to_lowercase()) {
            out.push(invalid("metadata.annotations", k, &e));
        }
    }
    if size > MAX_ANNOTATION_BYTES {
        out.push(format!(
            "metadata.annotations: Too long: must have at most {MAX_ANNOTATION_BYTES} bytes"
        ));
    }
    let finalizers = v.pointer("/metadata/finalizers").and_then(Value::as_array);
    for (i, f) in finalizers.into_iter().flatten().enumerate() {
        let f = f.as_str().unwrap_or_default();
        for e in qualified_name(f) {
            out.push(invalid(&format!("metadata.finalizers[{i}]"), f, &e));
        }
    }
    out
}

/// A pod's container names: required, RFC 1123 labels, unique across all its containers.
fn container_errors(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let items = v
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for (i, c) in items.into_iter().flatten().enumerate() {
            let field = format!("spec.{list}[{i}].name");
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                out.push(format!("{field}: Required value"));
            } else if !dns_label(name) {
                out.push(invalid(&field, name, DNS_LABEL));
            } else if !seen.insert(name.to_string()) {
                out.push(format!("{field}: Duplicate value: {name:?}"));
            }
        }
    }
    out
}

/// What kube-apiserver checks of any object before storing it (and of a pod's
/// containers): 422 with every cause, or 413 when it is too large to store.
pub fn check(info: &ResourceInfo, name: &str, v: &Value) -> Result<(), ApiError> {
    let size = crate::api::patch::json_len(v);
    if size > MAX_OBJECT_BYTES {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "{} {name:?} is {size} bytes; at most {MAX_OBJECT_BYTES} bytes are stored per object",
                info.qualified()
            ),
        ));
    }
    let mut errs = meta_errors(v);
    if info.group.is_empty() && info.resource == "pods" {
        errs.extend(container_errors(v));
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(ApiError::invalid(info, name, errs.remove(0))),
        _ => Err(ApiError::invalid(
            info,
            name,
            format!("[{}]", errs.join(", ")),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_annotations_finalizers_and_sizes() {
        let ok = json!({"metadata": {"labels": {"app": "", "k": "v.1"}, "annotations": {"Some/Key": "any text at all"},
            "finalizers": ["example.com/keep", "kubernetes"]}});
        assert!(meta_errors(&ok).is_empty());
        let bad = json!({"metadata": {"labels": {"": "x", "k": "has space"}, "annotations": {"a b": "v"},
            "finalizers": ["no way"]}});
        let errs = meta_errors(&bad);
        assert!(
            errs.contains(
                &"metadata.labels: Invalid value: \"\": name part must be non-empty".to_string()
            ),
            "{errs:?}"
        );
        assert!(errs.contains(&format!(
            "metadata.labels: Invalid value: \"has space\": {LABEL_VALUE}"
        )));
        assert!(errs.contains(&format!(
            "metadata.annotations: Invalid value: \"a b\": {NAME_PART}"
        )));
        assert!(errs.contains(&format!(
            "metadata.finalizers[0]: Invalid value: \"no way\": {NAME_PART}"
        )));
        let big = json!({"metadata": {"annotations": {"a": "x".repeat(MAX_ANNOTATION_BYTES)}}});
        assert_eq!(
            meta_errors(&big),
            vec!["metadata.annotations: Too long: must have at most 262144 bytes".to_string()]
        );
    }

    #[test]
    fn container_names_are_labels_and_unique() {
        let pod = json!({"spec": {"initContainers": [{"name": "c"}], "containers": [
            {"name": "../../../../tmp/x"}, {"name": "c"}, {}]}});
        assert_eq!(
            container_errors(&pod),
            vec![
                format!(
                    "spec.containers[0].name: Invalid value: \"../../../../tmp/x\": {DNS_LABEL}"
                ),
                "spec.containers[1].name: Duplicate value: \"c\"".to_string(),
                "spec.containers[2].name: Required value".to_string(),
            ]
        );
    }
}
