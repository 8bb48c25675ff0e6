//! Sets of field paths, as structured-merge-diff tracks ownership: a path walks map fields
//! (`f:name`), items of keyed lists (`k:{"name":"web"}`) and of set-like lists
//! (`v:"value"`); a member is a leaf, an atomic list, an empty map or a list item (`.`).
//! Serialized as `FieldsV1`, the JSON tree kube-apiserver writes in `managedFields`.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use crate::api::patch::{ListStrategy, list_strategy};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    Field(String),
    /// A keyed list item: the key object as compact JSON (`{"name":"web"}`).
    Key(String),
    /// A set-like list item: the value as compact JSON.
    Value(String),
}

pub type Path = Vec<Element>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(pub BTreeSet<Path>);

/// `.spec.containers[name="web"].image`, as kube-apiserver names fields in conflicts.
pub struct Display<'a>(pub &'a [Element]);

impl fmt::Display for Display<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in self.0 {
            match e {
                Element::Field(n) => write!(f, ".{n}")?,
                Element::Value(v) => write!(f, "[={v}]")?,
                Element::Key(k) => {
                    let Ok(Value::Object(m)) = serde_json::from_str::<Value>(k) else {
                        write!(f, "[{k}]")?;
                        continue;
                    };
                    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    write!(f, "[{}]", parts.join(","))?;
                }
            }
        }
        Ok(())
    }
}

/// Fields the server sets, which nobody manages.
fn ignored(path: &[Element]) -> bool {
    const META: &[&str] = &[
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    ];
    match path {
        [Element::Field(f)] => f == "apiVersion" || f == "kind",
        [Element::Field(m), Element::Field(f), ..] if m == "metadata" => META.contains(&f.as_str()),
        _ => false,
    }
}

/// How the items of list `field` are identified: by a key field, by value, or not at all
/// (the list is replaced as a whole, and owned as one field).
pub fn item_key(field: &str, list: &[Value], item: &Value) -> Option<Element> {
    match list_strategy(field, Some(list), &[])? {
        ListStrategy::Key(k) => {
            let mut key = Map::new();
            key.insert(k.to_string(), item.get(k)?.clone());
            Some(Element::Key(Value::Object(key).to_string()))
        }
        ListStrategy::Primitive => Some(Element::Value(item.to_string())),
    }
}

impl FieldSet {
    /// Every field set in `obj` but the server's own (and `status` when `skip_status`).
    pub fn of_object(obj: &Value, skip_status: bool) -> FieldSet {
        let mut set = FieldSet::default();
        let mut path = Vec::new();
        collect(obj, &mut path, &mut set.0);
        let is_status = |p: &Path| p.first() == Some(&Element::Field("status".into()));
        set.0
            .retain(|p| !(ignored(p) || (skip_status && is_status(p))));
        set
    }

    /// Only the `status` part of `obj` (writes to the status subresource).
    pub fn of_status(obj: &Value) -> FieldSet {
        let mut set = FieldSet::of_object(obj, false);
        set.0
            .retain(|p| p.first() == Some(&Element::Field("status".into())));
        set
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn union(&self, o: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&o.0).cloned().collect())
    }

    pub fn minus(&self, o: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&o.0).cloned().collect())
    }

    pub fn intersect(&self, o: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&o.0).cloned().collect())
    }

    /// The `FieldsV1` tree.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Map::new();
        for path in &self.0 {
            let mut node = &mut root;
            for e in path {
                let k = match e {
                    Element::Field(n) => format!("f:{n}"),
                    Element::Key(k) => format!("k:{k}"),
                    Element::Value(v) => format!("v:{v}"),
                };
                node = node
                    .entry(k)
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                    .expect("field set nodes are objects");
            }
            // A member that is also a prefix of others is marked with ".".
            if path.last().is_some_and(|e| !matches!(e, Element::Field(_)))
                || self
                    .0
                    .range(path.clone()..)
                    .nth(1)
                    .is_some_and(|n| n.starts_with(path))
            {
                node.insert(".".into(), Value::Object(Map::new()));
            }
        }
        Value::Object(root)
    }

    pub fn from_fields_v1(v: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        parse(v, &mut Vec::new(), &mut set.0);
        set
    }
}

fn collect(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                path.push(Element::Field(k.clone()));
                collect(c, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            let field = match path.last() {
                Some(Element::Field(f)) => f.clone(),
                _ => String::new(),
            };
            let keys: Option<Vec<Element>> =
                items.iter().map(|i| item_key(&field, items, i)).collect();
            match keys {
                Some(keys) if !items.is_empty() => {
                    for (item, key) in items.iter().zip(keys) {
                        let is_value = matches!(key, Element::Value(_));
                        path.push(key);
                        out.insert(path.clone());
                        if !is_value {
                            collect(item, path, out);
                        }
                        path.pop();
                    }
                }
                _ => {
                    out.insert(path.clone());
                }
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

fn parse(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    let Value::Object(m) = v else {
        return;
    };
    if m.is_empty() && !path.is_empty() {
        out.insert(path.clone());
        return;
    }
    for (k, child) in m {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        let e = if let Some(n) = k.strip_prefix("f:") {
            Element::Field(n.to_string())
        } else if let Some(n) = k.strip_prefix("k:") {
            Element::Key(n.to_string())
        } else if let Some(n) = k.strip_prefix("v:") {
            Element::Value(n.to_string())
        } else {
            continue;
        };
        path.push(e);
        parse(child, path, out);
        path.pop();
    }
}
