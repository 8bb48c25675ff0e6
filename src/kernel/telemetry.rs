//! Logging through tracing-subscriber: text or JSON on stderr.

use serde::{Deserialize, Serialize};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Checks a level or filter directive (`info`, `koord=debug,kube=warn`).
pub fn parse_filter(directive: &str) -> Result<EnvFilter, String> {
    EnvFilter::try_new(directive).map_err(|e| format!("invalid log filter {directive:?}: {e}"))
}

/// Installs the global subscriber. `rust_log`, when set, wins over the configured level.
pub fn init(format: LogFormat, level: &str, rust_log: Option<&str>) -> Result<(), String> {
    let filter = match rust_log.filter(|s| !s.trim().is_empty()) {
        Some(directive) => parse_filter(directive).map_err(|e| format!("RUST_LOG: {e}"))?,
        None => parse_filter(level)?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(true);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| format!("installing the logger: {e}"))
}
