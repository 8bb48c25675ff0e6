//! One LowNodeLoad Balance pass over the node pools: usage and classes per node, the
//! anomaly filter on sources, stop conditions, the node-level eviction pass, then the prod
//! pass (prod pods off prodHigh nodes onto prodLow / bothLow ones).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::Node;

use super::anomaly::{Condition, Detectors};
use super::args::{Args, Pool};
use super::balance::{Candidate, Decision, Target, balance_with, pct, room};
use super::classify::{
    Class, NodeLoad, allocatable_of, classify, resources, source_score, thresholds, usage_of,
};
use crate::api::pod::Amounts;
use crate::api::selector::Selector;
use crate::descheduler::framework::metric::PodUsage;
use crate::descheduler::framework::plugin::{NodeInput, NodeReport};
use crate::descheduler::framework::podview::PodView;

/// What a pass did and what it left out (node, why).
#[derive(Debug, Default)]
pub struct Outcome {
    pub evicted: Vec<Decision>,
    pub skipped: Vec<(String, String)>,
    pub nodes: Vec<NodeReport>,
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
        high_pct: n.prod_high_pct.clone(),
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
        // The loads and their inputs side by side: a pass at 1,000 nodes made five copies
        // of every NodeLoad (~4 KiB each) before.
        let (mut nl, loads): (Vec<NodeLoad>, Vec<&NodeInput>) =
            node_loads(members, now_ms, expiration, out)
                .into_iter()
                .unzip();
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
        self.report_nodes(&nl, &classes, &cond, out);
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
        let view = PoolView {
            pool,
            nl: &nl,
            loads: &loads,
            classes: &classes,
            res: resources(pool),
            node_fit: self.args.node_fit,
        };
        // Node-level pass: hot nodes onto low and bothLow ones.
        let sources: Vec<(NodeLoad, Vec<Candidate>)> = abnormal
            .iter()
            .map(|k| (nl[*k].clone(), candidates(loads[*k])))
            .collect();
        let targets = |k: usize| matches!(classes[k], Class::Low | Class::BothLow);
        let mut budget = view.targets_room(&targets, &|k| nl[k].clone());
        let sources = view.move_pods(
            sources,
            &targets,
            &|k| nl[k].clone(),
            &mut budget,
            filter,
            evict,
            out,
        );
        settle(&mut self.nodes, &sources, now_ms, &cond);
        // Prod pass: prod pods off prodHigh nodes onto prodLow and bothLow ones, within the
        // prod room left, bothLow nodes giving no more than the node pass left them.
        processed.extend(high.iter().chain(&prod_high).map(|k| nl[*k].name.clone()));
        if prod_abnormal.is_empty() {
            return;
        }
        let views: Vec<NodeLoad> = nl.iter().map(prod_view).collect();
        let mut prod_budget = view.prod_budget(&views, &budget);
        let prod_sources: Vec<(NodeLoad, Vec<Candidate>)> = prod_abnormal
            .iter()
            .map(|k| {
                let prod: Vec<Candidate> = candidates(loads[*k])
                    .into_iter()
                    .filter(|c| c.pod.prod)
                    .collect();
                (views[*k].clone(), prod)
            })
            .collect();
        let prod_targets = |k: usize| matches!(classes[k], Class::ProdLow | Class::BothLow);
        let prod_sources = view.move_pods(
            prod_sources,
            &prod_targets,
            &|k| views[k].clone(),
            &mut prod_budget,
            filter,
            evict,
            out,
        );
        settle(&mut self.prod, &prod_sources, now_ms, &cond);
    }

    /// A report per node of the pool not yet reported (by an earlier pool).
    fn report_nodes(
        &self,
        nl: &[NodeLoad],
        classes: &[Class],
        cond: &Condition,
        out: &mut Outcome,
    ) {
        for (k, n) in nl.iter().enumerate() {
            if out.nodes.iter().any(|r| r.node == n.name) {
                continue;
            }
            let count = (cond.consecutive_abnormalities > 1)
                .then(|| self.nodes.count(&n.name).max(self.prod.count(&n.name)));
            out.nodes.push(report(n, classes[k], count));
        }
    }
}

/// The members' loads from their NodeMetrics; a node without a usable one is reported
/// `unknown` and skipped.
fn node_loads<'i>(
    members: &[&'i NodeInput],
    now_ms: i64,
    expiration: i64,
    out: &mut Outcome,
) -> Vec<(NodeLoad, &'i NodeInput)> {
    let mut loads = Vec::new();
    for i in members {
        match usage_of(i.metric.as_deref(), &i.pods, now_ms, expiration) {
            Err(why) => {
                let why = why.to_string();
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
                    high_pct: Default::default(),
                    prod_high_pct: Default::default(),
                },
                *i,
            )),
        }
    }
    loads
}

/// After a pass, each source's detector: reset once it is over nothing, else one more
/// normal round.
fn settle(
    d: &mut Detectors,
    sources: &[(NodeLoad, Vec<Candidate>)],
    now_ms: i64,
    cond: &Condition,
) {
    for (n, _) in sources {
        if over_nothing(n) {
            d.reset(&n.name);
        } else {
            d.normal(&n.name, now_ms, cond);
        }
    }
}

/// One pool's classified nodes, what the node and prod passes read.
struct PoolView<'a> {
    pool: &'a Pool,
    nl: &'a [NodeLoad],
    loads: &'a [&'a NodeInput],
    classes: &'a [Class],
    res: Vec<String>,
    node_fit: bool,
}

impl PoolView<'_> {
    /// The room the targets (`is_target`) have, their loads as `load_of` gives them.
    fn targets_room(
        &self,
        is_target: &dyn Fn(usize) -> bool,
        load_of: &dyn Fn(usize) -> NodeLoad,
    ) -> Amounts {
        let loads: Vec<NodeLoad> = (0..self.nl.len())
            .filter(|k| is_target(*k))
            .map(load_of)
            .collect();
        room(loads.iter(), &self.res)
    }

    /// Moves candidates off `sources` onto the targets within `budget`; the sources as the
    /// pass left them.
    #[allow(clippy::too_many_arguments)]
    fn move_pods(
        &self,
        mut sources: Vec<(NodeLoad, Vec<Candidate>)>,
        is_target: &dyn Fn(usize) -> bool,
        load_of: &dyn Fn(usize) -> NodeLoad,
        budget: &mut Amounts,
        filter: &dyn Fn(&PodView) -> bool,
        evict: &mut dyn FnMut(&Candidate, &NodeLoad, &str) -> bool,
        out: &mut Outcome,
    ) -> Vec<(NodeLoad, Vec<Candidate>)> {
        sources.sort_by_key(|(n, _)| std::cmp::Reverse(source_score(n, &self.pool.weights)));
        let mut targets: Vec<Target> = (0..self.nl.len())
            .filter(|k| is_target(*k))
            .map(|k| Target {
                load: load_of(k),
                node: self.loads[k].node.clone(),
                requested: requested(self.loads[k]),
            })
            .collect();
        if !sources.is_empty() {
            out.evicted.extend(balance_with(
                &mut sources,
                &mut targets,
                &self.res,
                self.node_fit,
                filter,
                evict,
                budget,
            ));
        }
        sources
    }

    /// The prod pass's room: prodLow nodes' prod room, plus bothLow nodes' — no more than
    /// they have left after the node pass (`node_left`).
    fn prod_budget(&self, views: &[NodeLoad], node_left: &Amounts) -> Amounts {
        let both: Vec<usize> = (0..self.nl.len())
            .filter(|k| self.classes[*k] == Class::BothLow)
            .collect();
        let both_room = room(both.iter().map(|k| &self.nl[*k]), &self.res);
        let mut prod_budget = room(
            (0..self.nl.len())
                .filter(|k| self.classes[*k] == Class::ProdLow)
                .map(|k| &views[k]),
            &self.res,
        );
        let both_prod = room(both.iter().map(|k| &views[*k]), &self.res);
        for r in &self.res {
            let get = |a: &Amounts| a.get(r).copied().unwrap_or(0);
            let both_budget = get(&both_room).min(get(node_left));
            *prod_budget.entry(r.clone()).or_default() += get(&both_prod).min(both_budget);
        }
        prod_budget
    }
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
