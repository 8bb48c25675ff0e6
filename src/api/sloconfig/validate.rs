//! What the ConfigMap webhook (and the Node webhook) check in slo-controller-config
//! beyond "it parses": Koordinator's struct-tag ranges, node selectors, unique names, and
//! that no node can match two node entries of one key.

use crate::api::field::FieldError;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::*;
use crate::api::selector::{Selector, label_selector_matches};

/// (field, min, max, min is exclusive) — Koordinator's `validate:"…"` tags by JSON name.
const RANGES: &[(&str, Option<f64>, Option<f64>, bool)] = &[
    ("metricAggregateDurationSeconds", Some(0.0), None, true),
    ("metricReportIntervalSeconds", Some(0.0), None, true),
    ("cpuReclaimThresholdPercent", Some(0.0), None, false),
    ("memoryReclaimThresholdPercent", Some(0.0), None, false),
    ("degradeTimeMinutes", Some(1.0), None, false),
    ("updateTimeThresholdSeconds", Some(1.0), None, false),
    ("resourceDiffThreshold", Some(0.0), Some(1.0), true),
    ("midCPUThresholdPercent", Some(0.0), Some(100.0), false),
    ("midMemoryThresholdPercent", Some(0.0), Some(100.0), false),
    ("midUnallocatedPercent", Some(0.0), Some(100.0), false),
    ("batchCPUThresholdPercent", Some(0.0), None, false),
    ("batchMemoryThresholdPercent", Some(0.0), None, false),
    ("cpuSuppressThresholdPercent", Some(0.0), Some(100.0), false),
    ("cpuSuppressMinPercent", Some(0.0), Some(100.0), false),
    ("memoryEvictThresholdPercent", Some(0.0), Some(100.0), false),
    ("memoryEvictLowerPercent", Some(0.0), Some(100.0), false),
    (
        "cpuEvictBESatisfactionUpperPercent",
        Some(0.0),
        Some(100.0),
        false,
    ),
    (
        "cpuEvictBESatisfactionLowerPercent",
        Some(0.0),
        Some(100.0),
        false,
    ),
    (
        "cpuEvictBEUsageThresholdPercent",
        Some(0.0),
        Some(100.0),
        false,
    ),
    ("cpuEvictTimeWindowSeconds", Some(0.0), None, true),
    ("groupIdentity", Some(-1.0), Some(2.0), false),
    ("schedIdle", Some(0.0), Some(1.0), false),
    ("minLimitPercent", Some(0.0), Some(100.0), false),
    ("lowLimitPercent", Some(0.0), Some(100.0), false),
    ("throttlingPercent", Some(0.0), Some(100.0), false),
    ("wmarkRatio", Some(0.0), Some(100.0), false),
    ("wmarkScalePermill", Some(1.0), Some(1000.0), false),
    ("wmarkMinAdj", Some(-25.0), Some(50.0), false),
    ("priorityEnable", Some(0.0), Some(1.0), false),
    ("priority", Some(0.0), Some(12.0), false),
    ("oomKillGroup", Some(0.0), Some(1.0), false),
    ("catRangeStartPercent", Some(0.0), Some(100.0), false),
    ("catRangeEndPercent", Some(0.0), Some(100.0), false),
    ("mbaPercent", Some(0.0), Some(100.0), false),
    ("cpuBurstPercent", Some(1.0), Some(10000.0), false),
    ("cfsQuotaBurstPercent", Some(100.0), None, false),
    ("cfsQuotaBurstPeriodSeconds", Some(-1.0), None, false),
    ("sharePoolThresholdPercent", Some(0.0), Some(100.0), false),
    ("minFreeKbytesFactor", Some(0.0), None, true),
    ("watermarkScaleFactor", Some(0.0), Some(400.0), true),
    ("memcgReapBackGround", Some(0.0), Some(1.0), false),
];

/// (greater, lesser): both set ⇒ greater > lesser.
const ORDERED: &[(&str, &str)] = &[
    ("memoryEvictThresholdPercent", "memoryEvictLowerPercent"),
    (
        "cpuEvictBESatisfactionUpperPercent",
        "cpuEvictBESatisfactionLowerPercent",
    ),
    ("catRangeEndPercent", "catRangeStartPercent"),
];

fn check_ranges(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let p = format!("{path}.{k}");
                if let (Some((_, min, max, excl)), Some(x)) =
                    (RANGES.iter().find(|r| r.0 == k), child.as_f64())
                {
                    let low = min.is_some_and(|m| if *excl { x <= m } else { x < m });
                    let high = max.is_some_and(|m| x > m);
                    if low || high {
                        let lo = min.map(|m| format!("{}{m}", if *excl { ">" } else { ">=" }));
                        let hi = max.map(|m| format!("<={m}"));
                        let rule: Vec<String> = lo.into_iter().chain(hi).collect();
                        errs.push(FieldError::invalid(
                            &p,
                            format!("{x}: must be {}", rule.join(" and ")),
                        ));
                    }
                }
                check_ranges(child, &p, errs);
            }
            for (gt, lt) in ORDERED {
                if let (Some(a), Some(b)) = (
                    m.get(*gt).and_then(Value::as_f64),
                    m.get(*lt).and_then(Value::as_f64),
                ) && a <= b
                {
                    errs.push(FieldError::invalid(
                        format!("{path}.{gt}"),
                        format!("{a}: must be greater than {lt} ({b})"),
                    ));
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_ranges(item, &format!("{path}[{i}]"), errs);
            }
        }
        _ => {}
    }
}

/// A named node entry of one key: `nodeConfigs[i]` or `nodeStrategies[i]`.
#[derive(Debug, Clone)]
pub struct NodeEntry {
    pub name: Option<String>,
    pub selector: Option<LabelSelector>,
}

fn entries_of(key: &str, v: &Value) -> Result<Vec<NodeEntry>, FieldError> {
    let list_key = if key == KEY_COLOCATION {
        "nodeConfigs"
    } else {
        "nodeStrategies"
    };
    let mut out = Vec::new();
    for (i, e) in v
        .get(list_key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let selector = match e.get("nodeSelector") {
            None | Some(Value::Null) => None,
            Some(s) => Some(
                serde_json::from_value::<LabelSelector>(s.clone()).map_err(|err| {
                    FieldError::new(format!("{list_key}[{i}].nodeSelector"), err.to_string())
                        .within(key)
                })?,
            ),
        };
        out.push(NodeEntry {
            name: e.get("name").and_then(Value::as_str).map(str::to_string),
            selector,
        });
    }
    Ok(out)
}

fn check_entries(key: &str, entries: &[NodeEntry]) -> Result<(), FieldError> {
    let entry =
        |i: usize, detail: String| FieldError::new(key, format!("node entry {i}: {detail}"));
    let mut names = std::collections::BTreeSet::new();
    for (i, e) in entries.iter().enumerate() {
        let empty = e.selector.as_ref().is_none_or(|s| {
            s.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && s.match_expressions.as_ref().is_none_or(|m| m.is_empty())
        });
        if empty {
            return Err(entry(i, "nodeSelector must not be empty".into()));
        }
        if let Some(s) = &e.selector {
            Selector::from_label_selector(s)
                .map_err(|err| entry(i, format!("nodeSelector: {err}")))?;
        }
        if let Some(n) = e.name.as_deref().filter(|n| !n.is_empty())
            && !names.insert(n.to_string())
        {
            return Err(entry(i, format!("duplicate name {n:?}")));
        }
    }
    overlap(key, entries)
}

/// Label sets a selector certainly matches: matchLabels × every `In` value (capped).
fn synthetic_sets(s: &LabelSelector) -> Vec<BTreeMap<String, String>> {
    let mut sets = vec![s.match_labels.clone().unwrap_or_default()];
    for e in s.match_expressions.iter().flatten() {
        let values: Vec<String> = match e.operator.as_str() {
            "In" => e.values.clone().unwrap_or_default(),
            "Exists" => vec!["koord-synthetic".into()],
            _ => continue,
        };
        let mut next = Vec::new();
        for set in &sets {
            for v in &values {
                let mut s2 = set.clone();
                s2.insert(e.key.clone(), v.clone());
                next.push(s2);
            }
        }
        next.truncate(1024);
        sets = next;
    }
    sets
}

fn overlap(key: &str, entries: &[NodeEntry]) -> Result<(), FieldError> {
    for (i, e) in entries.iter().enumerate() {
        let Some(sel) = &e.selector else { continue };
        for set in synthetic_sets(sel) {
            let hits: Vec<usize> = entries
                .iter()
                .enumerate()
                .filter(|(_, o)| label_selector_matches(o.selector.as_ref(), Some(&set)))
                .map(|(j, _)| j)
                .collect();
            if hits.len() > 1 {
                return Err(FieldError::new(
                    key,
                    format!(
                        "node entries {hits:?} overlap: a node labelled {set:?} (from entry {i}) would match more than one"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The keys the webhook checks (host-application-config has no node entries or ranges).
const CHECKED_KEYS: [&str; 5] = [
    KEY_COLOCATION,
    KEY_THRESHOLD,
    KEY_QOS,
    KEY_SYSTEM,
    KEY_CPU_BURST,
];

/// The first out-of-range value in one key's JSON (Koordinator's `validate` tags). The
/// manager applies it when it reads the ConfigMap as well as in the webhook, so a value
/// written while no webhook ran never reaches a NodeSLO.
pub fn ranges(key: &str, raw: &str) -> Result<(), FieldError> {
    let Ok(v) = serde_json::from_str::<Value>(raw) else {
        return Ok(());
    };
    let mut errs = Vec::new();
    check_ranges(&v, key, &mut errs);
    errs.into_iter().next().map_or(Ok(()), Err)
}

/// A key's trimmed value when it is set and non-empty.
fn present<'a>(data: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    data.get(key).map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// Node entries per key, from raw ConfigMap data.
pub fn node_entries(
    data: &BTreeMap<String, String>,
) -> Result<Vec<(&'static str, Vec<NodeEntry>)>, FieldError> {
    let mut out = Vec::new();
    for key in CHECKED_KEYS {
        let Some(raw) = present(data, key) else {
            continue;
        };
        let v: Value =
            serde_json::from_str(raw).map_err(|e| FieldError::new(key, e.to_string()))?;
        out.push((key, entries_of(key, &v)?));
    }
    Ok(out)
}

/// The first key under which `labels` match more than one node entry.
pub fn multiple_matches(
    entries: &[(&'static str, Vec<NodeEntry>)],
    node: &str,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    for (key, list) in entries {
        let hits: Vec<String> = list
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                e.selector.is_some() && label_selector_matches(e.selector.as_ref(), Some(labels))
            })
            .map(|(i, e)| e.name.clone().unwrap_or_else(|| format!("#{i}")))
            .collect();
        if hits.len() > 1 {
            return Some(format!(
                "node {node} would match {} node entries of {key}: {hits:?}",
                hits.len()
            ));
        }
    }
    None
}

fn parses(key: &str, raw: &str) -> Result<(), FieldError> {
    fn typed<T: serde::de::DeserializeOwned>(raw: &str) -> Result<T, FieldError> {
        serde_json::from_str::<T>(raw).map_err(|e| FieldError::whole(e.to_string()))
    }
    let r = match key {
        KEY_COLOCATION => typed::<ColocationCfg>(raw)
            .and_then(ColocationCfg::from_user)
            .map(|_| ()),
        KEY_THRESHOLD => typed::<StrategyCfg<ResourceThresholdStrategy>>(raw).map(|_| ()),
        KEY_QOS => typed::<StrategyCfg<ResourceQOSStrategy>>(raw).map(|_| ()),
        KEY_CPU_BURST => typed::<StrategyCfg<CPUBurstStrategy>>(raw).map(|_| ()),
        KEY_SYSTEM => typed::<StrategyCfg<SystemStrategy>>(raw).map(|_| ()),
        _ => Ok(()),
    };
    r.map_err(|e| e.within(key))
}

/// `/validate-configmap` on slo-controller-config: checks every changed, non-empty key.
pub fn validate_configmap(
    new: &BTreeMap<String, String>,
    old: Option<&BTreeMap<String, String>>,
    nodes: &[std::sync::Arc<Node>],
) -> Result<(), FieldError> {
    let mut changed_any = false;
    for key in CHECKED_KEYS {
        let Some(raw) = present(new, key) else {
            continue;
        };
        if old.and_then(|o| present(o, key)) == Some(raw) {
            continue;
        }
        changed_any = true;
        parses(key, raw)?;
        ranges(key, raw)?;
        let v: Value =
            serde_json::from_str(raw).map_err(|e| FieldError::new(key, e.to_string()))?;
        check_entries(key, &entries_of(key, &v)?)?;
    }
    if !changed_any {
        return Ok(());
    }
    let entries = node_entries(new)?;
    if entries.iter().any(|(_, l)| l.len() > 1) {
        for n in nodes {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            if let Some(e) =
                multiple_matches(&entries, n.metadata.name.as_deref().unwrap_or(""), &labels)
            {
                return Err(FieldError::whole(e));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;

/// Node entries per key of the configuration the manager runs with.
pub fn node_entries_of(cfg: &SloConfig) -> Vec<(&'static str, Vec<NodeEntry>)> {
    fn of<T>(list: &Option<Vec<strategies::NodeStrategy<T>>>) -> Vec<NodeEntry> {
        list.iter()
            .flatten()
            .map(|n| NodeEntry {
                name: n.name.clone(),
                selector: n.node_selector.clone(),
            })
            .collect()
    }
    let colocation = cfg
        .colocation
        .node_configs
        .iter()
        .flatten()
        .map(|n| NodeEntry {
            name: n.name.clone(),
            selector: n.node_selector.clone(),
        })
        .collect();
    vec![
        (KEY_COLOCATION, colocation),
        (KEY_THRESHOLD, of(&cfg.threshold.node_strategies)),
        (KEY_QOS, of(&cfg.qos.node_strategies)),
        (KEY_SYSTEM, of(&cfg.system.node_strategies)),
        (KEY_CPU_BURST, of(&cfg.cpu_burst.node_strategies)),
    ]
}
