//! The metrics reference: each family every process registers, then each role's, with
//! type, labels, help and the koord dashboards that query it — read from the registries
//! the roles build, not from a list kept by hand.

use super::{cell, header};
use crate::kernel::metric_docs::FamilyDoc;
use crate::kernel::metrics::Metrics;

pub fn page() -> String {
    let mut out = header(
        "Metrics",
        "the roles' metric registrations and koord's dashboards",
    );
    out.push_str(
        "Every series on `/metrics` of the admin endpoint (Prometheus text format 0.0.4). \
         Koordinator's and kube's families keep their names and labels, so their dashboards \
         and alerts work unchanged; `koord_*` families are koord's own. The dashboards named \
         are Koordinator's (`scheduling.json`, `descheduling.json` of its repository) and \
         koord's (`koord / ...`, installed by `manifests/overlays/monitoring`).\n",
    );
    let common = Metrics::new();
    let _ready = crate::kernel::readiness::Readiness::new(&common);
    let base = common.families();
    let queries = queries();
    out.push_str(&table("Every process", &base, &queries));
    for (role, families) in roles() {
        let own: Vec<FamilyDoc> = families
            .into_iter()
            .filter(|f| !base.iter().any(|b| b.name == f.name))
            .collect();
        out.push_str(&table(&format!("`--role={role}`"), &own, &queries));
    }
    out
}

/// Each role's registry as the role builds it.
fn roles() -> Vec<(&'static str, Vec<FamilyDoc>)> {
    let with = |f: &dyn Fn(&Metrics)| {
        let m = Metrics::new();
        f(&m);
        m.families()
    };
    vec![
        (
            "koordlet",
            with(&|m| {
                crate::koordlet::metrics::KoordletMetrics::register(m);
                crate::koordlet::usage_series::UsageSeries::register(m);
            }),
        ),
        (
            "manager",
            with(&|m| {
                crate::manager::metrics::ManagerMetrics::register(m);
            }),
        ),
        (
            "scheduler",
            with(&|m| {
                crate::scheduler::metrics::SchedulerMetrics::register(m);
            }),
        ),
        (
            "descheduler",
            with(&|m| {
                crate::descheduler::live::register_pods_evicted(m);
            }),
        ),
    ]
}

/// (family, dashboard, panel) for every family a panel queries: Koordinator's dashboards
/// (`scheduling.json`, `descheduling.json` of its repository) and koord's own.
fn queries() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (board, text) in [
        (
            "Koordinator scheduling",
            include_str!("../../tests/fixtures/koordinator/dashboards/scheduling.json"),
        ),
        (
            "Koordinator descheduling",
            include_str!("../../tests/fixtures/koordinator/dashboards/descheduling.json"),
        ),
    ] {
        let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
        panels(&v, &mut |panel, expr| {
            for family in series_in(expr) {
                let entry = (family, board.to_string(), panel.to_string());
                if !out.contains(&entry) {
                    out.push(entry);
                }
            }
        });
    }
    for (family, board, panel) in crate::manifests::dashboards::queries() {
        out.push((family, board.to_string(), panel.to_string()));
    }
    out
}

/// Every (panel title, PromQL expression) of a Grafana dashboard, rows included.
fn panels(v: &serde_json::Value, f: &mut dyn FnMut(&str, &str)) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            if let (Some(Value::String(title)), Some(Value::Array(targets))) =
                (m.get("title"), m.get("targets"))
            {
                for t in targets {
                    if let Some(Value::String(e)) = t.get("expr") {
                        f(title, e);
                    }
                }
            }
            m.values().for_each(|x| panels(x, f));
        }
        Value::Array(a) => a.iter().for_each(|x| panels(x, f)),
        _ => {}
    }
}

/// The metric families a PromQL expression names (identifiers followed by a selector),
/// histogram and counter suffixes dropped.
fn series_in(e: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = e;
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
        let tail = &rest[start..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        let word = &tail[..len];
        let selector = tail[len..].starts_with(['{', '[']);
        if selector && word.contains('_') {
            let family = ["_bucket", "_sum", "_count", "_total"]
                .iter()
                .find_map(|s| word.strip_suffix(s))
                .unwrap_or(word);
            out.push(family.to_string());
        }
        rest = &tail[len.max(1)..];
    }
    out
}

/// One role's families; `queries`: (family, dashboard, panel) of every dashboard panel.
fn table(title: &str, families: &[FamilyDoc], queries: &[(String, String, String)]) -> String {
    let mut out = format!(
        "\n## {title}\n\n| metric | type | labels | dashboards | meaning |\n|---|---|---|---|---|\n"
    );
    let mut sorted: Vec<&FamilyDoc> = families.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for f in sorted {
        let base = f.name.trim_end_matches("_total");
        let mut boards: Vec<String> = queries
            .iter()
            .filter(|(family, _, _)| family == base || family == &f.name)
            .map(|(_, board, panel)| format!("{board}: {}", panel.trim()))
            .collect();
        boards.dedup();
        let labels: Vec<String> = f.labels.names().iter().map(|l| format!("`{l}`")).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            f.name,
            f.kind,
            labels.join(", "),
            cell(&boards.join("; ")),
            cell(&f.help)
        ));
    }
    out
}
