//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and Kubernetes'
//! strategic merge patch for built-in kinds, including the `$patch`, `$retainKeys`,
//! `$setElementOrder/` and `$deleteFromPrimitiveList/` directives kubectl sends.

use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("the body of the request was in an unknown format: {0}")]
    Body(String),
    #[error("the patch could not be applied: {0}")]
    Apply(String),
    /// kube-apiserver's words (a 413).
    #[error(
        "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {0}"
    )]
    TooManyOperations(usize),
}

/// kube-apiserver's bounds on a JSON patch: its operation count, and what its `copy`
/// operations may add together (each copy of a value that holds earlier copies doubles
/// it: twenty copies of a small ConfigMap's data took 0.8 GB before this bound).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
pub const MAX_COPIED_BYTES: usize = 3 * 1024 * 1024;

/// Bytes of `v` as compact JSON, counted without building them.
pub fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Applies a JSON patch to `doc` within [`MAX_JSON_PATCH_OPERATIONS`] and
/// [`MAX_COPIED_BYTES`] (checked before each copy, so memory never grows past it). On an
/// error `doc` may hold the operations before the failing one: callers drop it.
pub fn apply_json(doc: &mut Value, p: &json_patch::Patch) -> Result<(), PatchError> {
    if p.0.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations(p.0.len()));
    }
    let mut copied = 0usize;
    for op in &p.0 {
        if let json_patch::PatchOperation::Copy(c) = op {
            copied += doc.pointer(c.from.as_str()).map_or(0, json_len);
            if copied > MAX_COPIED_BYTES {
                return Err(PatchError::Apply(format!(
                    "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_COPIED_BYTES}"
                )));
            }
        }
        json_patch::patch(doc, std::slice::from_ref(op))
            .map_err(|e| PatchError::Apply(e.to_string()))?;
    }
    Ok(())
}

/// Applies `patch` to `doc`.
pub fn apply(kind: PatchType, doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let mut out = doc.clone();
    match kind {
        PatchType::Json => {
            let p: json_patch::Patch =
                serde_json::from_slice(patch).map_err(|e| PatchError::Body(e.to_string()))?;
            apply_json(&mut out, &p)?;
        }
        PatchType::Merge => {
            let p: Value =
                serde_json::from_slice(patch).map_err(|e| PatchError::Body(e.to_string()))?;
            json_patch::merge(&mut out, &p);
        }
        PatchType::Strategic => {
            let p: Value =
                serde_json::from_slice(patch).map_err(|e| PatchError::Body(e.to_string()))?;
            let Value::Object(pm) = p else {
                return Err(PatchError::Body(
                    "a strategic merge patch must be a JSON object".into(),
                ));
            };
            if !out.is_object() {
                out = Value::Object(Map::new());
            }
            if let Value::Object(om) = &mut out {
                merge_map(om, &pm);
            }
        }
        PatchType::Apply => {
            return Err(PatchError::Body(
                "server-side apply is not supported".into(),
            ));
        }
    }
    Ok(out)
}

/// How a list field merges: by a key inside its elements, as a set of primitives, or
/// (absent from this table) replaced wholesale.
pub(crate) enum ListStrategy {
    Key(&'static str),
    Primitive,
}

pub(crate) fn list_strategy(
    field: &str,
    orig: Option<&[Value]>,
    patch: &[Value],
) -> Option<ListStrategy> {
    let key = match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "secrets" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" | "addresses" => "type",
        "hostAliases" | "podIPs" | "hostIPs" => "ip",
        "ownerReferences" => "uid",
        "topologySpreadConstraints" => "topologyKey",
        "ports" => {
            let has_container_port = orig
                .into_iter()
                .flatten()
                .chain(patch)
                .any(|e| e.get("containerPort").is_some());
            if has_container_port {
                "containerPort"
            } else {
                "port"
            }
        }
        "finalizers" => return Some(ListStrategy::Primitive),
        _ => return None,
    };
    Some(ListStrategy::Key(key))
}

fn is_directive(k: &str) -> bool {
    k.starts_with('$')
}

/// A patch value without directives, for places where it is inserted as is.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !is_directive(k))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|e| !is_patch_directive_elem(e))
                .map(strip)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn is_patch_directive_elem(e: &Value) -> bool {
    e.get("$patch").is_some()
}

fn merge_map(orig: &mut Map<String, Value>, patch: &Map<String, Value>) {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        *orig = match strip(&Value::Object(patch.clone())) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        return;
    }
    let mut orders: Vec<(&str, &Vec<Value>)> = Vec::new();
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$setElementOrder/") {
            if let Some(list) = v.as_array() {
                orders.push((field, list));
            }
        } else if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(del)) = (orig.get_mut(field), v.as_array()) {
                list.retain(|x| !del.contains(x));
            }
        } else if is_directive(k) {
            continue;
        } else if v.is_null() {
            orig.remove(k);
        } else if let Value::Object(pm) = v {
            if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                orig.remove(k);
                continue;
            }
            let entry = orig
                .entry(k.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(om) = entry {
                merge_map(om, pm);
            }
        } else if let Value::Array(pa) = v {
            let merged = merge_list(k, orig.get(k).and_then(Value::as_array), pa);
            orig.insert(k.clone(), Value::Array(merged));
        } else {
            orig.insert(k.clone(), v.clone());
        }
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        orig.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    for (field, order) in orders {
        if let Some(Value::Array(list)) = orig.get_mut(field) {
            reorder(field, list, order);
        }
    }
}

fn key_of<'a>(e: &'a Value, key: &str) -> Option<&'a Value> {
    e.get(key)
}

fn merge_list(field: &str, orig: Option<&Vec<Value>>, patch: &[Value]) -> Vec<Value> {
    let strategy = list_strategy(field, orig.map(Vec::as_slice), patch);
    let replace = patch
        .iter()
        .any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace"));
    match strategy {
        _ if replace => patch
            .iter()
            .filter(|e| !is_patch_directive_elem(e))
            .map(strip)
            .collect(),
        None => patch.iter().map(strip).collect(),
        Some(ListStrategy::Primitive) => {
            let mut out: Vec<Value> = orig.cloned().unwrap_or_default();
            for e in patch {
                if !out.contains(e) {
                    out.push(e.clone());
                }
            }
            out
        }
        Some(ListStrategy::Key(key)) => {
            let mut out: Vec<Value> = orig.cloned().unwrap_or_default();
            for pe in patch {
                let Some(k) = key_of(pe, key) else {
                    out.push(strip(pe));
                    continue;
                };
                let pos = out.iter().position(|e| key_of(e, key) == Some(k));
                if pe.get("$patch").and_then(Value::as_str) == Some("delete") {
                    out.retain(|e| key_of(e, key) != Some(k));
                    continue;
                }
                match (pos, pe) {
                    (Some(i), Value::Object(pm)) => {
                        if let Value::Object(om) = &mut out[i] {
                            merge_map(om, pm);
                        }
                    }
                    _ => out.push(strip(pe)),
                }
            }
            out
        }
    }
}

/// Orders `list` as `order` names its elements (by merge key, or by value for primitive
/// lists); elements `order` does not name keep their relative order at the end.
fn reorder(field: &str, list: &mut Vec<Value>, order: &[Value]) {
    let key = match list_strategy(field, Some(list.as_slice()), &[]) {
        Some(ListStrategy::Key(k)) => Some(k),
        _ => None,
    };
    let ident = |e: &Value| -> Value {
        match key {
            Some(k) => e.get(k).cloned().unwrap_or(Value::Null),
            None => e.clone(),
        }
    };
    let position = |e: &Value| -> usize {
        let id = ident(e);
        order
            .iter()
            .position(|o| ident(o) == id)
            .unwrap_or(usize::MAX)
    };
    list.sort_by_key(position);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patches_are_bounded_as_kube_apiserver_bounds_them() {
        // Thirty copies of a growing value would need ~24 GB; the bound stops them at 3 MiB.
        let doc = json!({"data": {"payload": "x".repeat(1024)}});
        let ops: Vec<Value> = (0..30)
            .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")}))
            .collect();
        let err = apply(PatchType::Json, &doc, &serde_json::to_vec(&ops).unwrap()).unwrap_err();
        assert!(
            err.to_string()
                .contains("the accumulated size increase of copy is")
                && err.to_string().contains("exceeding the limit 3145728"),
            "{err}"
        );
        let few = &ops[..3];
        let ok = apply(PatchType::Json, &doc, &serde_json::to_vec(few).unwrap()).unwrap();
        assert!(ok["data"]["c2"]["c1"]["c0"]["payload"].is_string());
        let many: Vec<Value> = (0..10_001)
            .map(|_| json!({"op": "test", "path": "/data", "value": doc["data"]}))
            .collect();
        let err = apply(PatchType::Json, &doc, &serde_json::to_vec(&many).unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    }

    fn smp(doc: Value, patch: Value) -> Value {
        apply(
            PatchType::Strategic,
            &doc,
            &serde_json::to_vec(&patch).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn merges_containers_by_name_and_env_by_name() {
        let doc = json!({"spec": {"containers": [
            {"name": "a", "image": "x:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "b", "image": "y:1"}]}});
        let patch = json!({"spec": {"containers": [{"name": "a", "image": "x:2", "env": [{"name": "B", "value": "2"}]}]}});
        let out = smp(doc, patch);
        assert_eq!(out["spec"]["containers"][0]["image"], "x:2");
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(
            out["spec"]["containers"][1]["name"], "b",
            "unpatched containers stay"
        );
    }

    #[test]
    fn directives() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "tolerations": [{"key": "t"}]}});
        let patch = json!({
            "metadata": {"labels": {"b": null, "c": "3"}, "$deleteFromPrimitiveList/finalizers": ["x"]},
            "spec": {
                "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                "containers": [{"name": "a", "$patch": "delete"}],
                "tolerations": [{"key": "u"}]
            }
        });
        let out = smp(doc, patch);
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
        assert_eq!(
            out["spec"]["tolerations"],
            json!([{"key": "u"}]),
            "lists without merge key are replaced"
        );
    }

    #[test]
    fn replace_and_retain_keys() {
        let doc = json!({"data": {"a": "1"}, "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"data": {"$patch": "replace", "z": "9"},
            "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let out = smp(doc, patch);
        assert_eq!(out["data"], json!({"z": "9"}));
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn ports_merge_on_container_port_and_conditions_on_type() {
        let doc = json!({"ports": [{"containerPort": 80, "name": "http"}], "conditions": [{"type": "Ready", "status": "False"}]});
        let patch = json!({"ports": [{"containerPort": 80, "protocol": "TCP"}], "conditions": [{"type": "Ready", "status": "True"}]});
        let out = smp(doc, patch);
        assert_eq!(
            out["ports"],
            json!([{"containerPort": 80, "name": "http", "protocol": "TCP"}])
        );
        assert_eq!(
            out["conditions"],
            json!([{"type": "Ready", "status": "True"}])
        );
    }

    #[test]
    fn json_and_merge_patches() {
        let doc = json!({"a": {"b": 1}, "l": [1, 2]});
        let out = apply(
            PatchType::Json,
            &doc,
            br#"[{"op":"replace","path":"/a/b","value":2},{"op":"add","path":"/l/-","value":3}]"#,
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"b": 2}, "l": [1, 2, 3]}));
        let out = apply(PatchType::Merge, &doc, br#"{"a":{"b":null,"c":1},"l":[9]}"#).unwrap();
        assert_eq!(out, json!({"a": {"c": 1}, "l": [9]}));
        assert!(
            apply(
                PatchType::Json,
                &doc,
                br#"[{"op":"test","path":"/a/b","value":5}]"#
            )
            .is_err()
        );
        assert!(apply(PatchType::Merge, &doc, b"not json").is_err());
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
    }
}
