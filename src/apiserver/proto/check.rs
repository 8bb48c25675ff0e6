//! Type checking of built-in objects against their messages, as kube-apiserver's decoding
//! does: a wrongly typed field is an error naming the field in Go's words, and fields the
//! type does not have are listed (for `fieldValidation`).

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::Value;

use super::special;
use super::transcode::{field_for, inline_fields, is_inline};

/// A field whose JSON type is wrong, in `encoding/json`'s terms.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeError {
    /// What the JSON held: "string", "number", "bool", "array", "object".
    pub got: String,
    /// `ContainerPort.spec.containers.ports.containerPort`.
    pub field: String,
    /// `int32`, `[]v1.Container`.
    pub want: String,
}

impl std::fmt::Display for TypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "json: cannot unmarshal {} into Go struct field {} of type {}",
            self.got, self.field, self.want
        )
    }
}

fn json_type(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

fn go_type(kind: &Kind) -> String {
    match kind {
        Kind::String => "string".into(),
        Kind::Bool => "bool".into(),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => "int32".into(),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => "int64".into(),
        Kind::Uint32 | Kind::Fixed32 => "uint32".into(),
        Kind::Uint64 | Kind::Fixed64 => "uint64".into(),
        Kind::Double => "float64".into(),
        Kind::Float => "float32".into(),
        Kind::Bytes => "[]uint8".into(),
        Kind::Enum(e) => e.name().into(),
        Kind::Message(m) => {
            let version = m.package_name().rsplit('.').next().unwrap_or("");
            format!("{version}.{}", m.name())
        }
    }
}

fn field_type(f: &FieldDescriptor) -> String {
    let kind = f.kind();
    if f.is_map()
        && let Kind::Message(entry) = &kind
    {
        return format!(
            "map[string]{}",
            go_type(&entry.map_entry_value_field().kind())
        );
    }
    if f.is_list() {
        return format!("[]{}", go_type(&kind));
    }
    go_type(&kind)
}

/// The field named `key` in `desc` or in a struct it embeds inline.
fn lookup(desc: &MessageDescriptor, key: &str) -> Option<FieldDescriptor> {
    if let Some(f) = field_for(desc, key).filter(|f| !is_inline(f)) {
        return Some(f);
    }
    inline_fields(desc).find_map(|sub| lookup(&sub, key))
}

/// The Go struct a field belongs to.
fn owner_of(field: &FieldDescriptor) -> &str {
    let full = field.full_name();
    let mut parts = full.rsplit('.');
    parts.next();
    parts.next().unwrap_or_default()
}

struct Walk<'a> {
    /// JSON field names from the root, without list indices.
    path: Vec<String>,
    /// The same with list indices (`containers[0]`), for unknown fields.
    indexed: Vec<String>,
    unknown: &'a mut Vec<String>,
}

impl Walk<'_> {
    fn dotted(&self, leaf: &str) -> String {
        let mut p = self.path.clone();
        p.push(leaf.to_string());
        p.join(".")
    }

    fn message(&mut self, v: &Value, desc: &MessageDescriptor) -> Result<(), TypeError> {
        if let Some(done) = special::to_message(v, desc, "", &super::transcode::GENERIC).transpose()
        {
            return done.map(|_| ()).map_err(|_| TypeError {
                got: json_type(v),
                field: self.path.join("."),
                want: go_type(&Kind::Message(desc.clone())),
            });
        }
        let Value::Object(obj) = v else {
            return Err(TypeError {
                got: json_type(v),
                field: self.path.join("."),
                want: go_type(&Kind::Message(desc.clone())),
            });
        };
        for (key, val) in obj {
            let Some(field) = lookup(desc, key) else {
                if !(self.path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind")) {
                    let mut p = self.indexed.clone();
                    p.push(key.clone());
                    self.unknown.push(p.join("."));
                }
                continue;
            };
            if val.is_null() {
                continue;
            }
            let owner = owner_of(&field);
            self.path.push(key.clone());
            self.indexed.push(key.clone());
            let result = if field.is_map() {
                let Value::Object(m) = val else {
                    self.path.pop();
                    self.indexed.pop();
                    return Err(self.mismatch(key, &field, val));
                };
                let vk = match field.kind() {
                    Kind::Message(e) => e.map_entry_value_field().kind(),
                    k => k,
                };
                m.values()
                    .try_for_each(|item| self.single(item, &vk, owner, key))
            } else if field.is_list() {
                let Value::Array(items) = val else {
                    self.path.pop();
                    self.indexed.pop();
                    return Err(self.mismatch(key, &field, val));
                };
                let kind = field.kind();
                items.iter().enumerate().try_for_each(|(i, item)| {
                    if let Some(last) = self.indexed.last_mut() {
                        *last = format!("{key}[{i}]");
                    }
                    self.single(item, &kind, owner, key)
                })
            } else {
                self.single(val, &field.kind(), owner, key)
            };
            self.path.pop();
            self.indexed.pop();
            result?;
        }
        Ok(())
    }

    fn mismatch(&self, key: &str, field: &FieldDescriptor, val: &Value) -> TypeError {
        TypeError {
            got: json_type(val),
            field: format!("{}.{}", owner_of(field), self.dotted(key)),
            want: field_type(field),
        }
    }

    fn single(&mut self, v: &Value, kind: &Kind, owner: &str, key: &str) -> Result<(), TypeError> {
        let ok = match kind {
            Kind::Message(m) => return self.message(v, m),
            Kind::String | Kind::Bytes => v.is_string(),
            Kind::Bool => v.is_boolean(),
            Kind::Double | Kind::Float => v.is_number(),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                v.as_i64().is_some_and(|i| i32::try_from(i).is_ok())
            }
            Kind::Uint32 | Kind::Fixed32 => v.as_u64().is_some_and(|i| u32::try_from(i).is_ok()),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => v.is_i64(),
            Kind::Uint64 | Kind::Fixed64 => v.is_u64(),
            Kind::Enum(_) => v.is_number(),
        };
        if ok || v.is_null() {
            return Ok(());
        }
        let mut path = self.path.clone();
        if path.last().map(String::as_str) != Some(key) {
            path.push(key.to_string());
        }
        Err(TypeError {
            got: json_type(v),
            field: format!("{owner}.{}", path.join(".")),
            want: go_type(kind),
        })
    }
}

/// Checks `obj` against `desc`; on success, the paths of fields the type lacks.
pub fn check(obj: &Value, desc: &MessageDescriptor) -> Result<Vec<String>, TypeError> {
    let mut unknown = Vec::new();
    let mut walk = Walk {
        path: Vec::new(),
        indexed: Vec::new(),
        unknown: &mut unknown,
    };
    walk.message(obj, desc)?;
    Ok(unknown)
}
