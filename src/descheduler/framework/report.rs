//! A pass's decisions as `koord explain deschedule` prints them (and the live dry run logs).

use serde_json::{Map, Value, json};

use super::Report;
use super::world::key;

impl Report {
    pub fn to_json(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| {
                let mut o = Map::new();
                o.insert("node".into(), json!(n.node));
                o.insert("class".into(), json!(n.class));
                if let Some(p) = n.prod_class {
                    o.insert("prodClass".into(), json!(p));
                }
                if let Some(r) = &n.reason {
                    o.insert("reason".into(), json!(r));
                } else {
                    o.insert("usage".into(), json!(n.usage));
                    o.insert("thresholds".into(), json!({"low": n.low, "high": n.high}));
                }
                if let Some(a) = n.abnormal {
                    o.insert("abnormal".into(), json!(a));
                }
                Value::Object(o)
            })
            .collect();
        let evictions: Vec<Value> = self
            .evictions
            .iter()
            .map(|e| {
                let mut v = json!({"pod": key(&e.pod), "node": e.node, "plugin": e.plugin, "reason": e.reason});
                if let Some(m) = &e.mode {
                    v["mode"] = json!(m);
                }
                v
            })
            .collect();
        let skipped: Vec<Value> = self
            .skipped
            .iter()
            .map(|s| json!({"pod": s.pod, "node": s.node, "reason": s.reason}))
            .collect();
        let mut out = json!({"nodes": nodes, "evictions": evictions, "skipped": skipped});
        if !self.errors.is_empty() {
            out["errors"] = json!(self.errors);
        }
        out
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
                key(&e.pod),
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
        out
    }
}
