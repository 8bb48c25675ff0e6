//! CustomPriority (Koordinator, Balance): nodes fall into `evictionOrder` levels (the first
//! level whose `nodeSelector` matches), the most expensive first; pods on each level move
//! to the cheaper levels below it. `BestEffort` (the default) evicts every pod, smallest
//! requests first, that fits some cheaper node (`nodeFit`, default on; five misses in a
//! row end a node); `DrainNode` evicts a node's pods only when all of them fit the cheaper
//! nodes' free requests at once, and with `autoCordon` cordons it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use super::koord_scope::{KoordScope, PodSelector};
use super::{Act, Env};
use crate::api::field::FieldError;
use crate::api::pod::{Amounts, amounts};
use crate::api::selector::Selector;
use crate::descheduler::framework::action::Action;
use crate::descheduler::framework::plugin::NodeInput;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::lownodeload::args::Namespaces;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)] // Thresholds are Koordinator's API, not read by its plugin either.
struct ResourcePriority {
    name: Option<String>,
    node_selector: Option<LabelSelector>,
    keep_threshold: Option<Value>,
    reject_threshold: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)] // apiVersion and kind are accepted only so Koordinator's files load.
pub struct CustomPriorityArgs {
    api_version: Option<String>,
    kind: Option<String>,
    paused: Option<bool>,
    dry_run: Option<bool>,
    evictable_namespaces: Option<Namespaces>,
    node_selector: Option<LabelSelector>,
    #[serde(default)]
    pod_selectors: Vec<PodSelector>,
    node_fit: Option<bool>,
    #[serde(default)]
    eviction_order: Vec<ResourcePriority>,
    mode: Option<String>,
    auto_cordon: Option<bool>,
}

pub struct CustomPriority {
    scope: KoordScope,
    paused: bool,
    dry_run: bool,
    node_fit: bool,
    levels: Vec<(String, Selector)>,
    drain: bool,
    auto_cordon: bool,
}

/// Koordinator's `findEvictablePods` gives up a source node after this many pods in a row
/// fit no cheaper node.
const MAX_CONSECUTIVE_MISSES: usize = 5;

/// The requests a drain compares: cpu, memory and the pod count.
const DRAIN_RESOURCES: [&str; 3] = ["cpu", "memory", "pods"];

fn sort_by_requests(pods: &mut [&Arc<PodView>]) {
    let key = |p: &PodView| {
        let r = p.requests();
        (
            r.get("cpu").copied().unwrap_or(0),
            r.get("memory").copied().unwrap_or(0),
        )
    };
    pods.sort_by(|a, b| {
        key(a)
            .cmp(&key(b))
            .then(a.namespace.cmp(&b.namespace))
            .then(a.name.cmp(&b.name))
    });
}

/// A node's free cpu, memory and pod count (`nodeRemainingRequests`).
fn remaining(i: &NodeInput) -> Amounts {
    let alloc = amounts(i.node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
    DRAIN_RESOURCES
        .iter()
        .map(|r| {
            let used: i64 = if *r == "pods" {
                i.pods.len() as i64
            } else {
                i.pods
                    .iter()
                    .map(|p| p.requests().get(*r).copied().unwrap_or(0))
                    .sum()
            };
            (r.to_string(), alloc.get(*r).copied().unwrap_or(0) - used)
        })
        .collect()
}

impl CustomPriority {
    pub fn new(a: CustomPriorityArgs) -> Result<CustomPriority, FieldError> {
        if a.eviction_order.len() < 2 {
            return Err(FieldError::new(
                "evictionOrder",
                "CustomPriority requires at least 2 resource priority levels",
            ));
        }
        let mut levels: Vec<(String, Selector)> = Vec::new();
        for p in &a.eviction_order {
            let name =
                p.name.clone().filter(|n| !n.is_empty()).ok_or_else(|| {
                    FieldError::new("evictionOrder", "priority name cannot be empty")
                })?;
            if levels.iter().any(|(n, _)| *n == name) {
                return Err(FieldError::new(
                    "evictionOrder",
                    format!("duplicate priority name: {name}"),
                ));
            }
            let at = format!("evictionOrder[{name}].nodeSelector");
            let sel = p.node_selector.as_ref().ok_or_else(|| {
                FieldError::new(
                    at.clone(),
                    format!("priority {name} must have a nodeSelector"),
                )
            })?;
            let sel = Selector::from_label_selector(sel)
                .map_err(|e| FieldError::new(at, e.to_string()))?;
            levels.push((name, sel));
        }
        let drain = match a.mode.as_deref().unwrap_or("BestEffort") {
            "BestEffort" => false,
            "DrainNode" => true,
            other => {
                return Err(FieldError::new(
                    "mode",
                    format!("{other:?} is not BestEffort or DrainNode"),
                ));
            }
        };
        Ok(CustomPriority {
            scope: KoordScope::new(
                a.node_selector.as_ref(),
                &a.pod_selectors,
                a.evictable_namespaces.as_ref(),
            )?,
            paused: a.paused.unwrap_or(false),
            dry_run: a.dry_run.unwrap_or(false),
            node_fit: a.node_fit.unwrap_or(true),
            levels,
            drain,
            auto_cordon: a.auto_cordon.unwrap_or(false),
        })
    }

    /// Each level's nodes, in `evictionOrder`, the levels without nodes left out.
    fn by_level<'a>(&self, env: &'a Env) -> Vec<(&str, Vec<&'a NodeInput>)> {
        let mut by: BTreeMap<usize, Vec<&NodeInput>> = BTreeMap::new();
        for i in env.inputs.iter().filter(|i| self.scope.node(&i.node)) {
            let labels = i.node.metadata.labels.as_ref();
            if let Some(k) = self.levels.iter().position(|(_, s)| s.matches_opt(labels)) {
                by.entry(k).or_default().push(i);
            }
        }
        by.into_iter()
            .map(|(k, v)| (self.levels[k].0.as_str(), v))
            .collect()
    }

    pub fn run(&self, env: &Env, act: &mut dyn Act) {
        if self.paused {
            return;
        }
        let levels = self.by_level(env);
        for (k, (source, nodes)) in levels.iter().enumerate() {
            let targets: Vec<&NodeInput> = levels[k + 1..]
                .iter()
                .flat_map(|(_, n)| n.iter().copied())
                .collect();
            if targets.is_empty() {
                continue;
            }
            if self.drain {
                self.drain_nodes(env, act, source, nodes, &targets);
            } else {
                self.best_effort(env, act, source, nodes, &targets);
            }
        }
    }

    fn movable<'a>(&self, i: &'a NodeInput, act: &mut dyn Act) -> Vec<&'a Arc<PodView>> {
        let mut pods: Vec<&Arc<PodView>> = i
            .pods
            .iter()
            .filter(|p| self.scope.pod(p) && act.filter(p, false))
            .collect();
        sort_by_requests(&mut pods);
        pods
    }

    /// Upstream's NodeFit of `p` on target `t`.
    fn fits(env: &Env, p: &PodView, t: &NodeInput) -> bool {
        let name = t.node.metadata.name.as_deref().unwrap_or("");
        env.fit
            .slot(name)
            .is_some_and(|s| env.fit.check(p, s).is_ok())
    }

    /// `evictFromPriorityToTargets`.
    fn best_effort(
        &self,
        env: &Env,
        act: &mut dyn Act,
        source: &str,
        nodes: &[&NodeInput],
        targets: &[&NodeInput],
    ) {
        let why = format!("evicting from {source} priority resource to lower priority resource");
        for i in nodes {
            let mut misses = 0;
            let mut chosen = Vec::new();
            for p in self.movable(i, act) {
                if self.node_fit && !targets.iter().any(|t| Self::fits(env, p, t)) {
                    misses += 1;
                    if misses >= MAX_CONSECUTIVE_MISSES {
                        break;
                    }
                    continue;
                }
                misses = 0;
                chosen.push(p);
            }
            if self.dry_run {
                continue;
            }
            for p in chosen {
                act.evict(p, &why);
            }
        }
    }

    /// `evictByDrainingNodes`: a source node goes only if all its movable pods fit the
    /// targets' free requests together; what they take stays taken for the next source.
    fn drain_nodes(
        &self,
        env: &Env,
        act: &mut dyn Act,
        source: &str,
        nodes: &[&NodeInput],
        targets: &[&NodeInput],
    ) {
        let mut free: Vec<Amounts> = targets.iter().map(|t| remaining(t)).collect();
        for i in nodes {
            let pods = self.movable(i, act);
            if pods.is_empty() {
                continue;
            }
            let mut working = free.clone();
            let placed = pods.iter().all(|p| {
                let req = p.requests();
                let slot = targets.iter().zip(working.iter_mut()).find(|(t, room)| {
                    let fits = !self.node_fit || Self::fits(env, p, t);
                    fits && req
                        .iter()
                        .all(|(r, v)| room.get(r).is_none_or(|left| v <= left))
                });
                let Some((_, room)) = slot else {
                    return false;
                };
                for (r, v) in &req {
                    if let Some(left) = room.get_mut(r) {
                        *left -= v;
                    }
                }
                true
            });
            if !placed {
                continue;
            }
            let node = i.node.metadata.name.clone().unwrap_or_default();
            let why = format!("drain node {node} (sourcePriority={source})");
            // Koordinator cordons, evicts, and uncordons if an eviction fails: the node
            // stays cordoned only when every pod went.
            let all_went = self.dry_run || pods.iter().all(|p| act.evict(p, &why));
            if self.auto_cordon && all_went {
                act.plan(Action::Cordon { node }, &why);
            }
            free = working;
        }
    }
}

#[cfg(test)]
#[path = "custom_priority_tests.rs"]
mod tests;
