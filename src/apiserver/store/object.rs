//! A stored object: its JSON bytes plus what selectors need, extracted once per write.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;

use crate::api::selector::Selector;

/// Field paths usable in `?fieldSelector=` (a missing field reads as `""`, so
/// `spec.nodeName=` selects unscheduled pods as in Kubernetes).
pub const SELECTABLE_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.schedulerName",
    "spec.unschedulable",
    "status.phase",
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
    "type",
    "reason",
];

#[derive(Debug, PartialEq, Eq)]
pub struct Stored {
    /// Revision of the write that produced this version (its resourceVersion).
    pub rev: u64,
    /// The whole object as JSON, resourceVersion included.
    pub bytes: Bytes,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    fields: Vec<(&'static str, String)>,
}

fn field_value(v: &Value, path: &str) -> Option<String> {
    let mut cur = v;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Stored {
    /// Builds the stored form of `value` (whose resourceVersion is already `rev`).
    pub fn new(rev: u64, value: &Value) -> Stored {
        let meta = value.get("metadata");
        let s = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let labels = meta
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let fields = SELECTABLE_FIELDS[2..]
            .iter()
            .filter_map(|p| Some((*p, field_value(value, p)?)))
            .collect();
        Stored {
            rev,
            bytes: Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
            namespace: s("namespace"),
            name: s("name"),
            uid: s("uid"),
            labels,
            fields,
        }
    }

    /// The object as a JSON value.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }

    /// A selectable field's value; missing fields are `""`.
    pub fn field(&self, path: &str) -> &str {
        match path {
            "metadata.name" => &self.name,
            "metadata.namespace" => &self.namespace,
            _ => self
                .fields
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, v)| v.as_str())
                .unwrap_or(""),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub path: String,
    pub equal: bool,
    pub value: String,
}

#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("{0}")]
    Label(#[from] crate::api::selector::SelectorError),
    #[error("field label not supported: {0}")]
    Field(String),
    #[error("invalid field selector {0:?}")]
    FieldSyntax(String),
}

/// What a list or watch selects: namespace, labels, fields.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: Selector,
    pub fields: Vec<FieldRequirement>,
}

impl Filter {
    pub fn parse(
        namespace: Option<String>,
        labels: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Filter, FilterError> {
        let labels = Selector::parse(labels.unwrap_or(""))?;
        let mut reqs = Vec::new();
        for part in fields
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (path, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(FilterError::FieldSyntax(part.to_string()));
            };
            let path = path.trim();
            if !SELECTABLE_FIELDS.contains(&path) {
                return Err(FilterError::Field(path.to_string()));
            }
            reqs.push(FieldRequirement {
                path: path.into(),
                equal,
                value: value.trim().into(),
            });
        }
        Ok(Filter {
            namespace,
            labels,
            fields: reqs,
        })
    }

    pub fn matches(&self, obj: &Stored) -> bool {
        if self
            .namespace
            .as_deref()
            .is_some_and(|ns| ns != obj.namespace)
        {
            return false;
        }
        self.labels.matches(&obj.labels)
            && self
                .fields
                .iter()
                .all(|f| (obj.field(&f.path) == f.value) == f.equal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_on_namespace_labels_and_fields() {
        let pod = serde_json::json!({"metadata": {"name": "p", "namespace": "a", "labels": {"app": "web"}},
            "spec": {"schedulerName": "koord-scheduler"}, "status": {"phase": "Pending"}});
        let s = Stored::new(7, &pod);
        let f = |ns: Option<&str>, l: &str, fl: &str| {
            Filter::parse(ns.map(str::to_string), Some(l), Some(fl)).unwrap()
        };
        assert!(
            f(Some("a"), "app=web", "spec.nodeName=").matches(&s),
            "missing nodeName reads as empty"
        );
        assert!(!f(Some("b"), "", "").matches(&s));
        assert!(
            f(
                None,
                "",
                "spec.schedulerName=koord-scheduler,status.phase!=Running"
            )
            .matches(&s)
        );
        assert!(!f(None, "app=db", "").matches(&s));
        assert!(f(None, "", "metadata.name=p").matches(&s));
        assert!(Filter::parse(None, None, Some("spec.bogus=x")).is_err());
        assert!(Filter::parse(None, None, Some("nonsense")).is_err());
    }
}
