//! LowNodeUtilization and HighNodeUtilization (Balance), upstream's request-based node
//! utilization: each node's Σ requests (and pod count) as a percentage of its allocatable,
//! classified against the thresholds. LowNodeUtilization moves pods off nodes above
//! `targetThresholds` while nodes under `thresholds` have room; HighNodeUtilization empties
//! the nodes under `thresholds` onto the others (bin packing, for scale-down).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;
use serde::Deserialize;
use serde_json::Value;

use super::{Act, Env, priority_low_to_high};
use crate::api::field::FieldError;
use crate::api::placement::tolerates;
use crate::api::pod::{Amounts, amounts};
use crate::descheduler::framework::plugin::NodeInput;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::lownodeload::args::Namespaces;

type Percents = BTreeMap<String, f64>;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EvictionLimits {
    node: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)] // apiVersion and kind are accepted only so Koordinator's files load.
pub struct LowNodeUtilizationArgs {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    use_deviation_thresholds: bool,
    #[serde(default)]
    thresholds: Percents,
    #[serde(default)]
    target_thresholds: Percents,
    #[serde(default)]
    number_of_nodes: usize,
    metrics_utilization: Option<Value>,
    evictable_namespaces: Option<Namespaces>,
    eviction_limits: Option<EvictionLimits>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)] // apiVersion and kind are accepted only so Koordinator's files load.
pub struct HighNodeUtilizationArgs {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    thresholds: Percents,
    #[serde(default)]
    number_of_nodes: usize,
    #[serde(default)]
    eviction_modes: Vec<String>,
    evictable_namespaces: Option<Namespaces>,
}

fn valid_thresholds(t: &Percents, what: &str) -> Result<(), FieldError> {
    if t.is_empty() {
        return Err(FieldError::new(what, "no resource threshold is configured"));
    }
    if let Some((r, _)) = t.iter().find(|(_, v)| !(0.0..=100.0).contains(*v)) {
        return Err(FieldError::new(
            what,
            format!("{r} threshold not in [0, 100] range"),
        ));
    }
    Ok(())
}

fn only_exclude(ns: &Option<Namespaces>) -> Result<(), FieldError> {
    if ns.as_ref().is_some_and(|n| !n.include.is_empty()) {
        return Err(FieldError::new(
            "evictableNamespaces",
            "only Exclude namespaces can be set, inclusion is not supported",
        ));
    }
    Ok(())
}

/// The threshold resources plus cpu, memory and pods.
fn resource_names(t: &Percents) -> Vec<String> {
    let mut names: Vec<String> = ["cpu", "memory", "pods"].map(String::from).to_vec();
    for r in t.keys() {
        if !names.contains(r) {
            names.push(r.clone());
        }
    }
    names
}

struct NodeUse<'a> {
    input: &'a NodeInput,
    name: &'a str,
    usage: Amounts,
    percent: Percents,
    capacity: Amounts,
}

fn capacity(i: &NodeInput) -> Amounts {
    let st = i.node.status.as_ref();
    let alloc = st
        .and_then(|s| s.allocatable.as_ref())
        .filter(|a| !a.is_empty());
    amounts(alloc.or_else(|| st.and_then(|s| s.capacity.as_ref())))
}

fn pod_usage(p: &PodView, names: &[String]) -> Amounts {
    let req = p.requests();
    names
        .iter()
        .filter(|r| r.as_str() != "pods")
        .map(|r| (r.clone(), req.get(r).copied().unwrap_or(0)))
        .collect()
}

/// Requested usage of every node for `names`, as amounts and percentages of capacity
/// (`percent_of`: the resources the percentages cover).
fn usages<'a>(
    inputs: &'a [NodeInput],
    names: &[String],
    percent_of: &[String],
) -> Vec<NodeUse<'a>> {
    inputs
        .iter()
        .map(|i| {
            let mut usage: Amounts = names.iter().map(|r| (r.clone(), 0)).collect();
            for p in &i.pods {
                for (r, v) in pod_usage(p, names) {
                    *usage.entry(r).or_default() += v;
                }
            }
            usage.insert("pods".into(), i.pods.len() as i64);
            let capacity = capacity(i);
            let percent = percent_of
                .iter()
                .filter_map(|r| {
                    let (u, c) = (*usage.get(r)?, *capacity.get(r)?);
                    Some((
                        r.clone(),
                        if c > 0 {
                            u as f64 / c as f64 * 100.0
                        } else {
                            0.0
                        },
                    ))
                })
                .collect();
            NodeUse {
                input: i,
                name: i.node.metadata.name.as_deref().unwrap_or(""),
                usage,
                percent,
                capacity,
            }
        })
        .collect()
}

fn get(p: &Percents, r: &str) -> f64 {
    p.get(r).copied().unwrap_or(0.0)
}

fn below(usage: &Percents, t: &Percents) -> bool {
    t.iter().all(|(r, v)| *v >= get(usage, r))
}

fn above(usage: &Percents, t: &Percents) -> bool {
    t.iter().any(|(r, v)| *v < get(usage, r))
}

fn unschedulable(n: &NodeUse) -> bool {
    let spec = n.input.node.spec.as_ref();
    spec.and_then(|s| s.unschedulable).unwrap_or(false)
}

/// A classified node: what it uses and what it may hold (capacity capped at its high
/// threshold).
struct Info<'a> {
    node: &'a NodeUse<'a>,
    usage: Amounts,
    available: Amounts,
}

fn info<'a>(n: &'a NodeUse<'a>, high: &Percents, names: &[String]) -> Info<'a> {
    let available = names
        .iter()
        .map(|r| {
            let cap = n.capacity.get(r).copied().unwrap_or(0);
            let v = match high.get(r) {
                Some(t) => (t * 0.01 * cap as f64) as i64,
                None => cap,
            };
            (r.clone(), v)
        })
        .collect();
    Info {
        node: n,
        usage: n.usage.clone(),
        available,
    }
}

fn total(i: &Info) -> i64 {
    i.usage.values().sum()
}

/// Upstream's `PodToleratesTaints`: the pod tolerates every taint of some destination (its
/// toleration count at least the taint count).
fn tolerates_some(p: &PodView, taints: &[Vec<Taint>]) -> bool {
    taints.iter().any(|ts| {
        p.tolerations.len() >= ts.len() && ts.iter().all(|t| tolerates(&p.tolerations, t))
    })
}

struct Eviction<'a> {
    plugin: &'static str,
    names: &'a [String],
    exclude: Vec<String>,
    node_limit: Option<u32>,
    /// LowNodeUtilization also stops once the source is under its target.
    until_under_target: bool,
}

fn keep_going(e: &Eviction, src: &Info, avail: &Amounts) -> bool {
    let over_target = src
        .usage
        .iter()
        .any(|(r, v)| src.available.get(r).is_some_and(|a| a < v));
    (!e.until_under_target || over_target) && avail.values().all(|v| *v > 0)
}

/// `evictPodsFromSourceNodes`: pods leave the sources while the destinations have room.
fn evict_from(
    e: &Eviction,
    sources: Vec<Info>,
    dests: &[Info],
    removable: &dyn Fn(&PodView, &mut dyn Act) -> bool,
    act: &mut dyn Act,
) {
    let mut avail: Amounts = e.names.iter().map(|r| (r.clone(), 0)).collect();
    for d in dests {
        for r in e.names {
            *avail.entry(r.clone()).or_default() +=
                d.available.get(r).copied().unwrap_or(0) - d.usage.get(r).copied().unwrap_or(0);
        }
    }
    let taints: Vec<Vec<Taint>> = dests
        .iter()
        .map(|d| {
            let spec = d.node.input.node.spec.as_ref();
            spec.and_then(|s| s.taints.clone()).unwrap_or_default()
        })
        .collect();
    for mut src in sources {
        let mut pods: Vec<Arc<PodView>> = src
            .node
            .input
            .pods
            .iter()
            .filter(|p| removable(p, act))
            .cloned()
            .collect();
        priority_low_to_high(&mut pods);
        if pods.is_empty() || !keep_going(e, &src, &avail) {
            continue;
        }
        let mut evicted = 0u32;
        for p in pods {
            if e.node_limit.is_some_and(|l| evicted >= l) {
                break;
            }
            if !tolerates_some(&p, &taints) || e.exclude.contains(&p.namespace) {
                continue;
            }
            if !act.pre_evict(&p, true) {
                continue;
            }
            let why = format!(
                "{}: node {} requests {}",
                e.plugin,
                src.node.name,
                percents(&src.node.percent)
            );
            if !act.evict(&p, &why) {
                continue;
            }
            evicted += 1;
            let used = pod_usage(&p, e.names);
            for (r, a) in avail.iter_mut() {
                let v = if r == "pods" {
                    1
                } else {
                    used.get(r).copied().unwrap_or(0)
                };
                *a -= v;
                *src.usage.entry(r.clone()).or_default() -= v;
            }
            if !keep_going(e, &src, &avail) {
                break;
            }
        }
    }
}

fn percents(p: &Percents) -> String {
    let parts: Vec<String> = p.iter().map(|(r, v)| format!("{r} {v:.2}%")).collect();
    parts.join(", ")
}

pub struct Low {
    a: LowNodeUtilizationArgs,
    names: Vec<String>,
}

impl Low {
    pub fn new(a: LowNodeUtilizationArgs) -> Result<Low, FieldError> {
        only_exclude(&a.evictable_namespaces)?;
        valid_thresholds(&a.thresholds, "thresholds")?;
        valid_thresholds(&a.target_thresholds, "targetThresholds")?;
        let same = a.thresholds.len() == a.target_thresholds.len()
            && a.thresholds
                .keys()
                .all(|r| a.target_thresholds.contains_key(r));
        if !same {
            return Err(FieldError::whole(
                "thresholds and targetThresholds configured different resources",
            ));
        }
        if !a.use_deviation_thresholds
            && let Some(r) = a
                .thresholds
                .iter()
                .find(|(r, v)| **v > get(&a.target_thresholds, r))
                .map(|(r, _)| r)
        {
            return Err(FieldError::whole(format!(
                "thresholds' {r} percentage is greater than targetThresholds'"
            )));
        }
        if a.metrics_utilization.is_some() {
            return Err(FieldError::new(
                "metricsUtilization",
                "koord measures utilization by requests only (LowNodeLoad uses NodeMetric usage)",
            ));
        }
        Ok(Low {
            names: resource_names(&a.thresholds),
            a,
        })
    }

    /// (low, high) thresholds: the static ones, or the average ± the deviations.
    fn thresholds(&self, nodes: &[NodeUse]) -> (Percents, Percents) {
        if !self.a.use_deviation_thresholds {
            return (self.a.thresholds.clone(), self.a.target_thresholds.clone());
        }
        let mut avg = Percents::new();
        for r in self.a.thresholds.keys() {
            let vals: Vec<f64> = nodes
                .iter()
                .filter_map(|n| n.percent.get(r).copied())
                .collect();
            if !vals.is_empty() {
                avg.insert(r.clone(), vals.iter().sum::<f64>() / vals.len() as f64);
            }
        }
        let shift = |t: &Percents, sign: f64| -> Percents {
            avg.iter()
                .map(|(r, v)| (r.clone(), (v + sign * get(t, r)).clamp(0.0, 100.0)))
                .collect()
        };
        (
            shift(&self.a.thresholds, -1.0),
            shift(&self.a.target_thresholds, 1.0),
        )
    }

    pub fn run(&self, env: &Env, act: &mut dyn Act) {
        let percent_of: Vec<String> = if self.a.use_deviation_thresholds {
            self.a.thresholds.keys().cloned().collect()
        } else {
            self.names.clone()
        };
        let nodes = usages(env.inputs, &self.names, &percent_of);
        let (low_t, high_t) = self.thresholds(&nodes);
        let mut low = Vec::new();
        let mut high = Vec::new();
        for n in &nodes {
            if !unschedulable(n) && below(&n.percent, &low_t) {
                low.push(info(n, &high_t, &self.names));
            } else if above(&n.percent, &high_t) {
                high.push(info(n, &high_t, &self.names));
            }
        }
        if low.is_empty()
            || low.len() <= self.a.number_of_nodes
            || low.len() == nodes.len()
            || high.is_empty()
        {
            return;
        }
        high.sort_by_key(|i| std::cmp::Reverse(total(i)));
        let e = Eviction {
            plugin: "LowNodeUtilization",
            names: &self.names,
            exclude: exclude(&self.a.evictable_namespaces),
            node_limit: self.a.eviction_limits.as_ref().and_then(|l| l.node),
            until_under_target: true,
        };
        evict_from(&e, high, &low, &|p, act| act.filter(p, false), act);
    }
}

fn exclude(ns: &Option<Namespaces>) -> Vec<String> {
    ns.as_ref().map(|n| n.exclude.clone()).unwrap_or_default()
}

pub struct High {
    a: HighNodeUtilizationArgs,
    names: Vec<String>,
}

impl High {
    pub fn new(a: HighNodeUtilizationArgs) -> Result<High, FieldError> {
        only_exclude(&a.evictable_namespaces)?;
        valid_thresholds(&a.thresholds, "thresholds")?;
        if let Some(m) = a
            .eviction_modes
            .iter()
            .find(|m| *m != "OnlyThresholdingResources")
        {
            return Err(FieldError::new(
                "evictionModes",
                format!("invalid eviction mode {m}"),
            ));
        }
        Ok(High {
            names: resource_names(&a.thresholds),
            a,
        })
    }

    pub fn run(&self, env: &Env, act: &mut dyn Act) {
        let nodes = usages(env.inputs, &self.names, &self.names);
        let high_t: Percents = self
            .a
            .thresholds
            .keys()
            .map(|r| (r.clone(), 100.0))
            .collect();
        let mut low = Vec::new();
        let mut rest = Vec::new();
        for n in &nodes {
            if below(&n.percent, &self.a.thresholds) {
                low.push(info(n, &high_t, &self.names));
            } else if !unschedulable(n) {
                rest.push(info(n, &high_t, &self.names));
            }
        }
        if low.is_empty()
            || low.len() <= self.a.number_of_nodes
            || low.len() == nodes.len()
            || rest.is_empty()
        {
            return;
        }
        low.sort_by_key(total);
        let only_thresholding = self
            .a
            .eviction_modes
            .iter()
            .any(|m| m == "OnlyThresholdingResources");
        let requested: Vec<String> = self.a.thresholds.keys().cloned().collect();
        let removable = |p: &PodView, act: &mut dyn Act| {
            act.filter(p, false)
                && (!only_thresholding || requested.iter().any(|r| p.declares_request(r)))
        };
        let e = Eviction {
            plugin: "HighNodeUtilization",
            names: &self.names,
            exclude: exclude(&self.a.evictable_namespaces),
            node_limit: None,
            until_under_target: false,
        };
        evict_from(&e, low, &rest, &removable, act);
    }
}

#[cfg(test)]
#[path = "nodeutilization_tests/mod.rs"]
mod tests;
