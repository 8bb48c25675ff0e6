//! What apiextensions-apiserver checks of a CRD before serving it: one storage version,
//! stored versions kept, and a structural schema per version (every field typed, arrays
//! with items, no `$ref` or other keywords structural schemas forbid, valid patterns,
//! defaults that pass their own schema).

use serde_json::{Map, Value};

use super::compile;
use crate::apiserver::cause::Cause;

/// Every cause that makes `crd` unservable; `old` is the stored CRD on update.
pub fn check_crd(crd: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage = versions.iter().filter(|v| v["storage"] == true).count();
    if !versions.is_empty() && storage != 1 {
        out.push(Cause::invalid(
            "spec.versions",
            &Value::Array(versions.clone()),
            "must have exactly one version marked as storage version",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
            root(schema, &at, &mut out);
        }
    }
    let names: Vec<&str> = versions.iter().filter_map(|v| v["name"].as_str()).collect();
    let stored = old
        .and_then(|o| o.pointer("/status/storedVersions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    for (i, s) in stored.enumerate() {
        if !names.contains(&s) {
            out.push(Cause::invalid(
                format!("status.storedVersions[{i}]"),
                &Value::String(s.into()),
                "must appear in spec.versions",
            ));
        }
    }
    out
}

fn root(s: &Value, at: &str, out: &mut Vec<Cause>) {
    match s.get("type").and_then(Value::as_str) {
        None => out.push(Cause::required(
            format!("{at}.type"),
            "must not be empty at the root",
        )),
        Some("object") => {}
        Some(t) => out.push(Cause::invalid(
            format!("{at}.type"),
            &Value::String(t.into()),
            "must be object at the root",
        )),
    }
    if let Some(meta) = s.pointer("/properties/metadata").and_then(Value::as_object) {
        let props = meta.get("properties").and_then(Value::as_object);
        let only_names = props.is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
        let extra = meta
            .keys()
            .any(|k| !matches!(k.as_str(), "type" | "properties" | "description"));
        if !only_names || extra {
            out.push(Cause::forbidden(
                format!("{at}.properties[metadata]"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    node(s, at, out);
}

const UNSUPPORTED: [&str; 6] = [
    "$ref",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
    "id",
];

fn node(s: &Value, at: &str, out: &mut Vec<Cause>) {
    let Some(m) = s.as_object() else { return };
    for k in UNSUPPORTED {
        if m.contains_key(k) {
            out.push(Cause::forbidden(
                format!("{at}.{k}"),
                &format!("{k} is not supported"),
            ));
        }
    }
    if m.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push(Cause::forbidden(
            format!("{at}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        out.push(Cause::invalid(
            format!("{at}.x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    if let Some(p) = m.get("pattern").and_then(Value::as_str)
        && let Err(e) = regex::Regex::new(p)
    {
        let detail = format!("must be a valid regular expression, but isn't: {e}");
        out.push(Cause::invalid(
            format!("{at}.pattern"),
            &Value::String(p.into()),
            &detail,
        ));
    }
    if m.contains_key("properties") && m.contains_key("additionalProperties") {
        out.push(Cause::forbidden(
            format!("{at}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if m.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map")
        && m.get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .is_none_or(|k| k.is_empty())
    {
        out.push(Cause::required(
            format!("{at}.x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    children(m, at, out);
}

fn typed(m: &Map<String, Value>) -> bool {
    m.contains_key("type")
        || m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        || m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn children(m: &Map<String, Value>, at: &str, out: &mut Vec<Cause>) {
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            let here = format!("{at}.properties[{k}]");
            if let Some(pm) = p.as_object() {
                if !typed(pm) {
                    out.push(Cause::required(
                        format!("{here}.type"),
                        "must not be empty for specified object fields",
                    ));
                }
                check_default(pm, p, &here, out);
            }
            node(p, &here, out);
        }
    }
    if m.get("type").and_then(Value::as_str) == Some("array") {
        match m.get("items").and_then(Value::as_object) {
            None => out.push(Cause::required(format!("{at}.items"), "must be specified")),
            Some(im) if !typed(im) => out.push(Cause::required(
                format!("{at}.items.type"),
                "must not be empty for specified array items",
            )),
            Some(_) => {}
        }
    }
    if let Some(items) = m.get("items") {
        node(items, &format!("{at}.items"), out);
    }
    if let Some(a) = m.get("additionalProperties").filter(|a| a.is_object()) {
        node(a, &format!("{at}.additionalProperties"), out);
    }
    for j in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in m
            .get(j)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            node(sub, &format!("{at}.{j}[{i}]"), out);
        }
    }
}

/// A default must be valid under its own (pruned) schema.
fn check_default(m: &Map<String, Value>, schema: &Value, at: &str, out: &mut Vec<Cause>) {
    let Some(d) = m.get("default") else { return };
    let Ok(compiled) = compile(schema) else {
        return;
    };
    let mut pruned = d.clone();
    super::prune(&mut pruned, &compiled, false);
    let causes = super::validate(&pruned, &compiled, None);
    for c in causes {
        let field = if c.field.is_empty() {
            format!("{at}.default")
        } else {
            format!("{at}.default.{}", c.field)
        };
        let body = c.body.replace(
            &format!(" {} in body", c.field),
            &format!(" {field} in body"),
        );
        out.push(Cause { field, body, ..c });
    }
}
