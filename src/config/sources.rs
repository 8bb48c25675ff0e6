//! figment providers that name their exact source: one per environment variable
//! (`KOORD_COMMON__ADMIN_ADDR` → `common.adminAddr`) and one per command-line flag, so an
//! error says which variable or flag held the bad value.

use figment::value::{Dict, Map, Value};
use figment::{Error, Metadata, Profile, Provider};

pub const ENV_PREFIX: &str = "KOORD_";

/// One key set from one named source.
#[derive(Debug)]
pub struct KeyValue {
    pub source: String,
    pub key: String,
    pub value: Value,
}

impl Provider for KeyValue {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.source.clone())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let nested = figment::util::nest(&self.key, self.value.clone());
        let dict = match nested {
            Value::Dict(_, d) => d,
            _ => Dict::new(),
        };
        Ok(Profile::Default.collect(dict))
    }
}

/// `ADMIN_ADDR` → `adminAddr`.
fn camel(segment: &str) -> String {
    let mut out = String::new();
    for (i, word) in segment.split('_').filter(|w| !w.is_empty()).enumerate() {
        let lower = word.to_ascii_lowercase();
        if i == 0 {
            out.push_str(&lower);
        } else {
            let mut chars = lower.chars();
            if let Some(c) = chars.next() {
                out.push(c.to_ascii_uppercase());
                out.extend(chars);
            }
        }
    }
    out
}

/// Maps `KOORD_A__B_C` to `a.bC`; `None` for variables without the prefix.
pub fn env_key(var: &str) -> Option<String> {
    let rest = var.strip_prefix(ENV_PREFIX)?;
    if rest.is_empty() {
        return None;
    }
    Some(rest.split("__").map(camel).collect::<Vec<_>>().join("."))
}

/// Providers for every `KOORD_*` variable, sorted by name.
pub fn env_providers<'a>(vars: impl Iterator<Item = (&'a String, &'a String)>) -> Vec<KeyValue> {
    vars.filter_map(|(name, raw)| {
        let key = env_key(name)?;
        let value: Value = raw.parse().unwrap_or_else(|_| Value::from(raw.clone()));
        Some(KeyValue {
            source: format!("environment variable `{name}`"),
            key,
            value,
        })
    })
    .collect()
}

/// A provider for one command-line flag.
pub fn flag(flag: &str, key: &str, value: impl Into<Value>) -> KeyValue {
    KeyValue {
        source: format!("flag `{flag}`"),
        key: key.into(),
        value: value.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_env_names_to_camel_keys() {
        assert_eq!(
            env_key("KOORD_COMMON__ADMIN_ADDR").as_deref(),
            Some("common.adminAddr")
        );
        assert_eq!(
            env_key("KOORD_RUNTIME_PROXY__X").as_deref(),
            Some("runtimeProxy.x")
        );
        assert_eq!(
            env_key("KOORD_KOORDLET__CGROUP_ROOT").as_deref(),
            Some("koordlet.cgroupRoot")
        );
        assert_eq!(env_key("HOME"), None);
        assert_eq!(env_key("KOORD_"), None);
    }
}
