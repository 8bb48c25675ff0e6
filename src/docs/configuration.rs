//! The configuration reference: every key from the configuration types' defaults, its
//! meaning from the comment above it in `config/koord.yaml`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{cell, header};
use crate::config::Config;
use crate::kernel::host::HostEnv;

/// Keys whose default depends on the host, documented in comments only.
const HOST_KEYS: [&str; 2] = ["common.nodeName", "common.dataDir"];

pub fn page() -> String {
    let host = HostEnv {
        vars: BTreeMap::new(),
        hostname: String::new(),
        is_root: true,
        home: None,
    };
    let defaults = serde_json::to_value(Config::defaults(&host)).unwrap_or(Value::Null);
    let meanings = comments(include_str!("../../config/koord.yaml"));
    let mut out = header(
        "Configuration keys",
        "the configuration types and `config/koord.yaml`",
    );
    out.push_str(
        "Every key koord reads, with its default and meaning. Set them in the YAML file \
         (`--config`), as `KOORD_` environment variables or, for some, as flags; see \
         [configuration](../configuration.md).\n",
    );
    let Value::Object(sections) = defaults else {
        return out;
    };
    for (section, value) in &sections {
        out.push_str(&format!("\n## `{section}`\n\n"));
        if let Some(m) = meanings.get(section.as_str()) {
            out.push_str(&format!("{m}\n\n"));
        }
        out.push_str("| key | default | meaning |\n|---|---|---|\n");
        let mut rows = Vec::new();
        leaves(section, value, &mut rows);
        for key in HOST_KEYS
            .iter()
            .filter(|k| k.starts_with(&format!("{section}.")))
        {
            rows.push((key.to_string(), None));
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, default) in rows {
            let shown = match default {
                Some(v) => shown(&v),
                None => "from the host".to_string(),
            };
            let meaning = meanings.get(key.as_str()).map_or("", String::as_str);
            out.push_str(&format!(
                "| `{key}` | {} | {} |\n",
                cell(&shown),
                cell(meaning)
            ));
        }
    }
    out
}

/// A default as the reader writes it in YAML.
fn shown(v: &Value) -> String {
    match v {
        Value::Null => "unset".to_string(),
        Value::String(s) if s.is_empty() => "`\"\"`".to_string(),
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}

/// Every leaf key under `path` (objects with fields are walked; empty objects, arrays and
/// scalars are leaves).
fn leaves(path: &str, v: &Value, out: &mut Vec<(String, Option<Value>)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                leaves(&format!("{path}.{k}"), child, out);
            }
        }
        Value::Object(_) if path.matches('.').count() == 0 => {}
        _ => {
            if !HOST_KEYS.contains(&path) {
                out.push((path.to_string(), Some(v.clone())));
            }
        }
    }
}

/// The comment block right above each key of the YAML file, by dotted key. A blank line
/// ends a block; a block that starts `# key:` documents that key of the section.
fn comments(yaml: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut pending_indent = 0;
    let mut last: Option<(String, String)> = None;
    for line in yaml.lines() {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim();
        if text.is_empty() {
            // A block of its own naming a key (`# nodeName: ...`): that key's meaning.
            let named = pending
                .first()
                .and_then(|f| f.split_once(": "))
                .map(|(k, _)| k);
            if let Some(k) = named.filter(|k| k.chars().all(|c| c.is_ascii_alphabetic())) {
                let mut path: Vec<&str> = stack
                    .iter()
                    .filter(|(i, _)| *i < pending_indent)
                    .map(|(_, k)| k.as_str())
                    .collect();
                path.push(k);
                let first = pending[0]
                    .split_once(": ")
                    .map_or("", |(_, r)| r)
                    .to_string();
                let rest = pending[1..].join(" ");
                out.insert(path.join("."), format!("{first} {rest}").trim().to_string());
            }
            pending.clear();
            last = None;
            continue;
        }
        if let Some(c) = text.strip_prefix('#') {
            if pending.is_empty() {
                pending_indent = indent;
            }
            pending.push(c.trim().to_string());
            continue;
        }
        let Some((key, _)) = text.split_once(':') else {
            continue;
        };
        if key.starts_with('-') || key.contains(' ') {
            continue;
        }
        stack.retain(|(i, _)| *i < indent);
        let parent: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
        let path = [parent.as_slice(), &[key]].concat().join(".");
        // A comment covers the keys right below it, up to the next comment or blank line
        // (`watcherBufferBytes` and `watchBufferBytes` under one); the first key of an
        // object without one of its own is covered by the object's.
        let covering = if pending.is_empty() {
            last.clone()
                .filter(|(p, _)| *p == parent.join("."))
                .map(|(_, c)| c)
                .or_else(|| out.get(&parent.join(".")).cloned())
        } else {
            Some(pending.join(" "))
        };
        if let Some(c) = covering {
            last = Some((parent.join("."), c.clone()));
            out.insert(path, c);
        }
        pending.clear();
        stack.push((indent, key.to_string()));
    }
    out
}
