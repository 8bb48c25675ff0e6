//! Where a JSON value does not fit its protobuf message.

/// A JSON value that does not fit the message: the field's path and what was wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

pub fn mismatch(path: &str, message: impl Into<String>) -> Mismatch {
    Mismatch {
        path: path.to_string(),
        message: message.into(),
    }
}
