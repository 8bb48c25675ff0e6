//! What a write of a custom object goes through before it is validated, in kube's order:
//! unknown fields pruned, nulls of non-nullable fields dropped, schema defaults applied.

use serde_json::{Map, Value};

use super::{Additional, Schema, Seg, render};

/// Fields kube keeps at an object's root and in an embedded resource whatever the schema.
const TYPE_META: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Removes every field the schema does not declare (apart from `apiVersion`, `kind` and
/// `metadata` at the root and in embedded resources, and under
/// `x-kubernetes-preserve-unknown-fields`); returns their paths (`spec.x`, `spec.a[0].b`).
pub fn prune(obj: &mut Value, schema: &Schema, resource_root: bool) -> Vec<String> {
    let mut pruned = Vec::new();
    let mut path = Vec::new();
    prune_at(obj, Some(schema), resource_root, &mut path, &mut pruned);
    pruned
}

/// `None` is kube's nil schema: every field below it is unknown.
pub(super) fn prune_at(
    v: &mut Value,
    s: Option<&Schema>,
    root: bool,
    path: &mut Vec<Seg>,
    pruned: &mut Vec<String>,
) {
    match v {
        Value::Object(map) => {
            let resource = root || s.is_some_and(|s| s.embedded);
            prune_object(map, s, resource, path, pruned)
        }
        Value::Array(items) => {
            let item = s.and_then(|s| s.items.as_deref());
            for (i, x) in items.iter_mut().enumerate() {
                path.push(Seg::Index(i));
                prune_at(x, item, false, path, pruned);
                path.pop();
            }
        }
        _ => {}
    }
}

fn prune_object(
    map: &mut Map<String, Value>,
    s: Option<&Schema>,
    resource: bool,
    path: &mut Vec<Seg>,
    pruned: &mut Vec<String>,
) {
    let mut drop = Vec::new();
    for (k, child) in map.iter_mut() {
        if resource && TYPE_META.contains(&k.as_str()) {
            continue;
        }
        path.push(Seg::Key(k.clone()));
        match s.map(|s| (s.child(k), &s.additional, s.preserve_unknown)) {
            Some((Some(cs), _, _)) => prune_at(child, Some(cs), false, path, pruned),
            // A boolean additionalProperties keeps the keys, not what is below them.
            Some((None, Additional::Any, _)) => prune_at(child, None, false, path, pruned),
            Some((None, _, true)) => {}
            _ => {
                pruned.push(render(path));
                drop.push(k.clone());
            }
        }
        path.pop();
    }
    for k in drop {
        map.remove(&k);
    }
}

/// Drops `null` values of fields that are neither `nullable` nor defaulted (a defaulted
/// one gets its default instead), as kube does before defaulting.
pub fn drop_nulls(v: &mut Value, s: &Schema) {
    match v {
        Value::Object(map) => {
            map.retain(|k, child| match s.child(k) {
                Some(cs) => !(child.is_null() && !cs.nullable && cs.default.is_none()),
                None => true,
            });
            for (k, child) in map.iter_mut() {
                if let Some(cs) = s.child(k) {
                    drop_nulls(child, cs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &s.items {
                items.iter_mut().for_each(|x| drop_nulls(x, item));
            }
        }
        _ => {}
    }
}

/// Sets every missing (or null, non-nullable) field that has a schema `default`, at any
/// depth: in objects, in map values and in list items — never the root itself.
pub fn default(v: &mut Value, s: &Schema) {
    match v {
        Value::Object(map) => {
            for (k, ps) in &s.properties {
                if let Some(d) = &ps.default
                    && !map.contains_key(k)
                {
                    map.insert(k.clone(), d.clone());
                }
            }
            for (k, child) in map.iter_mut() {
                if let Some(cs) = s.child(k) {
                    fill_null(child, cs);
                    default(child, cs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &s.items {
                for x in items.iter_mut() {
                    fill_null(x, item);
                    default(x, item);
                }
            }
        }
        _ => {}
    }
}

/// A null where the schema is not nullable takes the schema's default.
fn fill_null(v: &mut Value, s: &Schema) {
    if v.is_null()
        && !s.nullable
        && let Some(d) = &s.default
    {
        *v = d.clone();
    }
}
