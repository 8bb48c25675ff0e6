//! `/metrics` in Prometheus's text format 0.0.4, as client_golang's default handler serves
//! Koordinator's and kube-scheduler's: prometheus-client writes OpenMetrics, whose
//! counters always end in `_total`. Here a counter keeps the name its Go original has —
//! `scheduler_schedule_attempts_total`, but `koordlet_pod_eviction` (Koordinator names
//! most of its counters without the suffix) — so existing queries and dashboards match
//! series of the same name and the same `# TYPE counter`.

use std::collections::BTreeSet;

/// Rewrites an OpenMetrics exposition as text format 0.0.4. `bare` names the counter
/// families exposed without `_total`.
pub fn text_004(openmetrics: &str, bare: &BTreeSet<String>) -> String {
    // HELP comes before TYPE: the types first, by family.
    let types: std::collections::HashMap<&str, &str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' '))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    // The family being written: (its OpenMetrics name, type, name exposed here).
    let mut family: Option<(String, String, String)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, tail) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            match kind {
                "TYPE" => {
                    let (exposed, ty) = exposed(name, tail, bare);
                    out.push_str(&format!("# TYPE {exposed} {ty}\n"));
                    family = Some((name.to_string(), tail.to_string(), exposed));
                }
                "HELP" => {
                    let ty = types.get(name).copied().unwrap_or("");
                    let (exposed, _) = exposed(name, ty, bare);
                    out.push_str(&format!("# HELP {exposed} {tail}\n"));
                }
                // UNIT and EOF have no 0.0.4 form.
                _ => {}
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        // Exemplars (` # {...}`) have no 0.0.4 form either.
        let sample = line.split(" # ").next().unwrap_or(line);
        match &family {
            Some((name, ty, exposed)) if ty == "counter" => {
                let created = format!("{name}_created");
                if sample.starts_with(&created) {
                    continue;
                }
                let total = format!("{name}_total");
                match sample.strip_prefix(&total) {
                    Some(rest) => out.push_str(&format!("{exposed}{rest}\n")),
                    None => out.push_str(&format!("{sample}\n")),
                }
            }
            _ => out.push_str(&format!("{sample}\n")),
        }
    }
    out
}

/// The 0.0.4 name and type of an OpenMetrics family.
fn exposed(name: &str, ty: &str, bare: &BTreeSet<String>) -> (String, &'static str) {
    match ty {
        "counter" if bare.contains(name) => (name.to_string(), "counter"),
        "counter" => (format!("{name}_total"), "counter"),
        "info" => (format!("{name}_info"), "gauge"),
        "gauge" => (name.to_string(), "gauge"),
        "histogram" => (name.to_string(), "histogram"),
        "summary" => (name.to_string(), "summary"),
        _ => (name.to_string(), "untyped"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENMETRICS: &str = "# HELP koordlet_pod_eviction evicted pods.
# TYPE koordlet_pod_eviction counter
koordlet_pod_eviction_total{reason=\"cpu\"} 2
koordlet_pod_eviction_created{reason=\"cpu\"} 1700000000.0
# HELP scheduler_schedule_attempts Attempts.
# TYPE scheduler_schedule_attempts counter
scheduler_schedule_attempts_total{result=\"scheduled\"} 5 # {trace_id=\"x\"} 1
# HELP koord_build koord build information.
# TYPE koord_build info
koord_build_info{version=\"1\"} 1
# HELP node_usage Usage.
# TYPE node_usage gauge
# UNIT node_usage cores
node_usage{node=\"n\"} 1.5
# EOF
";

    #[test]
    fn counters_keep_their_go_names_and_the_rest_is_004() {
        let bare: BTreeSet<String> = ["koordlet_pod_eviction".to_string()].into();
        let text = text_004(OPENMETRICS, &bare);
        assert_eq!(
            text,
            "# HELP koordlet_pod_eviction evicted pods.
# TYPE koordlet_pod_eviction counter
koordlet_pod_eviction{reason=\"cpu\"} 2
# HELP scheduler_schedule_attempts_total Attempts.
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{result=\"scheduled\"} 5
# HELP koord_build_info koord build information.
# TYPE koord_build_info gauge
koord_build_info{version=\"1\"} 1
# HELP node_usage Usage.
# TYPE node_usage gauge
node_usage{node=\"n\"} 1.5
"
        );
        let parsed =
            prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        let eviction = parsed
            .samples
            .iter()
            .find(|s| s.metric == "koordlet_pod_eviction")
            .unwrap();
        assert!(matches!(eviction.value, prometheus_parse::Value::Counter(v) if v == 2.0));
    }
}
