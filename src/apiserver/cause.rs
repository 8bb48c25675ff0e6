//! One cause of a 422: kube's `field.Error` with its type, rendered as kube renders it
//! (`spec.ttl: Invalid value: "integer": spec.ttl in body must be of type string:
//! "integer"`). `ApiError::invalid_causes` carries every cause of a write at once.

use serde_json::{Value, json};

/// kube's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CauseType {
    Invalid,
    Required,
    NotSupported,
    TypeInvalid,
    TooLong,
    TooMany,
    Duplicate,
    Forbidden,
    NotFound,
}

impl CauseType {
    /// The `reason` of a `StatusCause`.
    pub fn reason(self) -> &'static str {
        match self {
            CauseType::Invalid => "FieldValueInvalid",
            CauseType::Required => "FieldValueRequired",
            CauseType::NotSupported => "FieldValueNotSupported",
            CauseType::TypeInvalid => "FieldValueTypeInvalid",
            CauseType::TooLong => "FieldValueTooLong",
            CauseType::TooMany => "FieldValueTooMany",
            CauseType::Duplicate => "FieldValueDuplicate",
            CauseType::Forbidden => "FieldValueForbidden",
            CauseType::NotFound => "FieldValueNotFound",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub field: String,
    pub kind: CauseType,
    /// What kube's `ErrorBody` prints: `Required value`, `Invalid value: 5: …`.
    pub body: String,
}

/// A value as kube's `field.Error` prints it: strings quoted, numbers and booleans bare,
/// anything else as JSON.
pub fn show(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Null => "\"null\"".into(),
        other => other.to_string(),
    }
}

/// Go's `%q` for the strings kube quotes.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

impl Cause {
    fn new(field: impl Into<String>, kind: CauseType, body: String) -> Cause {
        Cause {
            field: field.into(),
            kind,
            body,
        }
    }

    pub fn required(field: impl Into<String>, detail: &str) -> Cause {
        let body = with_detail("Required value", detail);
        Cause::new(field, CauseType::Required, body)
    }

    pub fn forbidden(field: impl Into<String>, detail: &str) -> Cause {
        Cause::new(
            field,
            CauseType::Forbidden,
            with_detail("Forbidden", detail),
        )
    }

    pub fn not_found(field: impl Into<String>, value: &Value) -> Cause {
        let body = format!("Not found: {}", show(value));
        Cause::new(field, CauseType::NotFound, body)
    }

    pub fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Cause {
        let body = with_detail(&format!("Invalid value: {}", show(value)), detail);
        Cause::new(field, CauseType::Invalid, body)
    }

    /// An invalid value kube shows as Go shows it (`[]string{"a"}`, a struct).
    pub fn invalid_shown(field: impl Into<String>, shown: &str, detail: &str) -> Cause {
        let body = with_detail(&format!("Invalid value: {shown}"), detail);
        Cause::new(field, CauseType::Invalid, body)
    }

    pub fn type_invalid(field: impl Into<String>, value: &Value, detail: &str) -> Cause {
        let body = with_detail(&format!("Invalid value: {}", show(value)), detail);
        Cause::new(field, CauseType::TypeInvalid, body)
    }

    pub fn not_supported(field: impl Into<String>, value: &Value, allowed: &[String]) -> Cause {
        let mut body = format!("Unsupported value: {}", show(value));
        if !allowed.is_empty() {
            let quoted: Vec<String> = allowed.iter().map(|a| quote(a)).collect();
            body.push_str(&format!(": supported values: {}", quoted.join(", ")));
        }
        Cause::new(field, CauseType::NotSupported, body)
    }

    pub fn too_long(field: impl Into<String>, max: u64) -> Cause {
        let body = format!("Too long: may not be more than {max} bytes");
        Cause::new(field, CauseType::TooLong, body)
    }

    pub fn too_many(field: impl Into<String>, actual: usize, max: u64) -> Cause {
        let body = format!("Too many: {actual}: must have at most {max} items");
        Cause::new(field, CauseType::TooMany, body)
    }

    pub fn duplicate(field: impl Into<String>, value: &Value) -> Cause {
        let body = format!("Duplicate value: {}", show(value));
        Cause::new(field, CauseType::Duplicate, body)
    }

    /// `field: body`, or the body alone for the whole object.
    pub fn message(&self) -> String {
        if self.field.is_empty() {
            self.body.clone()
        } else {
            format!("{}: {}", self.field, self.body)
        }
    }

    pub fn status_cause(&self) -> Value {
        json!({"reason": self.kind.reason(), "message": self.body, "field": self.field})
    }
}

fn with_detail(head: &str, detail: &str) -> String {
    if detail.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {detail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_read_as_kube_writes_them() {
        let c = Cause::type_invalid(
            "spec.ttl",
            &json!("integer"),
            "spec.ttl in body must be of type string: \"integer\"",
        );
        assert_eq!(
            c.message(),
            "spec.ttl: Invalid value: \"integer\": spec.ttl in body must be of type string: \"integer\""
        );
        assert_eq!(
            Cause::required("spec.owners", "").message(),
            "spec.owners: Required value"
        );
        let allowed = ["Always".to_string(), "Never".to_string()];
        assert_eq!(
            Cause::not_supported("spec.restartPolicy", &json!("Sometimes"), &allowed).message(),
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\""
        );
        assert_eq!(
            Cause::too_many("spec.x", 5, 3).body,
            "Too many: 5: must have at most 3 items"
        );
        assert_eq!(
            Cause::invalid("a", &json!(-1), "").body,
            "Invalid value: -1"
        );
    }
}
