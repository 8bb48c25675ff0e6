//! Just enough OpenAPI v3 for `kubectl apply` (1.27+) to work without `--validate=false`:
//! kubectl skips client-side validation when the PATCH operation of a kind lists the
//! `fieldValidation` parameter, and falls back to its compiled types for strategic merge
//! patches of built-in kinds. Built-in kinds (from k8s-openapi) and CRD schemas are
//! published as components, for `kubectl explain`.
//! OpenAPI v2 (protobuf, needed by kubectl < 1.27 for validation) is not served.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::error::ApiError;
use super::registry::{Registry, ResourceInfo};
use crate::kernel::http::{Body, json as json_response};

pub fn serve(registry: &Registry, rest: &[&str]) -> Result<Response<Body>, ApiError> {
    match rest {
        ["v3"] => Ok(json_response(StatusCode::OK, &root(registry))),
        ["v3", "api", "v1"] => Ok(json_response(
            StatusCode::OK,
            &group_version(registry, "", "v1"),
        )),
        ["v3", "apis", g, v] => {
            let doc = group_version(registry, g, v);
            if doc["paths"].as_object().is_some_and(|p| p.is_empty()) {
                return Err(ApiError::route_not_found());
            }
            Ok(json_response(StatusCode::OK, &doc))
        }
        _ => Err(ApiError::route_not_found()),
    }
}

fn gv_key(info: &ResourceInfo, v: &str) -> String {
    if info.group.is_empty() {
        format!("api/{v}")
    } else {
        format!("apis/{}/{v}", info.group)
    }
}

fn root(registry: &Registry) -> Value {
    let mut per_gv: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for info in registry.all() {
        for v in &info.versions {
            let fingerprint = format!(
                "{}:{}",
                info.resource,
                serde_json::to_string(&info.schemas).unwrap_or_default()
            );
            per_gv
                .entry(gv_key(&info, v))
                .or_default()
                .push(fingerprint);
        }
    }
    let paths: serde_json::Map<String, Value> = per_gv
        .into_iter()
        .map(|(gv, mut prints)| {
            prints.sort();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            prints.hash(&mut h);
            let url = format!("/openapi/v3/{gv}?hash={:016X}", h.finish());
            (gv, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

fn params(names: &[&str]) -> Value {
    Value::Array(names.iter().map(|n| json!({"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": true})).collect())
}

fn group_version(registry: &Registry, group: &str, version: &str) -> Value {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for info in registry
        .all()
        .iter()
        .filter(|i| i.group == group && i.versions.iter().any(|v| v == version))
    {
        let gvk = json!({"group": info.group, "version": version, "kind": info.kind});
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let (collection, item) = if info.namespaced {
            (
                format!("{prefix}/namespaces/{{namespace}}/{}", info.resource),
                format!(
                    "{prefix}/namespaces/{{namespace}}/{}/{{name}}",
                    info.resource
                ),
            )
        } else {
            (
                format!("{prefix}/{}", info.resource),
                format!("{prefix}/{}/{{name}}", info.resource),
            )
        };
        let op = |action: &str, extra: &[&str]| {
            let mut names = vec!["dryRun", "fieldManager", "fieldValidation", "pretty"];
            names.extend_from_slice(extra);
            json!({"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": action,
                   "parameters": params(&names), "responses": {"200": {"description": "OK"}}})
        };
        let mut patch = op("patch", &["force"]);
        patch["requestBody"] = json!({"content": {
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}}
        }});
        paths.insert(collection, json!({"post": op("post", &[]), "get": op("list", &["labelSelector", "fieldSelector", "limit", "continue", "watch"])}));
        paths.insert(item, json!({"get": op("get", &[]), "put": op("put", &[]), "patch": patch, "delete": op("delete", &[])}));
        if info.builtin
            && let Some(name) = super::schemas::component(&info.group, version, &info.kind)
        {
            add_reachable(&mut schemas, name);
        } else if let Some(schema) = info.schemas.get(version) {
            let mut s = schema.clone();
            s["x-kubernetes-group-version-kind"] = json!([gvk]);
            let name = format!("{}.{version}.{}", reverse_domain(&info.group), info.kind);
            schemas.insert(name, s);
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0-koord"},
        "paths": paths,
        "components": {"schemas": schemas}
    })
}

/// A built-in kind's schema and every schema it refers to, directly or not.
fn add_reachable(out: &mut serde_json::Map<String, Value>, name: &str) {
    let all = &super::schemas::builtins().components;
    let mut todo = vec![name.to_string()];
    while let Some(n) = todo.pop() {
        if out.contains_key(&n) {
            continue;
        }
        let Some(schema) = all.get(&n) else {
            continue;
        };
        collect_refs(schema, &mut todo);
        out.insert(n, schema.clone());
    }
}

fn collect_refs(v: &Value, into: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str)
                && let Some(n) = r.strip_prefix("#/components/schemas/")
            {
                into.push(n.to_string());
            }
            m.values().for_each(|c| collect_refs(c, into));
        }
        Value::Array(a) => a.iter().for_each(|c| collect_refs(c, into)),
        _ => {}
    }
}

fn reverse_domain(group: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    parts.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_operations_advertise_field_validation() {
        let r = Registry::with_builtins();
        let doc = group_version(&r, "", "v1");
        let cm = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(cm["x-kubernetes-group-version-kind"]["kind"], "ConfigMap");
        assert!(
            cm["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(
            cm["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_none()
        );
        let root = root(&r);
        assert!(
            root["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
    }
}
