//! Field management, as kube-apiserver keeps it in `metadata.managedFields`: every write
//! records which manager set which fields (Update entries); server-side apply
//! (`application/apply-patch+yaml`) merges a manager's intent into the object, removes what
//! it no longer sets, and refuses to change fields another manager owns (409) unless forced.

pub mod fieldset;

use serde_json::{Value, json};

use crate::api::time::now;
use fieldset::{Display, Element, FieldSet, item_key};

/// Who is writing: the `fieldManager` parameter, else the User-Agent's product name.
#[derive(Debug, Clone)]
pub struct Manager {
    pub name: String,
    pub subresource: Option<String>,
    pub api_version: String,
}

/// The manager name kube-apiserver derives from a User-Agent (`kubectl/v1.32 (…)` → kubectl).
pub fn from_user_agent(ua: Option<&str>) -> String {
    ua.and_then(|u| u.split('/').next())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .chars()
        .take(128)
        .collect()
}

#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn is(&self, m: &Manager, operation: &str) -> bool {
        self.manager == m.name && self.operation == operation && self.subresource == m.subresource
    }

    fn to_json(&self) -> Value {
        let mut e = json!({
            "manager": self.manager, "operation": self.operation,
            "apiVersion": self.api_version, "time": self.time,
            "fieldsType": "FieldsV1", "fieldsV1": self.fields.to_fields_v1(),
        });
        if let Some(s) = &self.subresource {
            e["subresource"] = s.clone().into();
        }
        e
    }
}

fn entries(obj: Option<&Value>) -> Vec<Entry> {
    let Some(list) = obj
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let s = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    list.iter()
        .map(|e| Entry {
            manager: s(e, "manager"),
            operation: s(e, "operation"),
            api_version: s(e, "apiVersion"),
            time: s(e, "time"),
            subresource: e
                .get("subresource")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            fields: FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&Value::Null)),
        })
        .collect()
}

fn write_entries(obj: &mut Value, list: Vec<Entry>) {
    let list: Vec<Value> = list
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| e.to_json())
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// The fields a write through `m` can touch: the status subresource writes status only,
/// the main resource everything else when the type has a status subresource.
fn fields_of(obj: &Value, m: &Manager, has_status: bool) -> FieldSet {
    match m.subresource.as_deref() {
        Some("status") => FieldSet::of_status(obj),
        _ => FieldSet::of_object(obj, has_status),
    }
}

/// The value at `path`, if the object has it.
fn value_at<'a>(obj: &'a Value, path: &[Element]) -> Option<&'a Value> {
    let mut cur = obj;
    let mut field = "";
    for e in path {
        cur = match e {
            Element::Field(f) => {
                field = f;
                cur.get(f)?
            }
            Element::Key(_) | Element::Value(_) => {
                let items = cur.as_array()?;
                items
                    .iter()
                    .find(|i| item_key(field, items, i).as_ref() == Some(e))?
            }
        };
    }
    Some(cur)
}

/// Members whose value differs between the two objects (list items: that appeared).
fn changed(old: Option<&Value>, new: &Value, set: &FieldSet) -> FieldSet {
    FieldSet(
        set.0
            .iter()
            .filter(|p| {
                let before = old.and_then(|o| value_at(o, p));
                match p.last() {
                    Some(Element::Field(_)) => before != value_at(new, p),
                    _ => before.is_none(),
                }
            })
            .cloned()
            .collect(),
    )
}

/// Records an Update by `m` (create, PUT, or a non-apply PATCH) in `new`'s managedFields:
/// `m` gains what it changed, the other managers lose it, and removed fields leave
/// everyone.
pub fn record_update(old: Option<&Value>, new: &mut Value, m: &Manager, has_status: bool) {
    let mut list = entries(old);
    let before = old.map(|o| fields_of(o, m, has_status)).unwrap_or_default();
    let after = fields_of(new, m, has_status);
    let gained = changed(old, new, &after);
    let removed = before.minus(&after);
    for e in list.iter_mut() {
        e.fields = e.fields.minus(&gained).minus(&removed);
    }
    match list.iter_mut().find(|e| e.is(m, "Update")) {
        Some(e) if !gained.is_empty() => {
            e.fields = e.fields.union(&gained);
            e.time = now();
            e.api_version = m.api_version.clone();
        }
        Some(_) => {}
        None => list.push(Entry {
            manager: m.name.clone(),
            operation: "Update".into(),
            api_version: m.api_version.clone(),
            time: now(),
            subresource: m.subresource.clone(),
            fields: gained,
        }),
    }
    write_entries(new, list);
}

/// Fields another manager owns that this apply would change.
#[derive(Debug)]
pub struct Conflicts(Vec<(String, String)>);

impl Conflicts {
    /// kube-apiserver's message: `Apply failed with 1 conflict: conflict with "x" using v1: .data.k`.
    pub fn message(&self) -> String {
        if let [(who, path)] = self.0.as_slice() {
            return format!("Apply failed with 1 conflict: conflict with {who}: {path}");
        }
        let mut by: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (who, path) in &self.0 {
            by.entry(who).or_default().push(path);
        }
        let mut lines = Vec::new();
        for (who, paths) in by {
            lines.push(format!("conflicts with {who}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }

    /// `(manager, field)` for the Status causes.
    pub fn causes(&self) -> &[(String, String)] {
        &self.0
    }
}

fn describe(e: &Entry) -> String {
    let mut s = format!("{:?}", e.manager);
    if let Some(sub) = &e.subresource {
        s.push_str(&format!(" with subresource {sub:?}"));
    }
    if e.operation == "Update" {
        s.push_str(&format!(" using {}", e.api_version));
    }
    s
}

/// Server-side apply: the object `m`'s configuration `applied` makes of `live`, or the
/// conflicts that stop it. With `force`, the fields change hands instead.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    m: &Manager,
    force: bool,
    has_status: bool,
) -> Result<Value, Conflicts> {
    let mut list = entries(live);
    let applied_set = fields_of(applied, m, has_status);
    let base = live.cloned().unwrap_or_else(|| json!({}));
    let mut merged = base.clone();
    merge(&mut merged, applied);
    let taken = changed(live, &merged, &applied_set);
    let mut conflicts = Vec::new();
    for e in list.iter_mut().filter(|e| !e.is(m, "Apply")) {
        let lost = e.fields.intersect(&taken);
        if !force {
            conflicts.extend(lost.0.iter().map(|p| (describe(e), Display(p).to_string())));
        }
        e.fields = e.fields.minus(&lost);
    }
    if !conflicts.is_empty() {
        return Err(Conflicts(conflicts));
    }
    let previous = list
        .iter()
        .find(|e| e.is(m, "Apply"))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others = list
        .iter()
        .filter(|e| !e.is(m, "Apply"))
        .fold(FieldSet::default(), |acc, e| acc.union(&e.fields));
    let dropped = previous.minus(&applied_set).minus(&others);
    for path in dropped.0.iter().rev() {
        remove(&mut merged, path);
    }
    match list.iter_mut().find(|e| e.is(m, "Apply")) {
        Some(e) => {
            if e.fields != applied_set {
                e.time = now();
            }
            e.fields = applied_set;
            e.api_version = m.api_version.clone();
        }
        None => list.push(Entry {
            manager: m.name.clone(),
            operation: "Apply".into(),
            api_version: m.api_version.clone(),
            time: now(),
            subresource: m.subresource.clone(),
            fields: applied_set,
        }),
    }
    write_entries(&mut merged, list);
    Ok(merged)
}

/// Deep merge of an applied configuration: maps field by field, keyed and set-like lists
/// item by item, everything else replaced.
fn merge(into: &mut Value, applied: &Value) {
    match (into, applied) {
        (Value::Object(dst), Value::Object(src)) => {
            for (k, v) in src.iter().filter(|(_, v)| !v.is_null()) {
                match dst.get_mut(k) {
                    Some(slot) => merge_field(k, slot, v),
                    None => {
                        dst.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

fn merge_field(field: &str, slot: &mut Value, v: &Value) {
    let (Value::Array(dst), Value::Array(src)) = (&mut *slot, v) else {
        return merge(slot, v);
    };
    let keyed = src.iter().all(|i| item_key(field, src, i).is_some()) && !src.is_empty();
    if !keyed {
        *slot = v.clone();
        return;
    }
    for item in src {
        let key = item_key(field, src, item);
        let existing = dst.iter().position(|d| item_key(field, src, d) == key);
        match existing {
            Some(i) => merge(&mut dst[i], item),
            None => dst.push(item.clone()),
        }
    }
}

/// Removes the member at `path` (a field, or a list item).
fn remove(obj: &mut Value, path: &[Element]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    let mut field = String::new();
    for e in parent {
        let next = match e {
            Element::Field(f) => {
                field = f.clone();
                cur.get_mut(f)
            }
            _ => {
                let Some(items) = cur.as_array_mut() else {
                    return;
                };
                let snapshot = items.clone();
                items
                    .iter_mut()
                    .find(|i| item_key(&field, &snapshot, i).as_ref() == Some(e))
            }
        };
        let Some(next) = next else {
            return;
        };
        cur = next;
    }
    match last {
        Element::Field(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        _ => {
            if let Some(items) = cur.as_array_mut() {
                let snapshot = items.clone();
                items.retain(|i| item_key(&field, &snapshot, i).as_ref() != Some(last));
            }
        }
    }
}

#[cfg(test)]
mod tests;
