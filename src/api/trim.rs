//! An object's JSON text without `metadata.managedFields`, cut out before decoding. No
//! koord role reads managedFields from what it watches, and decoding them is most of what
//! a typed decode allocates for a small object (every `fieldsV1` is a tree of maps), only
//! to be dropped. The cut is found by a scan that knows JSON strings and nesting, so a
//! `"managedFields"` inside a string or deeper in the object is left alone, and text it
//! cannot follow up to the member is returned as it was (the decoder reports the error).

use std::borrow::Cow;

/// `text` with the top-level object's `metadata.managedFields` member removed.
pub fn without_managed_fields(text: &str) -> Cow<'_, str> {
    match managed_fields_span(text.as_bytes()) {
        Some((from, to)) => {
            let mut out = String::with_capacity(text.len() - (to - from));
            out.push_str(&text[..from]);
            out.push_str(&text[to..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// `b[i]` is `"`: the index just past the closing quote.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The index just past the value starting at `b[i]`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            // Open brackets as bits (1 = object), so a mismatched closer is noticed
            // without allocating; deeper than 64 levels is not followed.
            let (mut stack, mut depth) = (0u64, 0u32);
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    c @ (b'{' | b'[') => {
                        if depth == 64 {
                            return None;
                        }
                        stack = (stack << 1) | (c == b'{') as u64;
                        depth += 1;
                    }
                    c @ (b'}' | b']') => {
                        if depth == 0 || (stack & 1 == 1) != (c == b'}') {
                            return None;
                        }
                        stack >>= 1;
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
            {
                j += 1;
            }
            Some(j)
        }
    }
}

/// Walks the members of the object at `b[i]` (`{`), calling `f(key, key_start, value_start,
/// value_end)` until it returns a result.
fn members<T>(
    b: &[u8],
    i: usize,
    mut f: impl FnMut(&[u8], usize, usize, usize) -> Option<T>,
) -> Option<T> {
    let mut i = ws(b, i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(b, i + 1);
    while b.get(i) == Some(&b'"') {
        let key_end = string_end(b, i)?;
        let colon = ws(b, key_end);
        if b.get(colon) != Some(&b':') {
            return None;
        }
        let start = ws(b, colon + 1);
        let end = value_end(b, start)?;
        if let Some(t) = f(&b[i + 1..key_end - 1], i, start, end) {
            return Some(t);
        }
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            _ => return None,
        }
    }
    None
}

/// The byte range to cut: the member with its separating comma.
fn managed_fields_span(b: &[u8]) -> Option<(usize, usize)> {
    let meta_start = members(b, 0, |k, _, start, _| (k == b"metadata").then_some(start))?;
    let mut prev_end = None;
    members(b, meta_start, |k, key_start, _, end| {
        if k == b"managedFields" {
            let after = ws(b, end);
            return Some(match (b.get(after), prev_end) {
                (Some(b','), _) => (key_start, ws(b, after + 1)),
                (_, Some(p)) => (p, end),
                _ => (key_start, end),
            });
        }
        prev_end = Some(end);
        None
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn cut(v: &Value) -> Value {
        let text = v.to_string();
        serde_json::from_str(&without_managed_fields(&text)).unwrap()
    }

    #[test]
    fn managed_fields_are_cut_wherever_they_sit_in_metadata() {
        let mf =
            json!([{"manager": "m", "fieldsV1": {"f:spec": {"f:x": {}}}, "operation": "Update"}]);
        for meta in [
            json!({"name": "a", "managedFields": mf, "uid": "u"}),
            json!({"managedFields": mf, "name": "a", "uid": "u"}),
            json!({"name": "a", "uid": "u", "managedFields": mf}),
        ] {
            let obj = json!({"kind": "Pod", "metadata": meta, "spec": {"x": 1}});
            let want =
                json!({"kind": "Pod", "metadata": {"name": "a", "uid": "u"}, "spec": {"x": 1}});
            assert_eq!(cut(&obj), want);
        }
        let only = json!({"metadata": {"managedFields": mf}, "spec": {}});
        assert_eq!(cut(&only), json!({"metadata": {}, "spec": {}}));
    }

    #[test]
    fn the_same_word_elsewhere_is_left_alone() {
        let obj = json!({
            "spec": {"managedFields": [1]},
            "metadata": {"annotations": {"a": "\"managedFields\": [\\\"x\"] }"}, "name": "n"},
        });
        assert_eq!(cut(&obj), obj);
        let text =
            r#"{ "metadata" : { "name" : "n" , "managedFields" : [ {"a":"]}"} ] } , "x" : true }"#;
        let v: Value = serde_json::from_str(&without_managed_fields(text)).unwrap();
        assert_eq!(v, json!({"metadata": {"name": "n"}, "x": true}));
    }

    fn json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[ -~\"\\\\é\\]\\[{}]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-zA-Z\"{}]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever else the object holds, the cut text decodes to the object without
        /// `metadata.managedFields` — compact or pretty-printed.
        #[test]
        fn the_cut_text_is_the_object_without_managed_fields(
            top in json(), meta in json(), mf in json(), with in proptest::bool::ANY,
            pretty in proptest::bool::ANY,
        ) {
            let mut obj = match top { Value::Object(m) => Value::Object(m), _ => json!({}) };
            let mut meta = match meta { Value::Object(m) => Value::Object(m), _ => json!({}) };
            meta.as_object_mut().unwrap().remove("managedFields");
            let want_meta = meta.clone();
            if with {
                meta["managedFields"] = mf;
            }
            obj["metadata"] = meta;
            let mut want = obj.clone();
            want["metadata"] = want_meta;
            let text = if pretty {
                serde_json::to_string_pretty(&obj).unwrap()
            } else {
                obj.to_string()
            };
            let cut: Value = serde_json::from_str(&without_managed_fields(&text)).unwrap();
            proptest::prop_assert_eq!(cut, want);
        }

        #[test]
        fn any_text_is_safe(text in "[ -~\n]{0,120}") {
            let cut = without_managed_fields(&text);
            if let (Ok(a), Ok(b)) = (
                serde_json::from_str::<Value>(&text),
                serde_json::from_str::<Value>(&cut),
            ) {
                let mut a = a;
                if let Some(m) = a.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("managedFields");
                }
                proptest::prop_assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn text_it_cannot_follow_is_returned_unchanged() {
        for t in [
            "",
            "[]",
            "{",
            r#"{"metadata": {"managedFields": [}"#,
            r#"{"metadata" 1}"#,
        ] {
            assert!(matches!(without_managed_fields(t), Cow::Borrowed(_)), "{t}");
        }
    }
}
