//! Decoding checks, as kube-apiserver makes them when it decodes a body: for built-in kinds
//! into their Go types (a wrongly typed field is a 400), for custom objects through their
//! CRD's structural schema (pruning, null dropping, defaulting). Either way fields the type
//! does not have are dropped with a warning, refused (`fieldValidation=Strict`, what
//! kubectl sends) or dropped silently (`Ignore`). `schema` is the custom objects' 422
//! check, made after mutating admission.

use hyper::Response;
use serde_json::Value;

use super::error::ApiError;
use super::registry::ResourceInfo;
use crate::kernel::http::Body;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// The `fieldValidation` parameter's value; Warn when absent, as in kube-apiserver.
    pub fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Invalid value: {other:?}: must be one of \"Ignore\", \"Warn\" or \"Strict\""
            ))),
        }
    }
}

/// Checks a built-in object (custom resources pass through) and drops the fields its type
/// lacks; the warnings to send back.
pub fn builtin(
    info: &ResourceInfo,
    version: &str,
    obj: &mut Value,
    fv: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    if !obj.is_object() {
        return Ok(Vec::new());
    }
    let cannot = |what: String| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {what}",
            kind = info.kind
        ))
    };
    if !info.builtin {
        return custom(info, version, obj, fv).map_err(cannot);
    }
    if info.group == "rbac.authorization.k8s.io" && info.resource.ends_with("rolebindings") {
        super::kinds::default_binding(obj);
    }
    let api_version = info.api_version(version);
    let Some(result) = super::proto::check(&api_version, &info.kind, obj) else {
        return Ok(Vec::new());
    };
    let unknown = result.map_err(|e| cannot(e.to_string()))?;
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let quoted: Vec<String> = unknown
        .iter()
        .map(|u| format!("unknown field \"{u}\""))
        .collect();
    if fv == FieldValidation::Strict {
        return Err(cannot(format!(
            "strict decoding error: {}",
            quoted.join(", ")
        )));
    }
    for path in &unknown {
        drop_field(obj, path);
    }
    Ok(if fv == FieldValidation::Warn {
        quoted
    } else {
        Vec::new()
    })
}

/// A custom object through its schema: unknown fields pruned (or refused under Strict),
/// nulls dropped, defaults set.
fn custom(
    info: &ResourceInfo,
    version: &str,
    obj: &mut Value,
    fv: FieldValidation,
) -> Result<Vec<String>, String> {
    let Some(schema) = info.structural.get(version) else {
        return Ok(Vec::new());
    };
    // Under Strict the pruned object is dropped with the error, so pruning in place is safe.
    let unknown = super::schema::prune(obj, schema, true);
    let quoted: Vec<String> = unknown
        .iter()
        .map(|u| format!("unknown field {}", super::cause::quote(u)))
        .collect();
    if fv == FieldValidation::Strict && !quoted.is_empty() {
        return Err(format!("strict decoding error: {}", quoted.join(", ")));
    }
    super::schema::drop_nulls(obj, schema);
    super::schema::default(obj, schema);
    Ok(if fv == FieldValidation::Warn {
        quoted
    } else {
        Vec::new()
    })
}

/// After mutating admission: what a webhook added is pruned and defaulted like the body
/// was, then the object must pass its schema (422 with every cause). `old` is the stored
/// object of an update: what the update leaves unchanged ratchets.
pub fn schema(
    info: &ResourceInfo,
    version: &str,
    name: &str,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if info.builtin {
        return Ok(());
    }
    let Some(schema) = info.structural.get(version) else {
        return Ok(());
    };
    super::schema::prune(obj, schema, true);
    super::schema::drop_nulls(obj, schema);
    super::schema::default(obj, schema);
    super::error::check_causes(info, name, super::schema::validate(obj, schema, old))
}

/// Removes `a.b[2].c` from `obj`.
fn drop_field(obj: &mut Value, path: &str) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let Some(leaf) = parts.pop() else {
        return;
    };
    let mut cur = obj;
    for p in parts {
        let (name, index) = match p.split_once('[') {
            Some((n, i)) => (n, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (p, None),
        };
        let Some(next) = cur.get_mut(name) else {
            return;
        };
        cur = match index {
            Some(i) => match next.get_mut(i) {
                Some(v) => v,
                None => return,
            },
            None => next,
        };
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(leaf);
    }
}

/// Adds `Warning: 299 - "…"` headers, as kube-apiserver reports dropped fields.
pub fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = format!("299 - \"{escaped}\"").parse() {
            resp.headers_mut().append("warning", v);
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> ResourceInfo {
        super::super::registry::Registry::with_builtins()
            .get("", "pods")
            .map(|i| (*i).clone())
            .unwrap()
    }

    #[test]
    fn unknown_fields_are_dropped_warned_or_refused() {
        let base = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                          "spec": {"containers": [{"name": "c", "image": "i", "colour": "red"}]}});
        let mut warned = base.clone();
        let w = builtin(&pods(), "v1", &mut warned, FieldValidation::Warn).unwrap();
        assert_eq!(w, vec!["unknown field \"spec.containers[0].colour\""]);
        assert!(warned["spec"]["containers"][0].get("colour").is_none());
        let mut strict = base.clone();
        let e = builtin(&pods(), "v1", &mut strict, FieldValidation::Strict).unwrap_err();
        assert_eq!(
            e.message,
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.containers[0].colour\""
        );
        let mut typed = base;
        typed["spec"]["containers"][0]["image"] = 5.into();
        let e = builtin(&pods(), "v1", &mut typed, FieldValidation::Ignore).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message
                .ends_with("Go struct field Container.spec.containers.image of type string"),
            "{}",
            e.message
        );
    }
}
