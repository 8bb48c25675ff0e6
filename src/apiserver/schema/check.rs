//! Validation of a custom object against its structural schema, with kube-openapi's
//! messages (`spec.ttl in body must be of type string: "integer"`), and ratcheting: on
//! update, a cause inside a part of the object the update left unchanged is dropped, as
//! kube-apiserver does (CRDValidationRatcheting, on by default since 1.30).

use serde_json::{Map, Value};

use super::{ListType, Schema, Seg, Type, at, render};
use crate::apiserver::cause::{Cause, CauseType, quote, show};

/// Every cause the object breaks; with `old` (an update), those it already broke in
/// parts it leaves unchanged are ratcheted away.
pub fn validate(obj: &Value, schema: &Schema, old: Option<&Value>) -> Vec<Cause> {
    let mut found = Vec::new();
    let mut path = Vec::new();
    node(obj, schema, true, &mut path, &mut found);
    found
        .into_iter()
        .filter(|(at_node, _)| !old.is_some_and(|o| unchanged(o, obj, at_node)))
        .map(|(_, c)| c)
        .collect()
}

/// Whether the part of the object that holds `node` is the same in both. kube correlates
/// old and new through object fields (and map lists by key); this follows object fields
/// and compares a list as a whole.
fn unchanged(old: &Value, new: &Value, node: &[Seg]) -> bool {
    let cut = node
        .iter()
        .position(|s| matches!(s, Seg::Index(_)))
        .unwrap_or(node.len());
    let p = &node[..cut];
    matches!((at(old, p), at(new, p)), (Some(a), Some(b)) if a == b)
}

type Found = Vec<(Vec<Seg>, Cause)>;

/// A node's field name, rendered only when a cause needs it (most nodes have none).
struct Name<'a> {
    path: &'a [Seg],
    text: std::cell::OnceCell<String>,
}

impl<'a> Name<'a> {
    fn new(path: &'a [Seg]) -> Self {
        Name {
            path,
            text: std::cell::OnceCell::new(),
        }
    }

    fn get(&self) -> &str {
        self.text.get_or_init(|| render(self.path))
    }
}

impl std::fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

fn node(v: &Value, s: &Schema, root: bool, path: &mut Vec<Seg>, out: &mut Found) {
    let name = Name::new(path);
    let mut push = |c: Cause| out.push((path.to_vec(), c));
    if v.is_null() {
        if !s.nullable && (s.ty.is_some() || s.int_or_string) {
            let want = want_type(s);
            push(type_error(name.get(), "null", &want));
        }
        return;
    }
    if let Some(want) = type_mismatch(v, s) {
        push(type_error(name.get(), json_type(v), &want));
        return;
    }
    if let Some(f) = &s.checks.format
        && let Value::String(text) = v
        && !super::formats::format_ok(f, text)
    {
        let detail = format!("{name} in body must be of type {f}: {}", quote(text));
        push(Cause::type_invalid(name.get(), v, &detail));
    }
    scalar_checks(v, s, &name, &mut push);
    junctors(v, s, &name, path, &mut push);
    match v {
        Value::Object(map) => object(map, s, root, path, out),
        Value::Array(items) => array(items, s, path, out),
        _ => {}
    }
}

fn want_type(s: &Schema) -> String {
    if s.int_or_string {
        "integer,string".into()
    } else {
        s.ty.map(Type::name).unwrap_or("object").into()
    }
}

fn type_error(name: &str, got: &str, want: &str) -> Cause {
    let detail = format!("{name} in body must be of type {want}: {}", quote(got));
    Cause::type_invalid(name, &Value::String(got.into()), &detail)
}

/// kube-openapi's name for a value's type.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(v: &Value) -> bool {
    v.as_f64()
        .is_some_and(|f| v.is_i64() || v.is_u64() || f.fract() == 0.0)
}

/// The wanted type when `v` does not have it.
fn type_mismatch(v: &Value, s: &Schema) -> Option<String> {
    if s.int_or_string {
        return (!(is_integer(v) || v.is_string())).then(|| want_type(s));
    }
    let ok = match s.ty? {
        Type::Object => v.is_object(),
        Type::Array => v.is_array(),
        Type::String => v.is_string(),
        Type::Integer => is_integer(v),
        Type::Number => v.is_number(),
        Type::Boolean => v.is_boolean(),
    };
    (!ok).then(|| want_type(s))
}

fn scalar_checks(v: &Value, s: &Schema, name: &Name, push: &mut impl FnMut(Cause)) {
    let c = &s.checks;
    if !c.enumeration.is_empty() && !c.enumeration.contains(v) {
        let allowed: Vec<String> = c
            .enumeration
            .iter()
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
            .collect();
        push(Cause::not_supported(name.get(), v, &allowed));
    }
    if let Some(n) = v.as_f64() {
        number_checks(v, n, s, name, push);
    }
    if let Value::String(text) = v {
        let len = text.chars().count() as u64;
        if let Some(max) = c.max_length
            && len > max
        {
            push(Cause::too_long(name.get(), max));
        }
        if let Some(min) = c.min_length
            && len < min
        {
            let detail = format!("{name} in body should be at least {min} chars long");
            push(Cause::invalid(name.get(), v, &detail));
        }
        if let Some(p) = &c.pattern
            && !p.re.is_match(text)
        {
            let detail = format!("{name} in body should match '{}'", p.source);
            push(Cause::invalid(name.get(), v, &detail));
        }
    }
}

fn number_checks(v: &Value, n: f64, s: &Schema, name: &Name, push: &mut impl FnMut(Cause)) {
    let c = &s.checks;
    if let Some((min, excl)) = c.minimum
        && (n < min || (excl && n == min))
    {
        let rel = if excl {
            "greater than"
        } else {
            "greater than or equal to"
        };
        let detail = format!("{name} in body should be {rel} {}", fmt_num(min));
        push(Cause::invalid(name.get(), v, &detail));
    }
    if let Some((max, excl)) = c.maximum
        && (n > max || (excl && n == max))
    {
        let rel = if excl {
            "less than"
        } else {
            "less than or equal to"
        };
        let detail = format!("{name} in body should be {rel} {}", fmt_num(max));
        push(Cause::invalid(name.get(), v, &detail));
    }
    if let Some(m) = c.multiple_of
        && m != 0.0
        && (n / m).fract() != 0.0
    {
        let detail = format!("{name} in body should be a multiple of {}", fmt_num(m));
        push(Cause::invalid(name.get(), v, &detail));
    }
}

/// Go's `%v` of a float64 bound: `0`, `100`, `0.5`.
fn fmt_num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}

fn junctors(v: &Value, s: &Schema, name: &Name, path: &[Seg], push: &mut impl FnMut(Cause)) {
    let c = &s.checks;
    // Only whether a branch passes matters, not where its causes would be.
    let passes = |sub: &Schema| {
        let mut scratch = Vec::new();
        node(v, sub, false, &mut Vec::new(), &mut scratch);
        scratch.is_empty()
    };
    let invalid = |msg: &str| Cause::invalid(name.get(), v, &format!("{name} in body {msg}"));
    for sub in &c.all_of {
        let mut scratch = Vec::new();
        node(v, sub, false, &mut path.to_vec(), &mut scratch);
        scratch.into_iter().for_each(|(_, cause)| push(cause));
    }
    if !c.any_of.is_empty() && !c.any_of.iter().any(passes) {
        push(invalid("must validate at least one schema (anyOf)"));
    }
    if !c.one_of.is_empty() && c.one_of.iter().filter(|s| passes(s)).count() != 1 {
        push(invalid("must validate one and only one schema (oneOf)"));
    }
    if let Some(not) = &c.not
        && passes(not)
    {
        push(invalid("must not validate the schema (not)"));
    }
}

fn object(map: &Map<String, Value>, s: &Schema, root: bool, path: &mut Vec<Seg>, out: &mut Found) {
    let name = Name::new(path);
    let c = &s.checks;
    for r in &c.required {
        if map.get(r).is_none_or(Value::is_null) && !(root && r == "metadata") {
            let field = if name.get().is_empty() {
                r.clone()
            } else {
                format!("{name}.{r}")
            };
            out.push((path.to_vec(), Cause::required(field, "")));
        }
    }
    let n = map.len() as u64;
    if let Some(max) = c.max_properties
        && n > max
    {
        out.push((path.to_vec(), Cause::too_many(name.get(), map.len(), max)));
    }
    if let Some(min) = c.min_properties
        && n < min
    {
        let detail = format!("{name} in body should have at least {min} properties");
        out.push((
            path.to_vec(),
            Cause::invalid(name.get(), &Value::from(n), &detail),
        ));
    }
    let resource = root || s.embedded;
    for (k, child) in map {
        // ObjectMeta is checked as kube checks it (objectmeta.rs), not by the schema.
        if resource && k == "metadata" {
            continue;
        }
        if let Some(cs) = s.child(k) {
            path.push(Seg::Key(k.clone()));
            node(child, cs, false, path, out);
            path.pop();
        }
    }
}

fn array(items: &[Value], s: &Schema, path: &mut Vec<Seg>, out: &mut Found) {
    let name = Name::new(path);
    let c = &s.checks;
    let n = items.len() as u64;
    if let Some(max) = c.max_items
        && n > max
    {
        out.push((path.to_vec(), Cause::too_many(name.get(), items.len(), max)));
    }
    if let Some(min) = c.min_items
        && n < min
    {
        let detail = format!("{name} in body should have at least {min} items");
        out.push((
            path.to_vec(),
            Cause::invalid(name.get(), &Value::from(n), &detail),
        ));
    }
    duplicates(items, s, path, out);
    if let Some(item) = &s.items {
        for (i, x) in items.iter().enumerate() {
            path.push(Seg::Index(i));
            node(x, item, false, path, out);
            path.pop();
        }
    }
}

/// `x-kubernetes-list-type: set` (values) and `map` (keys) must not repeat.
fn duplicates(items: &[Value], s: &Schema, path: &mut Vec<Seg>, out: &mut Found) {
    let key_of = |x: &Value| -> Option<Value> {
        match s.checks.list_type {
            ListType::Atomic => None,
            ListType::Set => Some(x.clone()),
            ListType::Map => {
                let m: Map<String, Value> = s
                    .checks
                    .map_keys
                    .iter()
                    .filter_map(|k| x.get(k).map(|v| (k.clone(), v.clone())))
                    .collect();
                Some(Value::Object(m))
            }
        }
    };
    let mut seen: Vec<Value> = Vec::new();
    for (i, x) in items.iter().enumerate() {
        let Some(key) = key_of(x) else { return };
        if seen.contains(&key) {
            path.push(Seg::Index(i));
            let cause = match s.checks.list_type {
                ListType::Map => Cause {
                    field: render(path),
                    kind: CauseType::Duplicate,
                    body: format!("Duplicate value: {}", go_map(&key)),
                },
                _ => Cause::duplicate(render(path), &key),
            };
            out.push((path.clone(), cause));
            path.pop();
        } else {
            seen.push(key);
        }
    }
}

/// kube prints a duplicate map-list key as Go prints the key map.
fn go_map(key: &Value) -> String {
    let parts: Vec<String> = key
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{}:{}", quote(k), show(v)))
        .collect();
    format!("map[string]interface {{}}{{{}}}", parts.join(", "))
}
