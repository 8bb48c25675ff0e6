//! Koordinator configurations koord accepts but does not fully act on: a plugin, a feature
//! gate, a flag or an argument it does not implement yet. Each is warned about once at
//! start and shown as `koord_unsupported_config{role,kind,name} 1` on `/metrics`, so a
//! Koordinator config keeps working and the operator can see what it does not do. With
//! `common.strict: true` the same items refuse the configuration instead.

use super::Metrics;

/// One thing in the operator's configuration koord does not act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// `plugin`, `featureGate`, `flag`, `pluginArg`.
    pub kind: &'static str,
    pub name: String,
    /// What is ignored and why, for the log line and for strict mode's error.
    pub message: String,
}

impl Unsupported {
    pub fn new(kind: &'static str, name: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind,
            name: name.into(),
            message: message.into(),
        }
    }
}

/// Warns once per item and sets its gauge.
pub fn report(metrics: &Metrics, role: &str, items: &[Unsupported]) {
    for u in items {
        tracing::warn!(role, kind = u.kind, name = %u.name, "{}", u.message);
        metrics.mark_unsupported(role, u.kind, &u.name);
    }
}

/// Strict mode's errors: one line per item.
pub fn errors(items: &[Unsupported]) -> Vec<String> {
    items
        .iter()
        .map(|u| format!("{} (strict mode: common.strict)", u.message))
        .collect()
}
