//! kube-scheduler's FitError message from a cycle's per-node verdicts.

use std::collections::BTreeMap;

use super::runtime::CycleResult;

/// kube-scheduler's FitError message: "0/5 nodes are available: 3 node(s) …, 2 Insufficient
/// cpu."; after a PreFilter rejection, that plugin's message as is.
pub fn fit_error(total: usize, result: &CycleResult) -> String {
    if let Some(m) = &result.pre_filter_msg {
        return format!("0/{total} nodes are available: {m}.");
    }
    let reasons = result.verdicts.values().filter(|v| !v.feasible);
    nodes_available(total, reasons.map(|v| v.reason.as_ref()))
}

/// "0/N nodes are available: 2 reason, 1 other reason." over each rejected node's reason.
pub fn nodes_available<'a>(total: usize, reasons: impl Iterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in reasons {
        if !reason.as_bytes().contains(&b',') {
            // One reason (the common case, once per node): no split.
            if !reason.is_empty() {
                *counts.entry(reason).or_insert(0) += 1;
            }
            continue;
        }
        for r in reason.split(", ").filter(|r| !r.is_empty()) {
            *counts.entry(r).or_insert(0) += 1;
        }
    }
    let mut parts: Vec<String> = counts
        .into_iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    parts.sort();
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}
