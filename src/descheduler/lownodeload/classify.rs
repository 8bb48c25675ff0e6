//! LowNodeLoad's view of one node pool: each node's usage (from its NodeMetric), its
//! thresholds (percentages of allocatable, or around the pool average in deviation mode)
//! and its class — the sources (high, prodHigh) and the targets (low, bothLow, prodLow).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use super::args::{Pool, Thresholds};
use super::metric::MetricView;
use crate::api::extension::keys::ANNOTATION_NODE_RAW_ALLOCATABLE;
use crate::api::pod::{Amounts, amount, amounts};

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

/// The node's usage and its prod pods' usage, or why its NodeMetric cannot be used.
pub fn usage_of(
    metric: Option<&MetricView>,
    now_ms: i64,
    expiration_ms: i64,
) -> Result<(Amounts, Amounts), MetricProblem> {
    let m = metric.filter(|m| m.status).ok_or(MetricProblem::Missing)?;
    if !m.node_metric {
        return Err(MetricProblem::NoNodeMetric);
    }
    let updated = m.updated_ms.ok_or(MetricProblem::NoUpdateTime)?;
    if now_ms - updated > expiration_ms {
        return Err(MetricProblem::Expired((now_ms - updated) / 1000));
    }
    let mut usage = m.system();
    let mut prod = Amounts::new();
    for p in &m.pods {
        for (k, v) in p.usage() {
            *usage.entry(k.clone()).or_default() += v;
            if p.prod {
                *prod.entry(k).or_default() += v;
            }
        }
    }
    usage.insert("pods".into(), m.pods.len() as i64);
    Ok((usage, prod))
}

/// Allocatable as LowNodeLoad counts it: the raw-allocatable annotation when present.
pub fn allocatable_of(node: &Node) -> Amounts {
    let raw = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_RAW_ALLOCATABLE))
        .and_then(|s| {
            serde_json::from_str::<
                BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >(s)
            .ok()
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

fn absolute(alloc: &Amounts, pct: &Thresholds, res: &[String], missing: f64) -> Amounts {
    res.iter()
        .map(|r| {
            let a = alloc.get(r).copied().unwrap_or(0) as f64;
            (
                r.clone(),
                (a * pct.get(r).copied().unwrap_or(missing) / 100.0) as i64,
            )
        })
        .collect()
}

/// Thresholds per node; deviation mode centres them on the pool's average usage.
pub fn thresholds(p: &Pool, nodes: &mut [NodeLoad]) {
    let res = resources(p);
    if !p.deviation {
        for n in nodes.iter_mut() {
            n.low = absolute(&n.allocatable, &p.low, &res, 100.0);
            n.high = absolute(&n.allocatable, &p.high, &res, 100.0);
            n.prod_low = absolute(&n.allocatable, &p.prod_low, &res, 100.0);
            n.prod_high = absolute(&n.allocatable, &p.prod_high, &res, 100.0);
        }
        return;
    }
    let avg: Thresholds = res
        .iter()
        .map(|r| {
            let pcts: Vec<f64> = nodes
                .iter()
                .filter_map(|n| {
                    let a = *n.allocatable.get(r)? as f64;
                    (a > 0.0).then(|| n.usage.get(r).copied().unwrap_or(0) as f64 * 100.0 / a)
                })
                .collect();
            (
                r.clone(),
                if pcts.is_empty() {
                    0.0
                } else {
                    pcts.iter().sum::<f64>() / pcts.len() as f64
                },
            )
        })
        .collect();
    let around = |dev: &Thresholds, sign: f64| -> Thresholds {
        res.iter()
            .map(|r| {
                let d = dev.get(r).copied().unwrap_or(0.0);
                // A 0 low deviation means the whole capacity (Koordinator).
                let v = if sign < 0.0 && d == 0.0 {
                    100.0
                } else {
                    (avg[r] + sign * d).clamp(0.0, 100.0)
                };
                (r.clone(), v)
            })
            .collect()
    };
    let (low, high) = (around(&p.low, -1.0), around(&p.high, 1.0));
    for n in nodes.iter_mut() {
        n.low = absolute(&n.allocatable, &low, &res, 100.0);
        n.high = absolute(&n.allocatable, &high, &res, 100.0);
        n.prod_low = absolute(&n.allocatable, &p.prod_low, &res, 100.0);
        n.prod_high = absolute(&n.allocatable, &p.prod_high, &res, 100.0);
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
