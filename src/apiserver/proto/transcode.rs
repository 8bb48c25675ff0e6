//! JSON ↔ protobuf for Kubernetes objects, driven by the message descriptors: each JSON
//! field is the proto field of the same name (go-to-protobuf names them after the JSON
//! tags), and the handful of types whose JSON form differs from their message (Quantity,
//! Time, IntOrString, RawExtension …) are mapped in `special`.

use std::collections::HashMap;

use base64::Engine;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value as Pv,
};
use serde_json::{Map, Value};

use super::special;

pub use super::mismatch::{Mismatch, mismatch};

/// The generic transcoders, handed to the special cases for the messages nested in them.
pub(super) const GENERIC: special::Generic = special::Generic {
    to_message,
    to_json,
};

/// Encodes `v` as the message `desc`. JSON fields the message lacks are dropped, as
/// kube-apiserver's decoder drops unknown fields.
pub fn to_message(
    v: &Value,
    desc: &MessageDescriptor,
    path: &str,
) -> Result<DynamicMessage, Mismatch> {
    if let Some(m) = special::to_message(v, desc, path, &GENERIC)? {
        return Ok(m);
    }
    let Value::Object(obj) = v else {
        return Err(mismatch(path, "expected an object"));
    };
    let mut msg = DynamicMessage::new(desc.clone());
    for field in desc.fields().filter(is_inline) {
        if let Kind::Message(sub) = field.kind() {
            let inner = to_message(v, &sub, path)?;
            if inner.fields().next().is_some() {
                msg.set_field(&field, Pv::Message(inner));
            }
        }
    }
    for (key, val) in obj {
        if val.is_null() {
            continue;
        }
        let Some(field) = field_for(desc, key) else {
            continue;
        };
        let here = format!("{path}.{key}");
        let pv = if field.is_map() {
            map_value(val, &field, &here)?
        } else if field.is_list() {
            let Value::Array(items) = val else {
                return Err(mismatch(&here, "expected an array"));
            };
            let kind = field.kind();
            let list = items
                .iter()
                .enumerate()
                .map(|(i, item)| single(item, &kind, &format!("{here}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            Pv::List(list)
        } else {
            single(val, &field.kind(), &here)?
        };
        msg.set_field(&field, pv);
    }
    Ok(msg)
}

/// Go structs embedded with `json:",inline"`: a message field in protobuf, flattened
/// into the parent in JSON.
pub(super) fn is_inline(field: &FieldDescriptor) -> bool {
    let mut parts = field.full_name().rsplit('.');
    let (Some(name), Some(parent)) = (parts.next(), parts.next()) else {
        return false;
    };
    matches!(
        (parent, name),
        ("Probe", "handler")
            | ("Volume", "volumeSource")
            | ("PersistentVolumeSpec", "persistentVolumeSource")
            | ("EphemeralContainer", "ephemeralContainerCommon")
            | ("IngressRule", "ingressRuleValue")
            | ("NamedRuleWithOperations", "ruleWithOperations")
            | ("RuleWithOperations", "rule")
            | (_, "localObjectReference" | "deviceConfiguration")
    )
}

/// The proto field for JSON key `key`: go-to-protobuf names fields after the Go field
/// where the JSON tag differs only in case (`Webhooks`, `Expression`, `Port`).
pub(super) fn field_for(desc: &MessageDescriptor, key: &str) -> Option<FieldDescriptor> {
    if let Some(name) = schema_alias(desc, key) {
        return desc.get_field_by_name(&name);
    }
    desc.get_field_by_name(key).or_else(|| {
        let mut c = key.chars();
        let first = c.next()?;
        if !first.is_ascii_lowercase() {
            return None;
        }
        desc.get_field_by_name(&format!("{}{}", first.to_ascii_uppercase(), c.as_str()))
    })
}

/// JSONSchemaProps' JSON keys that are not the proto names camel-cased: `$ref`, `$schema`
/// and the `x-kubernetes-*` extensions (proto `xKubernetes*`).
fn schema_alias(desc: &MessageDescriptor, key: &str) -> Option<String> {
    if let Some(rest) = key.strip_prefix("x-kubernetes-") {
        let camel: String = rest
            .split('-')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect();
        return Some(format!("xKubernetes{camel}"));
    }
    (desc.name() == "JSONSchemaProps" && matches!(key, "$ref" | "$schema"))
        .then(|| key[1..].to_string())
}

/// The JSON key of a proto field (see `field_for`).
pub(super) fn json_key(field: &FieldDescriptor) -> String {
    let name = field.name();
    if let Some(rest) = name.strip_prefix("xKubernetes") {
        let mut out = String::from("x-kubernetes");
        for c in rest.chars() {
            if c.is_ascii_uppercase() {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        }
        return out;
    }
    if field.parent_message().name() == "JSONSchemaProps" && matches!(name, "ref" | "schema") {
        return format!("${name}");
    }
    let mut c = name.chars();
    match (c.next(), c.next()) {
        (Some(a), Some(b)) if a.is_ascii_uppercase() && b.is_ascii_lowercase() => {
            format!("{}{}", a.to_ascii_lowercase(), &name[1..])
        }
        _ => name.to_string(),
    }
}

/// The messages `desc` embeds inline.
pub(super) fn inline_fields(
    desc: &MessageDescriptor,
) -> impl Iterator<Item = MessageDescriptor> + '_ {
    desc.fields()
        .filter(is_inline)
        .filter_map(|f| match f.kind() {
            Kind::Message(m) => Some(m),
            _ => None,
        })
}

fn map_value(val: &Value, field: &FieldDescriptor, path: &str) -> Result<Pv, Mismatch> {
    let Value::Object(obj) = val else {
        return Err(mismatch(path, "expected an object"));
    };
    let Kind::Message(entry) = field.kind() else {
        return Err(mismatch(path, "map without entry type"));
    };
    let key_kind = entry.map_entry_key_field().kind();
    let value_kind = entry.map_entry_value_field().kind();
    let mut out = HashMap::with_capacity(obj.len());
    for (k, item) in obj {
        let here = format!("{path}.{k}");
        let key = match key_kind {
            Kind::String => MapKey::String(k.clone()),
            _ => return Err(mismatch(&here, "unsupported map key type")),
        };
        out.insert(key, single(item, &value_kind, &here)?);
    }
    Ok(Pv::Map(out))
}

fn single(v: &Value, kind: &Kind, path: &str) -> Result<Pv, Mismatch> {
    let int = |v: &Value| {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| mismatch(path, format!("expected an integer, got {v}")))
    };
    Ok(match kind {
        Kind::Message(m) => Pv::Message(to_message(v, m, path)?),
        Kind::String => Pv::String(
            v.as_str()
                .ok_or_else(|| mismatch(path, format!("expected a string, got {v}")))?
                .to_string(),
        ),
        Kind::Bool => Pv::Bool(
            v.as_bool()
                .ok_or_else(|| mismatch(path, format!("expected a boolean, got {v}")))?,
        ),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Pv::I32(i32::try_from(int(v)?).map_err(|_| mismatch(path, "out of range for int32"))?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Pv::I64(int(v)?),
        Kind::Uint32 | Kind::Fixed32 => {
            Pv::U32(u32::try_from(int(v)?).map_err(|_| mismatch(path, "out of range for uint32"))?)
        }
        Kind::Uint64 | Kind::Fixed64 => {
            Pv::U64(u64::try_from(int(v)?).map_err(|_| mismatch(path, "out of range for uint64"))?)
        }
        Kind::Double => Pv::F64(
            v.as_f64()
                .ok_or_else(|| mismatch(path, format!("expected a number, got {v}")))?,
        ),
        Kind::Float => Pv::F32(
            v.as_f64()
                .ok_or_else(|| mismatch(path, format!("expected a number, got {v}")))?
                as f32,
        ),
        Kind::Bytes => {
            let s = v
                .as_str()
                .ok_or_else(|| mismatch(path, "expected a base64 string"))?;
            Pv::Bytes(
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|e| mismatch(path, format!("illegal base64 data: {e}")))?
                    .into(),
            )
        }
        Kind::Enum(_) => return Err(mismatch(path, "enums are not used by Kubernetes types")),
    })
}

/// Fields whose zero value is not the same as leaving them out: Go pointers whose absence
/// means a default (replicas 1, grace period 30 s, automount on …) and fields kube-apiserver
/// writes without `omitempty`. Every other zero, false or empty string from a Go client is
/// a non-pointer field's zero value, which Go's JSON encoder leaves out, and so do we.
const ZERO_MEANS_SOMETHING: &[&str] = &[
    "replicas",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "backoffLimit",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
    "completions",
    "parallelism",
    "ttlSecondsAfterFinished",
    "runAsUser",
    "runAsGroup",
    "fsGroup",
    "runAsNonRoot",
    "privileged",
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "automountServiceAccountToken",
    "enableServiceLinks",
    "shareProcessNamespace",
    "hostUsers",
    "setHostnameAsFQDN",
    "gracePeriodSeconds",
    "orphanDependents",
    "blockOwnerDeletion",
    "controller",
    "immutable",
    "suspend",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "startingDeadlineSeconds",
    "expirationSeconds",
    "priority",
    "deletionGracePeriodSeconds",
    "defaultMode",
    "mode",
    "leaseDurationSeconds",
    "leaseTransitions",
    "started",
    "exitCode",
    "restartCount",
    "ready",
    "value",
    "weight",
    "containerPort",
    "port",
    "maxSkew",
    "code",
    "allowed",
    "denied",
];

fn droppable(field: &FieldDescriptor, v: &Value) -> bool {
    let zero = match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    };
    zero && (v.is_string() || v.is_null() || !ZERO_MEANS_SOMETHING.contains(&field.name()))
}

/// The JSON form of `m`, leaving out what Go's JSON encoder would (see above).
pub fn to_json(m: &DynamicMessage) -> Value {
    if let Some(v) = special::to_json(m, &GENERIC) {
        return v;
    }
    let mut out = Map::new();
    for (field, value) in m.fields() {
        let v = field_json(value);
        if is_inline(&field)
            && let Value::Object(inner) = v
        {
            out.extend(inner);
            continue;
        }
        if !field.is_list() && !field.is_map() && droppable(&field, &v) {
            continue;
        }
        out.insert(json_key(&field), v);
    }
    Value::Object(out)
}

fn field_json(v: &Pv) -> Value {
    match v {
        Pv::Bool(b) => (*b).into(),
        Pv::I32(i) => (*i).into(),
        Pv::I64(i) => (*i).into(),
        Pv::U32(i) => (*i).into(),
        Pv::U64(i) => (*i).into(),
        Pv::F32(f) => {
            serde_json::Number::from_f64(f64::from(*f)).map_or(Value::Null, Value::Number)
        }
        Pv::F64(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Pv::String(s) => s.clone().into(),
        Pv::Bytes(b) => base64::engine::general_purpose::STANDARD.encode(b).into(),
        Pv::EnumNumber(n) => (*n).into(),
        Pv::Message(m) => to_json(m),
        Pv::List(items) => Value::Array(items.iter().map(field_json).collect()),
        Pv::Map(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(i) => i.to_string(),
                    MapKey::I64(i) => i.to_string(),
                    MapKey::U32(i) => i.to_string(),
                    MapKey::U64(i) => i.to_string(),
                };
                out.insert(key, field_json(v));
            }
            Value::Object(out)
        }
    }
}
