//! What a replay prints and writes: JSON (everything), a text summary, and one
//! self-contained HTML page (inline SVG charts, no script, no outside resources) with the
//! cluster's batch resources over time under each configuration and per-node charts of
//! requests, estimated usage and batch allocatable.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::recording::Header;
use super::replay::Run;

/// Nodes drawn one chart each in the HTML report at most (the first by name).
pub const MAX_NODE_CHARTS: usize = 24;
/// Rows of a table (pending pods, evictions, differences) shown at most.
const MAX_ROWS: usize = 200;

/// The replay's placements against the recording's live ones, for the pods in both.
pub fn agreement(run: &Run) -> Value {
    let mut equal = 0;
    let mut differ = Vec::new();
    for (pod, live) in &run.live {
        match run.placements.get(pod) {
            Some(p) if &p.node == live => equal += 1,
            other => {
                differ.push(json!({"pod": pod, "replay": other.map(|p| &p.node), "live": live}))
            }
        }
    }
    json!({"compared": run.live.len(), "equal": equal, "differ": differ})
}

/// Pods placed differently by two runs (or placed by one only).
pub fn differences(a: &Run, b: &Run) -> Vec<Value> {
    let pods: BTreeSet<&String> = a.placements.keys().chain(b.placements.keys()).collect();
    pods.into_iter()
        .filter_map(|pod| {
            let x = a.placements.get(pod).map(|p| &p.node);
            let y = b.placements.get(pod).map(|p| &p.node);
            (x != y).then(|| json!({"pod": pod, a.name.clone(): x, b.name.clone(): y}))
        })
        .collect()
}

pub fn to_json(header: &Header, runs: &[Run]) -> Value {
    let runs_json: Vec<Value> = runs
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["agreement"] = agreement(r);
            v["podsPerSecond"] = json!(rate(r));
            v
        })
        .collect();
    let mut out = json!({"recording": header, "runs": runs_json});
    if let [a, b] = runs {
        out["differences"] = Value::Array(differences(a, b));
    }
    out
}

fn rate(r: &Run) -> f64 {
    if r.seconds > 0.0 {
        (r.pods as f64 / r.seconds).round()
    } else {
        0.0
    }
}

fn batch_range(r: &Run) -> (i64, i64) {
    let cpu = r.samples.iter().map(|s| s.batch_cpu);
    (cpu.clone().min().unwrap_or(0), cpu.max().unwrap_or(0))
}

pub fn to_text(runs: &[Run]) -> String {
    let mut out = String::new();
    for r in runs {
        let a = agreement(r);
        let (lo, hi) = batch_range(r);
        let _ = writeln!(
            out,
            "{}: {} pods scheduled, {} pending; matches the live scheduler for {}/{} pods; \
             batch-cpu {}–{} m; {} evictions (descheduler, dry run); {} pods in {:.2} s",
            r.name,
            r.placements.len(),
            r.pending.len(),
            a["equal"],
            a["compared"],
            lo,
            hi,
            r.evictions.len(),
            r.pods,
            r.seconds
        );
        for w in &r.warnings {
            let _ = writeln!(out, "  warning: {w}");
        }
        for (pod, why) in r.pending.iter().take(20) {
            let _ = writeln!(out, "  pending {pod}: {why}");
        }
        if let Some(w) = &r.what_if {
            let _ = writeln!(out, "  what if {} x {}: {} fit", w.template, w.asked, w.fit);
            for (node, n) in &w.nodes {
                let _ = writeln!(out, "    {node}: {n}");
            }
            if let Some(s) = &w.stopped {
                let why = s.failed_message.as_deref().unwrap_or("");
                let _ = writeln!(out, "    the next does not fit: {why}");
            }
        }
    }
    if let [a, b] = runs {
        let d = differences(a, b);
        let _ = writeln!(
            out,
            "{} pods placed differently by {} and {}",
            d.len(),
            a.name,
            b.name
        );
        for v in d.iter().take(20) {
            let _ = writeln!(out, "  {v}");
        }
    }
    out
}

const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// One line of a chart: (label, colour, dashed, points as (t ms, value)).
type Series = (String, &'static str, bool, Vec<(u64, i64)>);

/// One line chart.
fn chart(title: &str, unit: &str, series: &[Series]) -> String {
    let (w, h, pad) = (560.0, 180.0, 36.0);
    let t_max = series
        .iter()
        .flat_map(|s| s.3.iter().map(|p| p.0))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let v_max = series
        .iter()
        .flat_map(|s| s.3.iter().map(|p| p.1))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut svg = format!(
        "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">\
         <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#fafafa\" stroke=\"#ccc\"/>\
         <text x=\"4\" y=\"12\" font-size=\"10\">{v_max} {unit}</text><text x=\"4\" y=\"{}\" font-size=\"10\">0</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\">{:.0} s</text>",
        esc(title),
        h - 4.0,
        w - 4.0,
        h - 4.0,
        t_max / 1000.0
    );
    for (i, (label, color, dashed, points)) in series.iter().enumerate() {
        let pts: Vec<String> = points
            .iter()
            .map(|(t, v)| {
                let x = pad + (*t as f64 / t_max) * (w - 2.0 * pad);
                let y = h - pad / 2.0 - (*v as f64 / v_max) * (h - pad);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let dash = if *dashed {
            " stroke-dasharray=\"5,3\""
        } else {
            ""
        };
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"{color}\">{}</text>",
            pts.join(" "),
            pad + 10.0,
            24.0 + 12.0 * i as f64,
            esc(label)
        );
    }
    svg.push_str("</svg></figure>\n");
    svg
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn to_html(header: &Header, runs: &[Run]) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>koord simulate</h1><p>Recording of <code>{}</code> started {}; kinds: {}.</p>",
        esc(&header.server),
        esc(&header.started_at),
        esc(&header.kinds.join(", "))
    );
    body.push_str("<table><tr><th>configuration</th><th>scheduled</th><th>pending</th><th>as live</th><th>evictions</th><th>batch-cpu (m)</th></tr>");
    for r in runs {
        let a = agreement(r);
        let (lo, hi) = batch_range(r);
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{lo}–{hi}</td></tr>",
            esc(&r.name),
            r.placements.len(),
            r.pending.len(),
            a["equal"],
            a["compared"],
            r.evictions.len()
        );
    }
    body.push_str("</table>");
    let cluster = |pick: fn(&super::replay::Sample) -> i64| -> Vec<Series> {
        runs.iter()
            .enumerate()
            .map(|(i, r)| {
                let pts = r.samples.iter().map(|s| (s.t, pick(s))).collect();
                (r.name.clone(), COLORS[i % COLORS.len()], i > 0, pts)
            })
            .collect()
    };
    body.push_str("<h2>Cluster batch resources</h2>");
    body.push_str(&chart("batch-cpu", "m", &cluster(|s| s.batch_cpu)));
    body.push_str(&chart(
        "batch-memory",
        "bytes",
        &cluster(|s| s.batch_memory),
    ));
    node_charts(&mut body, runs);
    tables(&mut body, runs);
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>koord simulate</title>\
         <style>body{{font-family:sans-serif;margin:2em}}figure{{display:inline-block;margin:.5em}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px}}</style>\
         </head><body>{body}</body></html>\n"
    )
}

fn node_charts(body: &mut String, runs: &[Run]) {
    let Some(first) = runs.first() else { return };
    let nodes: Vec<&String> = first
        .samples
        .last()
        .map(|s| s.nodes.keys().take(MAX_NODE_CHARTS).collect())
        .unwrap_or_default();
    body.push_str("<h2>Nodes: requests, estimated usage, batch allocatable (CPU)</h2>");
    for node in nodes {
        let mut series = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            let of = |f: fn(&super::replay::NodeSample) -> i64| -> Vec<(u64, i64)> {
                r.samples
                    .iter()
                    .filter_map(|s| Some((s.t, f(s.nodes.get(node)?))))
                    .collect()
            };
            let dashed = i > 0;
            let tag = |what: &str| format!("{what} ({})", r.name);
            series.push((tag("requests"), COLORS[0], dashed, of(|n| n.requests_cpu)));
            series.push((tag("usage"), COLORS[2], dashed, of(|n| n.usage_cpu)));
            series.push((tag("batch"), COLORS[1], dashed, of(|n| n.batch_cpu)));
        }
        body.push_str(&chart(node, "m", &series));
    }
}

fn tables(body: &mut String, runs: &[Run]) {
    for r in runs {
        let _ = write!(body, "<h2>{}: pending pods</h2><table>", esc(&r.name));
        for (pod, why) in r.pending.iter().take(MAX_ROWS) {
            let _ = write!(body, "<tr><td>{}</td><td>{}</td></tr>", esc(pod), esc(why));
        }
        body.push_str("</table>");
        let _ = write!(
            body,
            "<h2>{}: evictions (dry run)</h2><table>",
            esc(&r.name)
        );
        for e in r.evictions.iter().take(MAX_ROWS) {
            let _ = write!(body, "<tr><td>{}</td></tr>", esc(&e.to_string()));
        }
        body.push_str("</table>");
    }
    if let [a, b] = runs {
        body.push_str("<h2>Placed differently</h2><table>");
        for d in differences(a, b).iter().take(MAX_ROWS) {
            let _ = write!(body, "<tr><td>{}</td></tr>", esc(&d.to_string()));
        }
        body.push_str("</table>");
    }
}
