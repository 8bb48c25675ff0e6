//! One LowNodeLoad Balance pass over the node pools: usage and classes per node, the
//! anomaly filter on sources, stop conditions, the node-level eviction pass, then the prod
//! pass (prod pods off prodHigh nodes onto prodLow / bothLow ones).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::anomaly::{Condition, Detectors};
use super::args::{Args, Pool};
use super::balance::{Candidate, Decision, Target, balance_with, pct, room};
use super::classify::{
    Class, NodeLoad, allocatable_of, classify, resources, source_score, thresholds, usage_of,
};
use super::metric::{MetricView, PodUsage};
use crate::api::extension::priority::PriorityClass;
use crate::api::pod::Amounts;
use crate::api::selector::Selector;
use crate::descheduler::framework::podview::PodView;

/// A node with its NodeMetric and its pods.
pub struct NodeInput {
    pub node: Arc<Node>,
    pub metric: Option<Arc<MetricView>>,
    pub pods: Vec<Arc<PodView>>,
}

/// What a pass did and what it left out (node, why).
#[derive(Debug, Default)]
pub struct Outcome {
    pub evicted: Vec<Decision>,
    pub skipped: Vec<(String, String)>,
    pub nodes: Vec<NodeReport>,
}

/// How the pass saw one node (`koord explain deschedule`'s `nodes`).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReport {
    pub node: String,
    /// `high`, `low`, `normal` or `unknown`.
    pub class: &'static str,
    /// `prodHigh` or `prodLow` when its prod usage makes it a prod source or target.
    pub prod_class: Option<&'static str>,
    /// Percent of allocatable.
    pub usage: BTreeMap<String, f64>,
    pub low: BTreeMap<String, f64>,
    pub high: BTreeMap<String, f64>,
    /// Consecutive abnormal passes, with an anomaly condition above 1.
    pub abnormal: Option<u32>,
    /// Why the node is `unknown`.
    pub reason: Option<String>,
}

fn percents(of: &Amounts, alloc: &Amounts) -> BTreeMap<String, f64> {
    of.iter()
        .filter(|(r, _)| r.as_str() != "pods")
        .map(|(r, v)| {
            let p = pct(*v, alloc.get(r).copied().unwrap_or(0));
            (r.clone(), (p * 100.0).round() / 100.0)
        })
        .collect()
}

fn report(n: &NodeLoad, class: Class, abnormal: Option<u32>) -> NodeReport {
    let (class, prod_class) = match class {
        Class::High => ("high", None),
        Class::Low => ("low", None),
        Class::BothLow => ("low", Some("prodLow")),
        Class::ProdLow => ("normal", Some("prodLow")),
        Class::ProdHigh if classify_plain(n) == "low" => ("low", Some("prodHigh")),
        Class::ProdHigh => ("normal", Some("prodHigh")),
        Class::Ignore => ("normal", None),
    };
    NodeReport {
        node: n.name.clone(),
        class,
        prod_class,
        usage: percents(&n.usage, &n.allocatable),
        low: percents(&n.low, &n.allocatable),
        high: percents(&n.high, &n.allocatable),
        abnormal,
        reason: None,
    }
}

/// `low` when the node itself is under its low thresholds.
fn classify_plain(n: &NodeLoad) -> &'static str {
    let under = n
        .low
        .iter()
        .all(|(r, l)| n.usage.get(r).copied().unwrap_or(0) <= *l);
    if under && n.schedulable {
        "low"
    } else {
        "normal"
    }
}

pub struct LowNodeLoad {
    pub args: Args,
    nodes: Detectors,
    prod: Detectors,
}

fn name(n: &Node) -> String {
    n.metadata.name.clone().unwrap_or_default()
}

fn in_pool(p: &Pool, n: &Node) -> bool {
    p.node_selector.as_ref().is_none_or(|s| {
        Selector::from_label_selector(s).is_ok_and(|s| s.matches_opt(n.metadata.labels.as_ref()))
    })
}

/// A node judged by its prod usage against its prod thresholds.
fn prod_view(n: &NodeLoad) -> NodeLoad {
    NodeLoad {
        usage: n.prod_usage.clone(),
        high: n.prod_high.clone(),
        low: n.prod_low.clone(),
        prod: true,
        ..n.clone()
    }
}

fn over_nothing(n: &NodeLoad) -> bool {
    n.high
        .iter()
        .all(|(r, h)| n.usage.get(r).copied().unwrap_or(0) <= *h)
}

fn requested(input: &NodeInput) -> Amounts {
    input.pods.iter().fold(Amounts::new(), |mut acc, p| {
        for (r, v) in p.requests() {
            *acc.entry(r).or_default() += v;
        }
        acc
    })
}

fn candidates(input: &NodeInput) -> Vec<Candidate> {
    let usage: BTreeMap<(&str, &str), &PodUsage> = input
        .metric
        .iter()
        .flat_map(|m| m.pods.iter())
        .map(|p| ((p.namespace.as_str(), p.name.as_str()), p))
        .collect();
    input
        .pods
        .iter()
        .filter_map(|p| {
            let key = (p.namespace.as_str(), p.name.as_str());
            Some(Candidate {
                usage: usage.get(&key)?.usage(),
                requests: p.requests(),
                pod: p.clone(),
            })
        })
        .collect()
}

impl LowNodeLoad {
    pub fn new(args: Args) -> LowNodeLoad {
        LowNodeLoad {
            nodes: Detectors::new(args.detector_cache_timeout),
            prod: Detectors::new(args.detector_cache_timeout),
            args,
        }
    }

    /// One pass; `filter` is the pod filter, `evict` performs an eviction.
    pub fn balance(
        &mut self,
        inputs: &[NodeInput],
        now_ms: i64,
        filter: &dyn Fn(&PodView) -> bool,
        evict: &mut dyn FnMut(&Candidate, &NodeLoad, &str) -> bool,
    ) -> Outcome {
        let mut out = Outcome::default();
        if self.args.paused {
            return out;
        }
        let mut processed: HashSet<String> = HashSet::new();
        for pool in self.args.pools.clone() {
            let members: Vec<&NodeInput> = inputs
                .iter()
                .filter(|i| in_pool(&pool, &i.node))
                .filter(|i| pool.node_selector.is_none() || !processed.contains(&name(&i.node)))
                .collect();
            self.pool_pass(
                &pool,
                &members,
                now_ms,
                filter,
                evict,
                &mut out,
                &mut processed,
            );
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn pool_pass(
        &mut self,
        pool: &Pool,
        members: &[&NodeInput],
        now_ms: i64,
        filter: &dyn Fn(&PodView) -> bool,
        evict: &mut dyn FnMut(&Candidate, &NodeLoad, &str) -> bool,
        out: &mut Outcome,
        processed: &mut HashSet<String>,
    ) {
        let expiration = self.args.node_metric_expiration.as_millis() as i64;
        let mut loads: Vec<(NodeLoad, &NodeInput)> = Vec::new();
        for i in members {
            match usage_of(i.metric.as_deref(), now_ms, expiration) {
                Err(why) => {
                    if !out.nodes.iter().any(|r| r.node == name(&i.node)) {
                        out.nodes.push(NodeReport {
                            node: name(&i.node),
                            class: "unknown",
                            prod_class: None,
                            usage: BTreeMap::new(),
                            low: BTreeMap::new(),
                            high: BTreeMap::new(),
                            abnormal: None,
                            reason: Some(why.clone()),
                        });
                    }
                    out.skipped.push((name(&i.node), why))
                }
                Ok((usage, prod)) => loads.push((
                    NodeLoad {
                        name: name(&i.node),
                        allocatable: allocatable_of(&i.node),
                        usage,
                        prod_usage: prod,
                        low: Amounts::new(),
                        high: Amounts::new(),
                        prod_low: Amounts::new(),
                        prod_high: Amounts::new(),
                        schedulable: !i
                            .node
                            .spec
                            .as_ref()
                            .and_then(|s| s.unschedulable)
                            .unwrap_or(false),
                        prod: false,
                    },
                    *i,
                )),
            }
        }
        // The loads and their inputs side by side: a pass at 1,000 nodes made five copies
        // of every NodeLoad (~4 KiB each) before.
        let (mut nl, loads): (Vec<NodeLoad>, Vec<&NodeInput>) = loads.into_iter().unzip();
        thresholds(pool, &mut nl);
        let classes: Vec<Class> = nl.iter().map(classify).collect();
        let cond = Condition {
            timeout: pool.anomaly_timeout,
            consecutive_abnormalities: pool.consecutive_abnormalities,
            consecutive_normalities: pool.consecutive_normalities,
        };
        let of = |c: Class| -> Vec<usize> { (0..nl.len()).filter(|k| classes[*k] == c).collect() };
        let (high, prod_high) = (of(Class::High), of(Class::ProdHigh));
        let abnormal: Vec<usize> = high
            .iter()
            .copied()
            .filter(|k| self.nodes.abnormal(&nl[*k].name, now_ms, &cond))
            .collect();
        let prod_abnormal: Vec<usize> = prod_high
            .iter()
            .copied()
            .filter(|k| self.prod.abnormal(&nl[*k].name, now_ms, &cond))
            .collect();
        for (k, n) in nl.iter().enumerate() {
            if out.nodes.iter().any(|r| r.node == n.name) {
                continue;
            }
            let count = (cond.consecutive_abnormalities > 1)
                .then(|| self.nodes.count(&n.name).max(self.prod.count(&n.name)));
            out.nodes.push(report(n, classes[k], count));
        }
        if high.is_empty() && prod_high.is_empty() {
            return;
        }
        let lowish: Vec<usize> = (0..nl.len())
            .filter(|k| matches!(classes[*k], Class::Low | Class::BothLow | Class::ProdLow))
            .collect();
        for k in &lowish {
            self.nodes.reset(&nl[*k].name);
            self.prod.reset(&nl[*k].name);
        }
        if (abnormal.is_empty() && prod_abnormal.is_empty())
            || lowish.is_empty()
            || lowish.len() as i32 <= self.args.number_of_nodes
            || lowish.len() == nl.len()
        {
            return;
        }
        let res = resources(pool);
        let target = |k: usize, load: NodeLoad| Target {
            load,
            node: loads[k].node.clone(),
            requested: requested(loads[k]),
        };
        // Node-level pass: hot nodes onto low and bothLow ones.
        let mut sources: Vec<(NodeLoad, Vec<Candidate>)> = abnormal
            .iter()
            .map(|k| (nl[*k].clone(), candidates(loads[*k])))
            .collect();
        sources.sort_by_key(|(n, _)| std::cmp::Reverse(source_score(n, &pool.weights)));
        let node_targets: Vec<usize> = (0..nl.len())
            .filter(|k| matches!(classes[*k], Class::Low | Class::BothLow))
            .collect();
        let mut targets: Vec<Target> = node_targets
            .iter()
            .map(|k| target(*k, nl[*k].clone()))
            .collect();
        let mut node_budget = room(targets.iter().map(|t| &t.load), &res);
        out.evicted.extend(balance_with(
            &mut sources,
            &mut targets,
            &res,
            self.args.node_fit,
            filter,
            evict,
            &mut node_budget,
        ));
        for (n, _) in &sources {
            if over_nothing(n) {
                self.nodes.reset(&n.name);
            } else {
                self.nodes.normal(&n.name, now_ms, &cond);
            }
        }
        // Prod pass: prod pods off prodHigh nodes onto prodLow and bothLow ones, within the
        // prod room left, bothLow nodes giving no more than the node pass left them.
        processed.extend(high.iter().chain(&prod_high).map(|k| nl[*k].name.clone()));
        if prod_abnormal.is_empty() {
            return;
        }
        let both: Vec<usize> = (0..nl.len())
            .filter(|k| classes[*k] == Class::BothLow)
            .collect();
        let both_room = room(both.iter().map(|k| &nl[*k]), &res);
        let both_budget: Amounts = res
            .iter()
            .map(|r| {
                (
                    r.clone(),
                    both_room
                        .get(r)
                        .copied()
                        .unwrap_or(0)
                        .min(node_budget.get(r).copied().unwrap_or(0)),
                )
            })
            .collect();
        let views: Vec<NodeLoad> = nl.iter().map(prod_view).collect();
        let mut prod_budget = room(
            (0..nl.len())
                .filter(|k| classes[*k] == Class::ProdLow)
                .map(|k| &views[k]),
            &res,
        );
        let both_prod = room(both.iter().map(|k| &views[*k]), &res);
        for r in &res {
            let add = both_prod
                .get(r)
                .copied()
                .unwrap_or(0)
                .min(both_budget.get(r).copied().unwrap_or(0));
            *prod_budget.entry(r.clone()).or_default() += add;
        }
        let mut prod_sources: Vec<(NodeLoad, Vec<Candidate>)> = prod_abnormal
            .iter()
            .map(|k| {
                let prod: Vec<Candidate> = candidates(loads[*k])
                    .into_iter()
                    .filter(|c| c.pod.priority_class == PriorityClass::Prod)
                    .collect();
                (views[*k].clone(), prod)
            })
            .collect();
        let mut prod_targets: Vec<Target> = (0..nl.len())
            .filter(|k| matches!(classes[*k], Class::ProdLow | Class::BothLow))
            .map(|k| target(k, views[k].clone()))
            .collect();
        if !prod_sources.is_empty() {
            out.evicted.extend(balance_with(
                &mut prod_sources,
                &mut prod_targets,
                &res,
                self.args.node_fit,
                filter,
                evict,
                &mut prod_budget,
            ));
        }
        for (n, _) in &prod_sources {
            if over_nothing(n) {
                self.prod.reset(&n.name);
            } else {
                self.prod.normal(&n.name, now_ms, &cond);
            }
        }
    }
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
