//! An error about one field of an object or a configuration, shaped like kube's
//! `field.Error` (`spec.min[cpu]: Invalid value: min 2 is larger than max 1`).
//!
//! The field path is kept apart from what is wrong, so the code that knows the context
//! (`profiles[0]`, `plugin LoadAwareScheduling: args`, the ConfigMap key) places the error
//! under it without re-parsing a message, and a caller can tell which field failed.

use std::fmt;

/// kube's `field.ErrorType`, for the errors that carry one in their message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Invalid,
    Required,
    Forbidden,
    NotFound,
    Duplicate,
    Unsupported,
}

impl Reason {
    fn label(self) -> &'static str {
        match self {
            Reason::Invalid => "Invalid value",
            Reason::Required => "Required value",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "Not found",
            Reason::Duplicate => "Duplicate value",
            Reason::Unsupported => "Unsupported value",
        }
    }
}

/// The field (a path like `spec.max[cpu]`, possibly under contexts, empty for the whole
/// object), kube's error type where the message shows one, and the detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub reason: Option<Reason>,
    pub detail: String,
}

impl FieldError {
    /// `field: detail`.
    pub fn new(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            reason: None,
            detail: detail.into(),
        }
    }

    /// An error about the object or document as a whole.
    pub fn whole(detail: impl Into<String>) -> FieldError {
        FieldError::new("", detail)
    }

    fn typed(field: impl Into<String>, reason: Reason, detail: impl Into<String>) -> FieldError {
        FieldError {
            reason: Some(reason),
            ..FieldError::new(field, detail)
        }
    }

    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::typed(field, Reason::Invalid, detail)
    }

    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::typed(field, Reason::Required, detail)
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::typed(field, Reason::Forbidden, detail)
    }

    pub fn not_found(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::typed(field, Reason::NotFound, detail)
    }

    pub fn duplicate(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::typed(field, Reason::Duplicate, detail)
    }

    pub fn unsupported(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::typed(field, Reason::Unsupported, detail)
    }

    /// The same error one level down a path: `parent.field`.
    pub fn under(mut self, parent: &str) -> FieldError {
        self.field = if self.field.is_empty() {
            parent.to_string()
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }

    /// The same error under a context: `ctx: field: …`.
    pub fn within(mut self, ctx: impl fmt::Display) -> FieldError {
        self.field = if self.field.is_empty() {
            ctx.to_string()
        } else {
            format!("{ctx}: {}", self.field)
        };
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        if let Some(r) = self.reason {
            write!(f, "{}: ", r.label())?;
        }
        f.write_str(&self.detail)
    }
}

impl std::error::Error for FieldError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_as_kube_shows_a_field_error() {
        let e = FieldError::invalid("spec.min[cpu]", "must not be negative");
        assert_eq!(
            e.to_string(),
            "spec.min[cpu]: Invalid value: must not be negative"
        );
        let e = FieldError::new("usageThresholds[cpu]", "101 is not in [0, 100]")
            .within("plugin LoadAwareScheduling: args");
        assert_eq!(
            e.to_string(),
            "plugin LoadAwareScheduling: args: usageThresholds[cpu]: 101 is not in [0, 100]"
        );
        assert_eq!(
            FieldError::whole("empty").within("a.yaml").to_string(),
            "a.yaml: empty"
        );
        assert_eq!(FieldError::whole("empty").to_string(), "empty");
    }
}
