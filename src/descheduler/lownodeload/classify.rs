//! LowNodeLoad's view of one node pool: each node's usage (from its NodeMetric), its
//! thresholds (percentages of allocatable, or around the pool average in deviation mode)
//! and its class — the sources (high, prodHigh) and the targets (low, bothLow, prodLow).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use super::args::{Pool, Thresholds};
use std::collections::HashSet;
use std::sync::Arc;

use crate::api::extension::keys::ANNOTATION_NODE_RAW_ALLOCATABLE;
use crate::api::pod::{Amounts, amount, amounts};
use crate::descheduler::framework::metric::MetricView;
use crate::descheduler::framework::podview::PodView;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Low,
    BothLow,
    ProdLow,
    High,
    ProdHigh,
    Ignore,
}

/// One node's usage and thresholds.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLoad {
    pub name: String,
    pub allocatable: Amounts,
    pub usage: Amounts,
    pub prod_usage: Amounts,
    pub low: Amounts,
    pub high: Amounts,
    pub prod_low: Amounts,
    pub prod_high: Amounts,
    pub schedulable: bool,
    /// Judged by its prod usage (the prod pass).
    pub prod: bool,
    /// The high (prod high) thresholds as configured, in percent: what Koordinator's
    /// eviction reason prints (the deviation itself in deviation mode).
    pub high_pct: Thresholds,
    pub prod_high_pct: Thresholds,
}

/// Why a node's NodeMetric cannot be used, so the node is left out of the pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricProblem {
    #[error("no NodeMetric")]
    Missing,
    #[error("NodeMetric has no nodeMetric")]
    NoNodeMetric,
    #[error("NodeMetric has no updateTime")]
    NoUpdateTime,
    #[error("NodeMetric expired ({0} s old)")]
    Expired(i64),
}

/// The node's usage (system usage plus every reported pod's) and its prod pods' usage,
/// or why its NodeMetric cannot be used. As Koordinator's `getNodeUsage`: a pod is prod by
/// its own priority class (with the QoS default), not by what the NodeMetric says; `pods`
/// counts the pods bound to the node. `expiration_ms` 0: a NodeMetric never expires.
pub fn usage_of(
    metric: Option<&MetricView>,
    pods: &[Arc<PodView>],
    now_ms: i64,
    expiration_ms: i64,
) -> Result<(Amounts, Amounts), MetricProblem> {
    let m = metric.filter(|m| m.status).ok_or(MetricProblem::Missing)?;
    if !m.node_metric {
        return Err(MetricProblem::NoNodeMetric);
    }
    let updated = m.updated_ms.ok_or(MetricProblem::NoUpdateTime)?;
    if expiration_ms > 0 && now_ms - updated >= expiration_ms {
        return Err(MetricProblem::Expired((now_ms - updated) / 1000));
    }
    let prod_pods: HashSet<(&str, &str)> = pods
        .iter()
        .filter(|p| p.prod)
        .map(|p| (p.namespace.as_str(), p.name.as_str()))
        .collect();
    let mut usage = m.system();
    let mut prod = Amounts::new();
    for p in &m.pods {
        let is_prod = prod_pods.contains(&(p.namespace.as_str(), p.name.as_str()));
        for (k, v) in p.usage() {
            *usage.entry(k.clone()).or_default() += v;
            if is_prod {
                *prod.entry(k).or_default() += v;
            }
        }
    }
    usage.insert("pods".into(), pods.len() as i64);
    prod.insert("pods".into(), prod_pods.len() as i64);
    Ok((usage, prod))
}

/// Allocatable as LowNodeLoad counts it: the raw-allocatable annotation when present.
pub fn allocatable_of(node: &Node) -> Amounts {
    let raw = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_RAW_ALLOCATABLE))
        .and_then(|s| serde_json::from_str::<BTreeMap<String, serde_json::Value>>(s).ok())
        .and_then(|m| {
            // Go's Quantity reads a JSON number as well as a string (`{"cpu":96}`).
            m.into_iter()
                .map(|(k, v)| {
                    let text = match v {
                        serde_json::Value::String(s) => s,
                        serde_json::Value::Number(n) => n.to_string(),
                        _ => return None,
                    };
                    let q = k8s_openapi::apimachinery::pkg::api::resource::Quantity(text);
                    crate::api::quantity::parse(&q.0).ok()?;
                    Some((k, q))
                })
                .collect::<Option<BTreeMap<_, _>>>()
        });
    match raw {
        Some(r) => r.iter().map(|(k, q)| (k.clone(), amount(k, q))).collect(),
        None => amounts(node.status.as_ref().and_then(|s| s.allocatable.as_ref())),
    }
}

/// The resources a pool judges by: every threshold key and memory.
pub fn resources(p: &Pool) -> Vec<String> {
    let mut r: Vec<String> = [&p.high, &p.low, &p.prod_high, &p.prod_low]
        .iter()
        .flat_map(|m| m.keys().cloned())
        .collect();
    r.push("memory".into());
    r.sort();
    r.dedup();
    r
}

/// Koordinator's `newThresholds` for one resource: the (low, high) percentages; a resource
/// the low map lacks gets the whole capacity (0 in deviation mode, which means the same).
fn pair(low: &Thresholds, high: &Thresholds, r: &str, deviation: bool) -> (f64, f64) {
    match low.get(r) {
        Some(l) => (*l, high.get(r).copied().unwrap_or(0.0)),
        None if deviation => (0.0, 0.0),
        None => (100.0, 100.0),
    }
}

fn fraction(alloc: &Amounts, r: &str, pct: f64) -> i64 {
    (pct * 0.01 * alloc.get(r).copied().unwrap_or(0) as f64) as i64
}

/// Each resource's mean usage percentage over the pool's nodes (`calcAverageResourceUsagePercent`).
fn average(nodes: &[NodeLoad], prod: bool) -> Thresholds {
    let mut sum = Thresholds::new();
    for n in nodes {
        let usage = if prod { &n.prod_usage } else { &n.usage };
        for (r, v) in usage {
            let a = n.allocatable.get(r).copied().unwrap_or(0);
            if a != 0 {
                *sum.entry(r.clone()).or_default() += *v as f64 / a as f64 * 100.0;
            }
        }
    }
    sum.values_mut().for_each(|v| *v /= nodes.len() as f64);
    sum
}

/// One node's (low, high) thresholds for a pair of threshold maps (`getNodeThresholds`).
fn node_pair(
    n: &NodeLoad,
    low: &Thresholds,
    high: &Thresholds,
    res: &[String],
    deviation: bool,
    avg: &Thresholds,
) -> (Amounts, Amounts) {
    let (mut lo, mut hi) = (Amounts::new(), Amounts::new());
    for r in res {
        let (l, h) = pair(low, high, r, deviation);
        let (l, h) = if !deviation {
            (
                fraction(&n.allocatable, r, l),
                fraction(&n.allocatable, r, h),
            )
        } else if l == 0.0 {
            let cap = n.allocatable.get(r).copied().unwrap_or(0);
            (cap, cap)
        } else {
            let a = avg.get(r).copied().unwrap_or(0.0);
            let clamp = |v: f64| v.clamp(0.0, 100.0);
            (
                fraction(&n.allocatable, r, clamp(a - l)),
                fraction(&n.allocatable, r, clamp(a + h)),
            )
        };
        lo.insert(r.clone(), l);
        hi.insert(r.clone(), h);
    }
    (lo, hi)
}

/// Thresholds per node; deviation mode centres them on the pool's average usage (node and
/// prod usage each around their own average).
pub fn thresholds(p: &Pool, nodes: &mut [NodeLoad]) {
    let res = resources(p);
    let (avg, prod_avg) = if p.deviation {
        (average(nodes, false), average(nodes, true))
    } else {
        Default::default()
    };
    let configured = |low: &Thresholds, high: &Thresholds| -> Thresholds {
        res.iter()
            .map(|r| (r.clone(), pair(low, high, r, p.deviation).1))
            .collect()
    };
    let (high_pct, prod_high_pct) = (
        configured(&p.low, &p.high),
        configured(&p.prod_low, &p.prod_high),
    );
    for n in nodes.iter_mut() {
        n.high_pct = high_pct.clone();
        n.prod_high_pct = prod_high_pct.clone();
        (n.low, n.high) = node_pair(n, &p.low, &p.high, &res, p.deviation, &avg);
        (n.prod_low, n.prod_high) =
            node_pair(n, &p.prod_low, &p.prod_high, &res, p.deviation, &prod_avg);
    }
}

fn all_le(v: &Amounts, t: &Amounts) -> bool {
    t.iter()
        .all(|(r, lim)| v.get(r).copied().unwrap_or(0) <= *lim)
}

fn any_gt(v: &Amounts, t: &Amounts) -> bool {
    t.iter()
        .any(|(r, lim)| v.get(r).copied().unwrap_or(0) > *lim)
}

/// Koordinator's classification of a node.
pub fn classify(n: &NodeLoad) -> Class {
    let prod_over = any_gt(&n.prod_usage, &n.prod_high);
    let prod_under = all_le(&n.prod_usage, &n.prod_low);
    if all_le(&n.usage, &n.low) && n.schedulable {
        return if prod_over {
            Class::ProdHigh
        } else if prod_under {
            Class::BothLow
        } else {
            Class::Low
        };
    }
    if any_gt(&n.usage, &n.high) {
        return Class::High;
    }
    if prod_over {
        Class::ProdHigh
    } else if prod_under {
        Class::ProdLow
    } else {
        Class::Ignore
    }
}

/// Sources hottest first: weighted average of min(used, alloc)·1000/alloc.
pub fn source_score(n: &NodeLoad, weights: &BTreeMap<String, i64>) -> i64 {
    let (mut sum, mut total) = (0i64, 0i64);
    for (r, w) in weights {
        let a = n.allocatable.get(r).copied().unwrap_or(0);
        if a <= 0 {
            continue;
        }
        let u = n.usage.get(r).copied().unwrap_or(0).min(a);
        sum += u * 1000 / a * w;
        total += w;
    }
    if total == 0 { 0 } else { sum / total }
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
