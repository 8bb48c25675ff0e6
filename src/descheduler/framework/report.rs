//! A pass's decisions as `koord explain deschedule` prints them (and the live dry run logs).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::Report;
use super::action::{Action, Planned};

// The report's JSON, serialized straight from the report: the dry run logs it every pass,
// and a `Value` tree of 1,000 nodes cost several MiB per pass.
#[derive(Serialize)]
struct Out<'a> {
    nodes: Vec<NodeOut<'a>>,
    evictions: Vec<EvictionOut<'a>>,
    skipped: Vec<SkipOut<'a>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    errors: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unsupported: Vec<UnsupportedOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    actions: Vec<ActionOut<'a>>,
}

/// A change besides an eviction: `cordon` a node, or `annotate` a pod.
#[derive(Serialize)]
struct ActionOut<'a> {
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pod: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotation: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    plugin: &'a str,
    reason: &'a str,
}

fn action_out(p: &Planned) -> ActionOut<'_> {
    let base = ActionOut {
        action: "cordon",
        node: None,
        pod: None,
        annotation: None,
        value: None,
        plugin: &p.plugin,
        reason: &p.reason,
    };
    match &p.action {
        Action::Cordon { node } => ActionOut {
            node: Some(node),
            ..base
        },
        Action::Annotate {
            namespace,
            pod,
            key,
            value,
        } => ActionOut {
            action: "annotate",
            pod: Some(format!("{namespace}/{pod}")),
            annotation: Some(key),
            value: Some(value),
            ..base
        },
    }
}

/// A plugin the configuration enables and koord skips.
#[derive(Serialize)]
struct UnsupportedOut<'a> {
    plugin: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct Thresholds<'a> {
    low: &'a BTreeMap<String, f64>,
    high: &'a BTreeMap<String, f64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeOut<'a> {
    node: &'a str,
    class: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    prod_class: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a BTreeMap<String, f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thresholds: Option<Thresholds<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    abnormal: Option<u32>,
}

#[derive(Serialize)]
struct EvictionOut<'a> {
    pod: String,
    node: &'a str,
    plugin: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'a str>,
}

#[derive(Serialize)]
struct SkipOut<'a> {
    pod: &'a str,
    node: &'a str,
    reason: &'a str,
}

impl Report {
    fn out(&self) -> Out<'_> {
        Out {
            nodes: self
                .nodes
                .iter()
                .map(|n| {
                    let measured = n.reason.is_none();
                    NodeOut {
                        node: &n.node,
                        class: n.class,
                        prod_class: n.prod_class,
                        reason: n.reason.as_deref(),
                        usage: measured.then_some(&n.usage),
                        thresholds: measured.then_some(Thresholds {
                            low: &n.low,
                            high: &n.high,
                        }),
                        abnormal: n.abnormal,
                    }
                })
                .collect(),
            evictions: self
                .evictions
                .iter()
                .map(|e| EvictionOut {
                    pod: e.pod.key(),
                    node: &e.node,
                    plugin: &e.plugin,
                    reason: &e.reason,
                    mode: e.mode.as_deref(),
                })
                .collect(),
            skipped: self
                .skipped
                .iter()
                .map(|s| SkipOut {
                    pod: &s.pod,
                    node: &s.node,
                    reason: &s.reason,
                })
                .collect(),
            errors: &self.errors,
            unsupported: self
                .unsupported
                .iter()
                .map(|(plugin, reason)| UnsupportedOut { plugin, reason })
                .collect(),
            actions: self.actions.iter().map(action_out).collect(),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.out()).unwrap_or(Value::Null)
    }

    /// [`Report::to_json`] as one line of text, without building the tree.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(&self.out()).unwrap_or_default()
    }

    /// One line per node, eviction and skip.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let usage: Vec<String> = n
                .usage
                .iter()
                .map(|(r, v)| format!("{r} {v:.2}%"))
                .collect();
            let high: Vec<String> = n.high.iter().map(|(r, v)| format!("{r} {v:.2}%")).collect();
            out += &format!(
                "node {} {}: usage [{}] high [{}]{}\n",
                n.node,
                n.class,
                usage.join(", "),
                high.join(", "),
                n.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            );
        }
        for e in &self.evictions {
            out += &format!(
                "evict {} from {} by {}{}: {}\n",
                e.pod.key(),
                e.node,
                e.plugin,
                e.mode
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default(),
                e.reason
            );
        }
        for s in &self.skipped {
            out += &format!("skip {} on {}: {}\n", s.pod, s.node, s.reason);
        }
        for e in &self.errors {
            out += &format!("note: {e}\n");
        }
        for a in &self.actions {
            let what = match &a.action {
                Action::Cordon { node } => format!("cordon node {node}"),
                Action::Annotate {
                    namespace,
                    pod,
                    key,
                    value,
                } => format!("annotate {namespace}/{pod} {key}={value}"),
            };
            out += &format!("{what} by {}: {}\n", a.plugin, a.reason);
        }
        for (_, why) in &self.unsupported {
            out += &format!("warning: {why}\n");
        }
        out
    }
}
