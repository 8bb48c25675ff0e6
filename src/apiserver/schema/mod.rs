//! CRD structural schemas, as apiextensions-apiserver uses them: compiled once per served
//! version when a CRD is registered, then on every write of a custom object the server
//! prunes unknown fields (`prune`), drops nulls of non-nullable fields and applies schema
//! defaults (`default`), and validates (`check`) — with ratcheting on update: a field an
//! update leaves as it was is not refused for rules it broke before.

mod check;
mod compile;
mod formats;
mod prune;
mod structural;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

pub use check::validate;
pub use compile::compile;
pub use prune::{default, drop_nulls, prune};
pub use structural::check_crd;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Type {
    fn parse(s: &str) -> Option<Type> {
        Some(match s {
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }
}

/// `additionalProperties`: absent, `true` (keep any value) or a schema for map values.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Additional {
    #[default]
    None,
    Any,
    Schema(Box<Schema>),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ListType {
    #[default]
    Atomic,
    Set,
    Map,
}

/// A compiled `pattern`: compared by its source.
#[derive(Clone)]
pub struct Pattern {
    pub source: String,
    pub re: regex::Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, o: &Pattern) -> bool {
        self.source == o.source
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// The value validations of one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checks {
    pub required: Vec<String>,
    pub enumeration: Vec<Value>,
    /// The bound and whether it is exclusive.
    pub minimum: Option<(f64, bool)>,
    pub maximum: Option<(f64, bool)>,
    pub multiple_of: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    pub pattern: Option<Pattern>,
    pub format: Option<String>,
    pub list_type: ListType,
    pub map_keys: Vec<String>,
    pub all_of: Vec<Schema>,
    pub any_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,
}

/// One node of a structural schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    pub ty: Option<Type>,
    pub nullable: bool,
    pub int_or_string: bool,
    pub preserve_unknown: bool,
    pub embedded: bool,
    pub properties: BTreeMap<String, Schema>,
    pub additional: Additional,
    pub items: Option<Box<Schema>>,
    pub default: Option<Value>,
    pub checks: Checks,
}

impl Schema {
    /// The schema of `key`'s value in an object of this schema.
    pub fn child(&self, key: &str) -> Option<&Schema> {
        self.properties.get(key).or(match &self.additional {
            Additional::Schema(s) => Some(s),
            _ => None,
        })
    }
}

/// One step of a path into an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A field path as kube's schema errors print it: `spec.owners[0].name`.
pub fn render(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if s.is_empty() => s.push_str(k),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The value at `path`.
pub fn at<'a>(v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| match seg {
        Seg::Key(k) => cur.get(k.as_str()),
        Seg::Index(i) => cur.get(*i),
    })
}
