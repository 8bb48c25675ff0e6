//! A CRD version's `openAPIV3Schema` (JSON) into the tree the writes walk.

use serde_json::Value;

use super::{Additional, Checks, ListType, Pattern, Schema, Type};

/// Compiles a schema; the error names the pattern that is not a regular expression.
pub fn compile(v: &Value) -> Result<Schema, String> {
    let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    let mut s = Schema {
        ty: v.get("type").and_then(Value::as_str).and_then(Type::parse),
        nullable: flag("nullable"),
        int_or_string: flag("x-kubernetes-int-or-string"),
        preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
        embedded: flag("x-kubernetes-embedded-resource"),
        default: v.get("default").cloned(),
        checks: checks(v)?,
        ..Schema::default()
    };
    if let Some(props) = v.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            s.properties.insert(k.clone(), compile(p)?);
        }
    }
    s.additional = match v.get("additionalProperties") {
        Some(Value::Bool(_)) => Additional::Any,
        Some(a @ Value::Object(_)) => Additional::Schema(Box::new(compile(a)?)),
        _ => Additional::None,
    };
    if let Some(items) = v.get("items").filter(|i| i.is_object()) {
        s.items = Some(Box::new(compile(items)?));
    }
    Ok(s)
}

fn checks(v: &Value) -> Result<Checks, String> {
    let num = |k: &str| v.get(k).and_then(Value::as_f64);
    let count = |k: &str| v.get(k).and_then(Value::as_u64);
    let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    let strings = |k: &str| -> Vec<String> {
        v.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let list = |k: &str| -> Result<Vec<Schema>, String> {
        v.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().map(compile).collect())
            .unwrap_or(Ok(Vec::new()))
    };
    let pattern = match v.get("pattern").and_then(Value::as_str) {
        Some(p) => Some(Pattern {
            source: p.to_string(),
            re: regex::Regex::new(p).map_err(|e| format!("pattern {p:?}: {e}"))?,
        }),
        None => None,
    };
    Ok(Checks {
        required: strings("required"),
        enumeration: v
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        minimum: num("minimum").map(|m| (m, flag("exclusiveMinimum"))),
        maximum: num("maximum").map(|m| (m, flag("exclusiveMaximum"))),
        multiple_of: num("multipleOf"),
        min_length: count("minLength"),
        max_length: count("maxLength"),
        min_items: count("minItems"),
        max_items: count("maxItems"),
        min_properties: count("minProperties"),
        max_properties: count("maxProperties"),
        pattern,
        format: v.get("format").and_then(Value::as_str).map(str::to_string),
        list_type: match v.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map,
            _ => ListType::Atomic,
        },
        map_keys: strings("x-kubernetes-list-map-keys"),
        all_of: list("allOf")?,
        any_of: list("anyOf")?,
        one_of: list("oneOf")?,
        not: match v.get("not") {
            Some(n) => Some(Box::new(compile(n)?)),
            None => None,
        },
    })
}
