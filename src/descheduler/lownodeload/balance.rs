//! LowNodeLoad's node-level pass (step 7 of Koordinator's Balance): move pods off the
//! sources, hottest first, while the targets' room under their high thresholds lasts and
//! until each source is back under its own high threshold.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::classify::NodeLoad;
use crate::api::placement::tolerates;
use crate::api::pod::Amounts;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::sorter::{compare, usage_score};

/// A pod on a source node with its measured usage and its requests.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub pod: Arc<PodView>,
    pub usage: Amounts,
    pub requests: Amounts,
}

/// A node pods may move to.
#[derive(Debug, Clone)]
pub struct Target {
    pub load: NodeLoad,
    pub node: Arc<Node>,
    /// Σ requests of its pods.
    pub requested: Amounts,
}

/// One eviction the pass made (or, in dry run, would make).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub pod: String,
    pub node: String,
    pub reason: String,
}

fn get(m: &Amounts, r: &str) -> i64 {
    m.get(r).copied().unwrap_or(0)
}

fn over(n: &NodeLoad) -> Vec<&String> {
    n.high
        .keys()
        .filter(|r| get(&n.usage, r) > get(&n.high, r))
        .collect()
}

/// `v` in percent of `alloc`.
pub fn pct(v: i64, alloc: i64) -> f64 {
    if alloc <= 0 {
        0.0
    } else {
        v as f64 * 100.0 / alloc as f64
    }
}

/// Koordinator's words: `node is overutilized, node cpu usage(85.00%)>threshold(70.00%)`
/// (`prod cpu …` in the prod pass), resources in name order; the threshold as configured.
pub fn reason(n: &NodeLoad) -> String {
    let who = if n.prod { "prod" } else { "node" };
    let parts: Vec<String> = over(n)
        .into_iter()
        .map(|r| {
            let a = get(&n.allocatable, r);
            let threshold = match n.high_pct.get(r) {
                Some(p) => *p,
                None => pct(get(&n.high, r), a),
            };
            format!(
                "{who} {r} usage({:.2}%)>threshold({threshold:.2}%)",
                pct(get(&n.usage, r), a),
            )
        })
        .collect();
    format!("node is overutilized, {}", parts.join(", "))
}

/// Whether `c` could run on `t` (NodeFit): selector, affinity, taints, schedulable,
/// requests, and usage staying under the target's high threshold.
fn fits(c: &Candidate, t: &Target, resources: &[String]) -> bool {
    let node = &t.node;
    static NONE: std::sync::LazyLock<std::collections::BTreeMap<String, String>> =
        std::sync::LazyLock::new(Default::default);
    let labels = node.metadata.labels.as_ref().unwrap_or(&NONE);
    let name = node.metadata.name.as_deref().unwrap_or("");
    let nspec = node.spec.as_ref();
    let unschedulable = nspec.and_then(|s| s.unschedulable).unwrap_or(false);
    let tolerations = &c.pod.tolerations;
    let taints_ok = nspec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| tolerates(tolerations, t));
    let requests_ok = c
        .requests
        .iter()
        .all(|(r, v)| *v <= get(&t.load.allocatable, r) - get(&t.requested, r));
    let usage_ok = resources
        .iter()
        .all(|r| get(&t.load.usage, r) + get(&c.usage, r) <= get(&t.load.high, r));
    !unschedulable && taints_ok && c.pod.fits_node(labels, name) && requests_ok && usage_ok
}

/// The node-level pass over `sources` (sorted hottest first). `filter` is the evictor's
/// and LowNodeLoad's pod filter; `evict` performs (or, dry, pretends) an eviction and says
/// whether it happened.
pub fn balance(
    sources: &mut [(NodeLoad, Vec<Candidate>)],
    targets: &mut [Target],
    resources: &[String],
    node_fit: bool,
    filter: &dyn Fn(&PodView) -> bool,
    evict: &mut dyn FnMut(&Candidate, &NodeLoad, &str) -> bool,
) -> Vec<Decision> {
    let mut budget = room(targets.iter().map(|t| &t.load), resources);
    balance_with(
        sources,
        targets,
        resources,
        node_fit,
        filter,
        evict,
        &mut budget,
    )
}

/// Σ (high − usage) over `nodes`, per resource, each node's share floored at 0.
pub fn room<'a>(nodes: impl Iterator<Item = &'a NodeLoad>, resources: &[String]) -> Amounts {
    let mut budget = Amounts::new();
    for n in nodes {
        for r in resources {
            *budget.entry(r.clone()).or_default() += (get(&n.high, r) - get(&n.usage, r)).max(0);
        }
    }
    budget
}

/// [`balance`] with the caller's budget, which is left with what remains.
#[allow(clippy::too_many_arguments)]
pub fn balance_with(
    sources: &mut [(NodeLoad, Vec<Candidate>)],
    targets: &mut [Target],
    resources: &[String],
    node_fit: bool,
    filter: &dyn Fn(&PodView) -> bool,
    evict: &mut dyn FnMut(&Candidate, &NodeLoad, &str) -> bool,
    budget: &mut Amounts,
) -> Vec<Decision> {
    let mut out = Vec::new();
    for (node, candidates) in sources.iter_mut() {
        let mut removable: Vec<&Candidate> = Vec::new();
        for c in candidates.iter().filter(|c| filter(&c.pod)) {
            if !node_fit {
                removable.push(c);
                continue;
            }
            if let Some(t) = targets.iter_mut().find(|t| fits(c, t, resources)) {
                for (r, v) in &c.usage {
                    *t.load.usage.entry(r.clone()).or_default() += v;
                }
                for (r, v) in &c.requests {
                    *t.requested.entry(r.clone()).or_default() += v;
                }
                removable.push(c);
            }
        }
        let hot: Vec<String> = over(node).into_iter().cloned().collect();
        let score = |c: &Candidate| -> f64 {
            hot.iter()
                .map(|r| {
                    usage_score(
                        get(&c.usage, r) as f64,
                        (get(&node.usage, r) - get(&node.high, r)) as f64,
                    )
                })
                .sum()
        };
        removable.sort_by(|a, b| compare(&a.pod, &b.pod, Some((score(a), score(b)))));
        for c in removable {
            if over(node).is_empty() || budget.values().any(|v| *v <= 0) {
                break;
            }
            if !filter(&c.pod) {
                continue;
            }
            let why = reason(node);
            if !evict(c, node, &why) {
                continue;
            }
            for r in resources {
                let u = if r == "pods" { 1 } else { get(&c.usage, r) };
                *budget.entry(r.clone()).or_default() -= u;
                *node.usage.entry(r.clone()).or_default() -= u;
            }
            let key = format!("{}/{}", c.pod.namespace, c.pod.name);
            out.push(Decision {
                pod: key,
                node: node.name.clone(),
                reason: why,
            });
        }
    }
    out
}

#[cfg(test)]
#[path = "balance_tests.rs"]
mod tests;
