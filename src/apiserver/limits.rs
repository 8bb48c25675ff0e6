//! Limits on what a request may contain, checked before anything is stored: nesting
//! depth (an object deeper than the decoder's limit would be stored, then be unreadable at
//! the next start), YAML shapes that make the parser slow, names, and the quantities of
//! pods and nodes (kube-apiserver refuses those while decoding).

use serde_json::Value;

use super::error::ApiError;
use super::registry::ResourceInfo;
use crate::api::quantity;

pub use crate::api::input::{MAX_DEPTH, depth};

/// A request body must be an object, with an object `metadata`, and not too deep.
pub fn check_body(v: &Value) -> Result<(), ApiError> {
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    if v.get("metadata")
        .is_some_and(|m| !m.is_object() && !m.is_null())
    {
        return Err(ApiError::bad_request(
            "metadata: Invalid type: expected an object",
        ));
    }
    if depth(v) > MAX_DEPTH {
        return Err(ApiError::bad_request(format!(
            "the request body is nested deeper than {MAX_DEPTH} levels"
        )));
    }
    Ok(())
}

/// What a write computed (a patch result, say) must be an object of acceptable depth.
pub fn check_result(info: &ResourceInfo, name: &str, v: &Value) -> Result<(), ApiError> {
    if !v.is_object() || v.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(ApiError::invalid(
            info,
            name,
            "<root>: Invalid value: the result is not an object",
        ));
    }
    if depth(v) > MAX_DEPTH {
        return Err(ApiError::invalid(
            info,
            name,
            format!("<root>: Invalid value: nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// Refuses YAML nested beyond the depth limit before the parser spends time on it.
pub fn prescan_yaml(bytes: &[u8]) -> Result<(), ApiError> {
    crate::api::input::prescan_yaml(bytes).map_err(ApiError::bad_request)
}

use crate::api::names::{DNS_LABEL, DNS_SUBDOMAIN, dns_label, dns_subdomain};

/// kube-apiserver's wording for an invalid name.
fn name_error(info: &ResourceInfo, name: &str, label: bool) -> ApiError {
    let why = if label { DNS_LABEL } else { DNS_SUBDOMAIN };
    ApiError::invalid(
        info,
        name,
        format!("metadata.name: Invalid value: {name:?}: {why}"),
    )
}

/// RBAC names are path segments (`system:controller:x` is fine).
fn path_segment(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '%'])
}

/// The name rule of each resource, as kube-apiserver's validation applies it.
pub fn check_name(info: &ResourceInfo, name: &str) -> Result<(), ApiError> {
    let ok = match (info.group.as_str(), info.resource.as_str()) {
        ("", "namespaces" | "services") => {
            return if dns_label(name) {
                Ok(())
            } else {
                Err(name_error(info, name, true))
            };
        }
        ("rbac.authorization.k8s.io", _) => path_segment(name),
        _ => dns_subdomain(name),
    };
    if ok {
        Ok(())
    } else {
        Err(name_error(info, name, false))
    }
}

/// Checks every quantity under `path` (an object of name → quantity): unparsable is a 400
/// as kube-apiserver's decoder answers; negative, with `non_negative`, a 422.
fn check_quantities(
    info: &ResourceInfo,
    name: &str,
    field: &str,
    v: Option<&Value>,
    non_negative: bool,
) -> Result<(), ApiError> {
    let Some(map) = v.and_then(Value::as_object) else {
        return Ok(());
    };
    for (res, q) in map {
        let raw = match q {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => other.to_string(),
        };
        match quantity::parse(&raw) {
            Err(e) => {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"v1\" cannot be handled as a {}: {} ({field}[{res}]: {raw:?})",
                    info.kind,
                    info.kind,
                    e.kube_reason()
                )));
            }
            Ok(p) if non_negative && p.is_negative() => {
                return Err(ApiError::invalid(
                    info,
                    name,
                    format!(
                        "{field}[{res}]: Invalid value: {raw:?}: must be greater than or equal to 0"
                    ),
                ));
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// ConfigMap and Secret maps hold strings only: kube-apiserver's decoder refuses anything
/// else with 400 (`cannot unmarshal number into Go struct field ConfigMap.data of type
/// string`).
pub fn check_string_maps(info: &ResourceInfo, v: &Value) -> Result<(), ApiError> {
    let fields: &[&str] = match (info.group.as_str(), info.resource.as_str()) {
        ("", "configmaps") => &["data", "binaryData"],
        ("", "secrets") => &["data", "stringData"],
        _ => return Ok(()),
    };
    for field in fields {
        let Some(map) = v.get(*field).filter(|m| !m.is_null()) else {
            continue;
        };
        let Some(map) = map.as_object() else {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal {what} into Go struct field {kind}.{field} of type map[string]string",
                kind = info.kind,
                what = json_type(map),
            )));
        };
        if let Some((key, bad)) = map.iter().find(|(_, x)| !x.is_string()) {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal {what} into Go struct field {kind}.{field} of type string ({field}.{key})",
                kind = info.kind,
                what = json_type(bad),
            )));
        }
    }
    Ok(())
}

/// Go's name for a JSON value's type, as its decoder errors say it.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The quantities of a pod's containers and overhead, and of a node's status.
pub fn check_object_quantities(info: &ResourceInfo, name: &str, v: &Value) -> Result<(), ApiError> {
    if !info.group.is_empty() {
        return Ok(());
    }
    match info.resource.as_str() {
        "pods" => {
            for list in ["containers", "initContainers"] {
                let containers = v
                    .pointer(&format!("/spec/{list}"))
                    .and_then(Value::as_array);
                for (i, c) in containers.into_iter().flatten().enumerate() {
                    for kind in ["requests", "limits"] {
                        let field = format!("spec.{list}[{i}].resources.{kind}");
                        let q = c.get("resources").and_then(|r| r.get(kind));
                        check_quantities(info, name, &field, q, true)?;
                    }
                }
            }
            check_quantities(
                info,
                name,
                "spec.overhead",
                v.pointer("/spec/overhead"),
                true,
            )
        }
        "nodes" => {
            for kind in ["capacity", "allocatable"] {
                let field = format!("status.{kind}");
                check_quantities(
                    info,
                    name,
                    &field,
                    v.pointer(&format!("/status/{kind}")),
                    true,
                )?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;
    use serde_json::json;

    fn info(g: &str, r: &str) -> ResourceInfo {
        (*Registry::with_builtins().get(g, r).unwrap()).clone()
    }

    fn nested(n: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..n {
            v = json!({ "a": v });
        }
        v
    }

    #[test]
    fn depth_and_body_shape() {
        assert!(check_body(&nested(MAX_DEPTH)).is_ok());
        assert_eq!(check_body(&nested(MAX_DEPTH + 1)).unwrap_err().code, 400);
        assert_eq!(check_body(&json!([1])).unwrap_err().code, 400);
        assert_eq!(check_body(&json!({"metadata": "x"})).unwrap_err().code, 400);
        let cm = info("", "configmaps");
        assert_eq!(check_result(&cm, "x", &json!([1])).unwrap_err().code, 422);
    }

    #[test]
    fn names_as_kube_apiserver() {
        let cm = info("", "configmaps");
        for ok in ["a", "a.b", "a-b.c-d", "0x"] {
            assert!(check_name(&cm, ok).is_ok(), "{ok}");
        }
        for bad in ["a..b", "-a", "a.", "A", "a_b", ".a", "a.-b"] {
            let e = check_name(&cm, bad).unwrap_err();
            assert_eq!(e.code, 422, "{bad}");
            assert!(e.message.contains("RFC 1123 subdomain"), "{}", e.message);
        }
        let ns = info("", "namespaces");
        assert!(
            check_name(&ns, "a.b")
                .unwrap_err()
                .message
                .contains("RFC 1123 label")
        );
        let mut role = info("", "configmaps");
        role.group = "rbac.authorization.k8s.io".into();
        assert!(check_name(&role, "system:controller:x").is_ok());
        assert!(check_name(&role, "a/b").is_err());
    }

    #[test]
    fn configmap_and_secret_maps_hold_strings() {
        let cm = info("", "configmaps");
        assert!(check_string_maps(&cm, &json!({"data": {"a": "1"}})).is_ok());
        let e = check_string_maps(&cm, &json!({"data": {"a": 1}})).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains(
                "cannot unmarshal number into Go struct field ConfigMap.data of type string"
            ),
            "{}",
            e.message
        );
        assert_eq!(
            check_string_maps(&cm, &json!({"data": [1]}))
                .unwrap_err()
                .code,
            400
        );
        let secret = info("", "secrets");
        assert_eq!(
            check_string_maps(&secret, &json!({"stringData": {"k": true}}))
                .unwrap_err()
                .code,
            400
        );
        assert!(check_string_maps(&info("", "pods"), &json!({"data": {"a": 1}})).is_ok());
    }

    #[test]
    fn pod_quantities() {
        let pods = info("", "pods");
        let pod = |q: Value| json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": q}}}]}});
        assert!(check_object_quantities(&pods, "p", &pod(json!("500m"))).is_ok());
        assert!(check_object_quantities(&pods, "p", &pod(json!(2))).is_ok());
        assert!(
            check_object_quantities(&pods, "p", &pod(json!("1e400"))).is_ok(),
            "capped, as Kubernetes"
        );
        let bad = check_object_quantities(&pods, "p", &pod(json!("abc"))).unwrap_err();
        assert_eq!(bad.code, 400);
        assert!(
            bad.message
                .contains("quantities must match the regular expression"),
            "{}",
            bad.message
        );
        assert!(
            bad.message
                .contains("spec.containers[0].resources.requests[cpu]"),
            "{}",
            bad.message
        );
        let neg = check_object_quantities(&pods, "p", &pod(json!("-5"))).unwrap_err();
        assert_eq!(neg.code, 422);
        assert!(
            neg.message.contains("must be greater than or equal to 0"),
            "{}",
            neg.message
        );
    }
}
