//! Kubernetes types whose JSON form is not their message's fields: the custom marshalers
//! of apimachinery (Quantity, Time, MicroTime, Duration, IntOrString, RawExtension,
//! FieldsV1), apiextensions' schema unions, and named string slices (ExtraValue, Verbs).

use k8s_openapi::jiff::Timestamp;
use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage, Value as Pv};
use serde_json::Value;

use super::mismatch::{Mismatch, mismatch};

/// The generic transcoders, for the messages nested in special ones (passed in by the
/// generic code, which calls this module first).
pub(super) struct Generic {
    pub to_message: fn(&Value, &MessageDescriptor, &str) -> Result<DynamicMessage, Mismatch>,
    pub to_json: fn(&DynamicMessage) -> Value,
}

const QUANTITY: &str = "apimachinery.pkg.api.resource.Quantity";
const TIME: &str = "apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "apimachinery.pkg.apis.meta.v1.Duration";
const INT_OR_STRING: &str = "apimachinery.pkg.util.intstr.IntOrString";
const SCHEMA_PKG: &str = "apiextensions_apiserver.pkg.apis.apiextensions.";

/// Messages holding a JSON document in one bytes field.
fn raw_field(full_name: &str) -> Option<&'static str> {
    match full_name {
        "apimachinery.pkg.runtime.RawExtension" => Some("raw"),
        "apimachinery.pkg.apis.meta.v1.FieldsV1" => Some("Raw"),
        n if n.starts_with(SCHEMA_PKG) && n.ends_with(".JSON") => Some("raw"),
        _ => None,
    }
}

/// Named `[]string` types, which go-to-protobuf wraps in a message with `items`.
fn is_string_list(name: &str) -> bool {
    matches!(name, "ExtraValue" | "Verbs")
}

fn with(desc: &MessageDescriptor, fields: &[(&str, Pv)]) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    for (name, v) in fields {
        m.set_field_by_name(name, v.clone());
    }
    m
}

pub(super) fn to_message(
    v: &Value,
    desc: &MessageDescriptor,
    path: &str,
    g: &Generic,
) -> Result<Option<DynamicMessage>, Mismatch> {
    let name = desc.full_name();
    if let Some(field) = raw_field(name) {
        let raw = serde_json::to_vec(v).unwrap_or_default();
        return Ok(Some(with(desc, &[(field, Pv::Bytes(raw.into()))])));
    }
    let m = match name {
        QUANTITY => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => {
                    return Err(mismatch(
                        path,
                        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                    ));
                }
            };
            with(desc, &[("string", Pv::String(s))])
        }
        TIME | MICRO_TIME => {
            let s = v
                .as_str()
                .ok_or_else(|| mismatch(path, "expected a time string"))?;
            let t: Timestamp = s
                .parse()
                .map_err(|e| mismatch(path, format!("parsing time {s:?}: {e}")))?;
            let nanos = if name == TIME {
                0
            } else {
                t.subsec_nanosecond()
            };
            with(
                desc,
                &[
                    ("seconds", Pv::I64(t.as_second())),
                    ("nanos", Pv::I32(nanos)),
                ],
            )
        }
        DURATION => {
            let s = v
                .as_str()
                .ok_or_else(|| mismatch(path, "expected a duration string"))?;
            let d = parse_duration(s)
                .ok_or_else(|| mismatch(path, format!("time: invalid duration {s:?}")))?;
            with(desc, &[("duration", Pv::I64(d))])
        }
        INT_OR_STRING => match v {
            Value::String(s) => with(
                desc,
                &[("type", Pv::I64(1)), ("strVal", Pv::String(s.clone()))],
            ),
            Value::Number(n) => {
                let i = n.as_i64().and_then(|i| i32::try_from(i).ok());
                let i = i.ok_or_else(|| mismatch(path, "expected an int32 or a string"))?;
                with(desc, &[("type", Pv::I64(0)), ("intVal", Pv::I32(i))])
            }
            _ => return Err(mismatch(path, "expected an integer or a string")),
        },
        _ if is_string_list(desc.name()) => {
            let Value::Array(items) = v else {
                return Err(mismatch(path, "expected an array"));
            };
            let items = items
                .iter()
                .map(|i| i.as_str().map(|s| Pv::String(s.to_string())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| mismatch(path, "expected an array of strings"))?;
            with(desc, &[("items", Pv::List(items))])
        }
        _ if name.starts_with(SCHEMA_PKG) => return schema_union(v, desc, path, g),
        _ => return Ok(None),
    };
    Ok(Some(m))
}

/// JSONSchemaPropsOrArray / OrBool / OrStringArray: one JSON value, two proto fields.
fn schema_union(
    v: &Value,
    desc: &MessageDescriptor,
    path: &str,
    g: &Generic,
) -> Result<Option<DynamicMessage>, Mismatch> {
    let schema = |v: &Value| -> Result<Pv, Mismatch> {
        let field = desc
            .get_field_by_name("schema")
            .ok_or_else(|| mismatch(path, "no schema"))?;
        let prost_reflect::Kind::Message(m) = field.kind() else {
            return Err(mismatch(path, "schema is not a message"));
        };
        Ok(Pv::Message((g.to_message)(v, &m, path)?))
    };
    let m = match (desc.name(), v) {
        ("JSONSchemaPropsOrBool", Value::Bool(b)) => with(desc, &[("allows", Pv::Bool(*b))]),
        ("JSONSchemaPropsOrBool", _) => {
            with(desc, &[("allows", Pv::Bool(true)), ("schema", schema(v)?)])
        }
        ("JSONSchemaPropsOrArray", Value::Array(items)) => {
            let field = desc
                .get_field_by_name("jSONSchemas")
                .ok_or_else(|| mismatch(path, "no jSONSchemas"))?;
            let prost_reflect::Kind::Message(m) = field.kind() else {
                return Err(mismatch(path, "jSONSchemas is not a message"));
            };
            let list = items
                .iter()
                .map(|i| (g.to_message)(i, &m, path).map(Pv::Message))
                .collect::<Result<Vec<_>, _>>()?;
            with(desc, &[("jSONSchemas", Pv::List(list))])
        }
        ("JSONSchemaPropsOrArray", _) => with(desc, &[("schema", schema(v)?)]),
        ("JSONSchemaPropsOrStringArray", Value::Array(items)) => {
            let list = items
                .iter()
                .map(|i| Pv::String(i.as_str().unwrap_or_default().to_string()))
                .collect();
            with(desc, &[("property", Pv::List(list))])
        }
        ("JSONSchemaPropsOrStringArray", _) => with(desc, &[("schema", schema(v)?)]),
        _ => return Ok(None),
    };
    Ok(Some(m))
}

fn field<'a>(m: &'a DynamicMessage, name: &str) -> Option<std::borrow::Cow<'a, Pv>> {
    m.has_field_by_name(name)
        .then(|| m.get_field_by_name(name))
        .flatten()
}

pub(super) fn to_json(m: &DynamicMessage, g: &Generic) -> Option<Value> {
    let desc = m.descriptor();
    let name = desc.full_name();
    if let Some(f) = raw_field(name) {
        let raw = field(m, f)
            .and_then(|v| v.as_bytes().cloned())
            .unwrap_or_default();
        return Some(serde_json::from_slice(&raw).unwrap_or(Value::Null));
    }
    let int = |f: &str| field(m, f).and_then(|v| v.as_i64().or(v.as_i32().map(i64::from)));
    Some(match name {
        QUANTITY => field(m, "string")
            .and_then(|v| v.as_str().map(Value::from))
            .unwrap_or_else(|| "0".into()),
        TIME | MICRO_TIME => {
            // Go writes a zero time as an empty message; JSON has null for it.
            let fmt = if name == TIME {
                "%Y-%m-%dT%H:%M:%SZ"
            } else {
                "%Y-%m-%dT%H:%M:%S%.6fZ"
            };
            int("seconds")
                .and_then(|secs| Timestamp::new(secs, int("nanos").unwrap_or(0) as i32).ok())
                .map_or(Value::Null, |t| t.strftime(fmt).to_string().into())
        }
        DURATION => format_duration(int("duration").unwrap_or(0)).into(),
        INT_OR_STRING => match int("type") {
            Some(1) => field(m, "strVal")
                .and_then(|v| v.as_str().map(Value::from))
                .unwrap_or_else(|| "".into()),
            _ => int("intVal").unwrap_or(0).into(),
        },
        _ if is_string_list(desc.name()) => match field(m, "items").as_deref() {
            Some(Pv::List(items)) => items
                .iter()
                .map(|i| Value::from(i.as_str().unwrap_or_default()))
                .collect(),
            _ => Value::Array(Vec::new()),
        },
        _ if name.starts_with(SCHEMA_PKG) => return schema_union_json(m, g),
        _ => return None,
    })
}

fn schema_union_json(m: &DynamicMessage, g: &Generic) -> Option<Value> {
    let desc = m.descriptor();
    let message = |f: &str| match field(m, f).as_deref() {
        Some(Pv::Message(s)) => Some((g.to_json)(s)),
        _ => None,
    };
    let list = |f: &str| match field(m, f).as_deref() {
        Some(Pv::List(items)) => Some(
            items
                .iter()
                .map(|i| match i {
                    Pv::Message(s) => (g.to_json)(s),
                    Pv::String(s) => s.clone().into(),
                    _ => Value::Null,
                })
                .collect::<Vec<_>>(),
        ),
        _ => None,
    };
    Some(match desc.name() {
        "JSONSchemaPropsOrBool" => message("schema").unwrap_or_else(|| {
            field(m, "allows")
                .and_then(|v| v.as_bool())
                .unwrap_or(false)
                .into()
        }),
        "JSONSchemaPropsOrArray" => message("schema")
            .or_else(|| list("jSONSchemas").map(Value::Array))
            .unwrap_or(Value::Null),
        "JSONSchemaPropsOrStringArray" => message("schema")
            .or_else(|| list("property").map(Value::Array))
            .unwrap_or(Value::Null),
        _ => return None,
    })
}

pub use crate::api::duration::parse_nanos as parse_duration;

/// Go's `Duration.String`: "1h2m3.5s", "300ms", "0s".
pub fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let frac = |v: u64, unit: u64| -> String {
        let whole = v / unit;
        let rem = v % unit;
        if rem == 0 {
            return whole.to_string();
        }
        let digits = unit.ilog10() as usize;
        let s = format!("{whole}.{rem:0digits$}");
        s.trim_end_matches('0').to_string()
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", frac(n, 1_000));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", frac(n, 1_000_000));
    }
    let secs_total = n / 1_000_000_000;
    let (h, m) = (secs_total / 3600, (secs_total / 60) % 60);
    let s = frac(n % 60_000_000_000, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{sign}{s}s"),
        (0, _) => format!("{sign}{m}m{s}s"),
        _ => format!("{sign}{h}h{m}m{s}s"),
    }
}
