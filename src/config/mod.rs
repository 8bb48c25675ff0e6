//! Configuration: built-in defaults ← YAML file (`--config`) ← `KOORD_*` environment ←
//! flags, merged once by figment. Keys are camelCase like Koordinator's; an unknown key,
//! a wrong type or an invalid value is an error naming the key and its source.

pub mod goflags;
pub mod sources;

use std::path::Path;

use figment::providers::{Format, Serialized, Yaml};
use figment::value::{Dict, Map};
use figment::{Figment, Metadata, Profile, Provider};
use serde::{Deserialize, Serialize};

pub use crate::kernel::common::CommonConfig;
pub use crate::kernel::host::HostEnv;
pub use sources::KeyValue;

use crate::kernel::role::RoleSet;
use crate::kernel::telemetry::parse_filter;

/// The whole configuration: one section per role plus `common`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    pub common: CommonConfig,
    pub embedded: crate::apiserver::Config,
    pub manager: crate::manager::Config,
    pub scheduler: crate::scheduler::Config,
    pub descheduler: crate::descheduler::Config,
    pub koordlet: crate::koordlet::Config,
    pub runtime_proxy: crate::runtime_proxy::Config,
}

impl Config {
    /// Built-in defaults for this host.
    pub fn defaults(host: &HostEnv) -> Self {
        let mut cfg = Config::default();
        cfg.common.node_name = host.default_node_name();
        cfg.common.data_dir = host.default_data_dir();
        cfg.manager.webhook =
            crate::manager::webhook::Config::from_env(|k| host.var(k).map(str::to_string));
        cfg
    }
}

/// One or more configuration errors, each naming the key and its source.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct ConfigError(pub Vec<String>);

/// Where the YAML layer comes from.
pub enum YamlSource<'a> {
    File(&'a Path),
    Text { name: &'a str, text: &'a str },
}

/// Gives a provider a readable source name.
struct Named<P> {
    inner: P,
    name: String,
}

impl<P: Provider> Provider for Named<P> {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.name.clone())
    }
    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        self.inner.data()
    }
}

/// Merges every layer and validates the result.
pub fn load(
    host: &HostEnv,
    yaml: Option<YamlSource<'_>>,
    flags: Vec<KeyValue>,
) -> Result<Config, ConfigError> {
    let mut figment = Figment::from(Named {
        inner: Serialized::defaults(Config::defaults(host)),
        name: "built-in defaults".into(),
    });
    let (name, text) = match yaml {
        None => (String::new(), String::new()),
        Some(YamlSource::Text { name, text }) => (name.to_string(), text.to_string()),
        Some(YamlSource::File(path)) => {
            let text = crate::os::files::read_config(path)
                .map_err(|e| ConfigError(vec![format!("config file {}: {e}", path.display())]))?;
            (format!("config file `{}`", path.display()), text)
        }
    };
    if let Err(e) = crate::api::input::prescan_yaml(text.as_bytes()) {
        return Err(ConfigError(vec![format!("{name}: {e}")]));
    }
    if !text.trim().is_empty() {
        figment = figment.merge(Named {
            inner: Yaml::string(&text),
            name,
        });
    }
    for provider in sources::env_providers(host.vars.iter()) {
        figment = figment.merge(provider);
    }
    for provider in flags {
        figment = figment.merge(provider);
    }
    let cfg: Config = figment
        .extract()
        .map_err(|e| ConfigError(e.into_iter().map(|e| e.to_string()).collect()))?;
    let problems = validate(&cfg, &figment);
    if problems.is_empty() {
        Ok(cfg)
    } else {
        Err(ConfigError(problems))
    }
}

fn source_of(figment: &Figment, key: &str) -> String {
    figment
        .find_metadata(key)
        .map(|m| m.name.to_string())
        .unwrap_or_else(|| "built-in defaults".into())
}

fn validate(cfg: &Config, figment: &Figment) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |key: &str, result: Result<(), String>| {
        if let Err(msg) = result {
            problems.push(format!(
                "invalid value for key `{key}` in {}: {msg}",
                source_of(figment, key)
            ));
        }
    };
    check(
        "common.logLevel",
        parse_filter(&cfg.common.log_level).map(|_| ()),
    );
    check("common.nodeName", check_node_name(&cfg.common.node_name));
    check(
        "common.shutdownGraceSeconds",
        if cfg.common.shutdown_grace_seconds == 0 {
            Err("must be at least 1".into())
        } else {
            Ok(())
        },
    );
    for (key, msg) in crate::koordlet::validate(&cfg.koordlet, cfg.common.strict) {
        let key = format!("koordlet.{key}");
        problems.push(format!(
            "invalid value for key `{key}` in {}: {msg}",
            source_of(figment, &key)
        ));
    }
    for (key, msg) in crate::manager::validate(&cfg.manager, cfg.common.strict) {
        let key = format!("manager.{key}");
        problems.push(format!(
            "invalid value for key `{key}` in {}: {msg}",
            source_of(figment, &key)
        ));
    }
    for (key, msg) in crate::scheduler::validate(&cfg.scheduler, cfg.common.strict) {
        let key = format!("scheduler.{key}");
        problems.push(format!(
            "invalid value for key `{key}` in {}: {msg}",
            source_of(figment, &key)
        ));
    }
    for (key, msg) in crate::descheduler::validate(&cfg.descheduler, cfg.common.strict) {
        let key = format!("descheduler.{key}");
        problems.push(format!(
            "invalid value for key `{key}` in {}: {msg}",
            source_of(figment, &key)
        ));
    }
    for (key, msg) in cfg.embedded.validate() {
        let key = format!("embedded.{key}");
        problems.push(format!(
            "invalid value for key `{key}` in {}: {msg}",
            source_of(figment, &key)
        ));
    }
    problems
}

/// A node name must be a DNS-1123 subdomain.
fn check_node_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid node name (lowercase DNS subdomain)"
        ))
    }
}

/// The effective configuration as YAML, limited to `common` and the given roles, with
/// secret values redacted.
pub fn to_yaml(cfg: &Config, roles: Option<&RoleSet>) -> String {
    let mut value = redacted_json(cfg);
    if let (Some(roles), Some(obj)) = (roles, value.as_object_mut()) {
        let keep: Vec<&str> = std::iter::once("common")
            .chain(roles.0.iter().map(|r| r.config_key()))
            .collect();
        obj.retain(|k, _| keep.contains(&k.as_str()));
    }
    serde_yaml::to_string(&value).unwrap_or_default()
}

/// The configuration as JSON with secret values replaced by `<redacted>`.
pub fn redacted_json(cfg: &Config) -> serde_json::Value {
    let mut value = serde_json::to_value(cfg).unwrap_or_default();
    redact(&mut value);
    value
}

fn redact(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let lower = k.to_ascii_lowercase();
                let secret = ["token", "password", "secret"]
                    .iter()
                    .any(|s| lower.contains(s))
                    && !lower.ends_with("file")
                    && !lower.ends_with("name");
                if secret && !v.is_null() {
                    *v = "<redacted>".into();
                } else {
                    redact(v);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact),
        serde_json::Value::String(s) => {
            if let Some(clean) = redact_url(s) {
                *s = clean;
            }
        }
        _ => {}
    }
}

/// A query parameter whose name says it carries a credential.
fn secret_param(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["token", "password", "secret", "key", "signature", "auth"]
        .iter()
        .any(|s| lower.contains(s))
}

/// `scheme://user:password@host/...?token=...` with the credentials (user information,
/// and query values whose names say they are secret) replaced; `None` when the string
/// carries none.
fn redact_url(s: &str) -> Option<String> {
    let start = s.find("://")? + 3;
    let authority_end = s[start..]
        .find(['/', '?', '#'])
        .map_or(s.len(), |i| start + i);
    let mut out = match s[start..authority_end].rfind('@') {
        Some(at) => format!("{}<redacted>{}", &s[..start], &s[start + at..]),
        None => s.to_string(),
    };
    if let Some(q) = out.find('?') {
        let frag = out[q..].find('#').map_or(out.len(), |i| q + i);
        let params: Vec<String> = out[q + 1..frag]
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if secret_param(k) => format!("{k}=<redacted>"),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{}?{}{}", &out[..q], params.join("&"), &out[frag..]);
    }
    (out != s).then_some(out)
}

#[cfg(test)]
mod tests;
