//! Non-panicking edits of JSON objects (serde_json's `IndexMut` panics on a non-object,
//! and request objects come from outside the process).

use serde_json::{Map, Value};

/// The object under `key`, created when absent or null; `None` if something else is there.
pub fn child<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    child_of_map(v.as_object_mut()?, key)
}

/// Like [`child`], on a map.
pub fn child_of_map<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let slot = m
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// The object at a path of keys, created along the way.
pub fn path<'a>(v: &'a mut Value, keys: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v;
    for k in keys {
        child(cur, k)?;
        cur = cur.get_mut(*k)?;
    }
    cur.as_object_mut()
}

pub fn str_map(v: Option<&Value>) -> std::collections::BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

pub fn labels(obj: &Value) -> std::collections::BTreeMap<String, String> {
    str_map(obj.pointer("/metadata/labels"))
}

pub fn annotations(obj: &Value) -> std::collections::BTreeMap<String, String> {
    str_map(obj.pointer("/metadata/annotations"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn creates_and_refuses() {
        let mut v = json!({"metadata": {"labels": null}});
        path(&mut v, &["metadata", "labels"])
            .unwrap()
            .insert("a".into(), "b".into());
        assert_eq!(v["metadata"]["labels"]["a"], "b");
        let mut bad = json!({"metadata": "oops"});
        assert!(path(&mut bad, &["metadata", "labels"]).is_none());
        assert!(child(&mut json!(3), "x").is_none());
    }
}
