//! ScaleDownBinPack (Koordinator, Balance): ranks the pods a scale-down should remove so
//! the nodes easiest to empty empty first. A node's evacuation score is Σ weight × the
//! non-target pods' requested fraction over Σ weight × the targets' (lower: emptier of
//! others); nodes go by score, then fewer targets, then name; within a node the bigger
//! (weighted requested fraction), then newer pod first. `CalculateOnly` (the default)
//! writes each ranked pod's rank as its `controller.kubernetes.io/pod-deletion-cost` and
//! MaxInt32 on target pods the evictor refuses; `EvictDirectly` evicts in rank order, at
//! most `maxPodsToEvict`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use super::koord_scope::{KoordScope, PodSelector};
use super::{Act, Env};
use crate::api::extension::keys::ANNOTATION_POD_DELETION_COST;
use crate::api::field::FieldError;
use crate::api::pod::{Amounts, amounts};
use crate::descheduler::framework::action::Action;
use crate::descheduler::framework::plugin::NodeInput;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::lownodeload::args::Namespaces;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)] // apiVersion and kind are accepted only so Koordinator's files load.
pub struct ScaleDownBinPackArgs {
    api_version: Option<String>,
    kind: Option<String>,
    paused: Option<bool>,
    strategy: Option<String>,
    max_pods_to_evict: Option<i32>,
    node_selector: Option<LabelSelector>,
    #[serde(default)]
    pod_selectors: Vec<PodSelector>,
    evictable_namespaces: Option<Namespaces>,
    #[serde(default)]
    resources: Vec<String>,
    resource_weights: Option<BTreeMap<String, f64>>,
}

pub struct ScaleDownBinPack {
    scope: KoordScope,
    paused: bool,
    evict_directly: bool,
    max_pods: usize,
    weights: BTreeMap<String, f64>,
}

/// One pod in the scale-down order.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub pod: Arc<PodView>,
    pub rank: usize,
    pub node: String,
    pub score: f64,
}

fn requested(pods: &[&Arc<PodView>], r: &str) -> i64 {
    pods.iter()
        .map(|p| p.requests().get(r).copied().unwrap_or(0))
        .sum()
}

fn allocatable(i: &NodeInput) -> Amounts {
    amounts(i.node.status.as_ref().and_then(|s| s.allocatable.as_ref()))
}

/// A pod's weighted requested fraction of the node (`getPodSize`).
fn size(p: &PodView, alloc: &Amounts, weights: &BTreeMap<String, f64>) -> f64 {
    let req = p.requests();
    weights
        .iter()
        .filter_map(|(r, w)| {
            let a = *alloc.get(r).filter(|a| **a > 0)?;
            Some(w * req.get(r).copied().unwrap_or(0) as f64 / a as f64)
        })
        .sum()
}

/// One node's pods as the ranking splits them.
pub struct NodePods<'a> {
    pub node: &'a NodeInput,
    /// Target pods the evictor may take.
    pub eligible: Vec<&'a Arc<PodView>>,
    /// Target pods the evictor refuses.
    pub skipped: Vec<&'a Arc<PodView>>,
    /// Pods no pod selector names.
    pub others: Vec<&'a Arc<PodView>>,
}

/// Koordinator's `RankPods`.
pub fn rank_pods(nodes: &[NodePods], weights: &BTreeMap<String, f64>) -> Vec<Ranked> {
    let default: BTreeMap<String, f64> =
        [("cpu".to_string(), 1.0), ("memory".to_string(), 1.0)].into();
    let weights = if weights.is_empty() {
        &default
    } else {
        weights
    };
    let mut infos: Vec<(f64, &NodeInput, Vec<&Arc<PodView>>, String)> = Vec::new();
    for NodePods {
        node: i,
        eligible,
        skipped,
        others,
    } in nodes
    {
        if eligible.is_empty() {
            continue;
        }
        let alloc = allocatable(i);
        let (mut num, mut den) = (0.0, 0.0);
        for (r, w) in weights {
            let Some(a) = alloc.get(r).copied().filter(|a| *a > 0) else {
                continue;
            };
            let non_target = requested(others, r) + requested(skipped, r);
            num += w * non_target as f64 / a as f64;
            den += w * requested(eligible, r) as f64 / a as f64;
        }
        let score = if den > 0.0 {
            num / den
        } else if num > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let name = i.node.metadata.name.clone().unwrap_or_default();
        infos.push((score, i, eligible.clone(), name));
    }
    infos.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.2.len().cmp(&b.2.len()))
            .then(a.3.cmp(&b.3))
    });
    let mut out = Vec::new();
    for (score, i, mut pods, name) in infos {
        let alloc = allocatable(i);
        pods.sort_by(|a, b| {
            size(b, &alloc, weights)
                .total_cmp(&size(a, &alloc, weights))
                .then(b.created_ms.cmp(&a.created_ms))
                .then(a.namespace.cmp(&b.namespace))
                .then(a.name.cmp(&b.name))
        });
        for p in pods {
            out.push(Ranked {
                pod: p.clone(),
                rank: out.len(),
                node: name.clone(),
                score,
            });
        }
    }
    out
}

impl ScaleDownBinPack {
    pub fn new(a: ScaleDownBinPackArgs) -> Result<ScaleDownBinPack, FieldError> {
        let strategy = a.strategy.clone().unwrap_or_else(|| "CalculateOnly".into());
        let evict_directly = match strategy.as_str() {
            "CalculateOnly" => false,
            "EvictDirectly" => true,
            other => {
                return Err(FieldError::new(
                    "strategy",
                    format!("{other:?}: strategy must be CalculateOnly or EvictDirectly"),
                ));
            }
        };
        let max = a.max_pods_to_evict.unwrap_or(0);
        if evict_directly && max <= 0 {
            return Err(FieldError::new(
                "maxPodsToEvict",
                "maxPodsToEvict must be positive when strategy is EvictDirectly",
            ));
        }
        let mut weights = a.resource_weights.clone().unwrap_or_default();
        if let Some((r, w)) = weights.iter().find(|(_, w)| !(**w > 0.0 && w.is_finite())) {
            return Err(FieldError::new(
                format!("resourceWeights[{r}]"),
                format!("{w}: weights must be positive finite floats"),
            ));
        }
        let resources = if a.resources.is_empty() {
            vec!["cpu".to_string(), "memory".to_string()]
        } else {
            a.resources.clone()
        };
        for r in resources {
            weights.entry(r).or_insert(1.0);
        }
        Ok(ScaleDownBinPack {
            scope: KoordScope::new(
                a.node_selector.as_ref(),
                &a.pod_selectors,
                a.evictable_namespaces.as_ref(),
            )?,
            paused: a.paused.unwrap_or(false),
            evict_directly,
            max_pods: max.max(0) as usize,
            weights,
        })
    }

    pub fn run(&self, env: &Env, act: &mut dyn Act) {
        if self.paused {
            return;
        }
        let mut per_node = Vec::new();
        let mut skipped_all: Vec<&Arc<PodView>> = Vec::new();
        for i in env.inputs.iter().filter(|i| self.scope.node(&i.node)) {
            let (mut eligible, mut skipped, mut others) = (Vec::new(), Vec::new(), Vec::new());
            let live = i
                .pods
                .iter()
                .filter(|p| !matches!(p.phase.as_deref(), Some("Succeeded" | "Failed")));
            for p in live {
                if self.scope.pod(p) && act.filter(p, false) {
                    eligible.push(p);
                } else if self.scope.selected(p) {
                    skipped.push(p);
                } else {
                    others.push(p);
                }
            }
            if eligible.is_empty() {
                continue;
            }
            skipped_all.extend(skipped.iter().copied());
            per_node.push(NodePods {
                node: i,
                eligible,
                skipped,
                others,
            });
        }
        let ranked = rank_pods(&per_node, &self.weights);
        if self.evict_directly {
            let mut evicted = 0;
            for r in &ranked {
                if evicted >= self.max_pods {
                    break;
                }
                if act.evict(&r.pod, "scale-down binpack") {
                    evicted += 1;
                }
            }
            return;
        }
        let mut cost = |p: &PodView, v: String, why: String| {
            let action = Action::Annotate {
                namespace: p.namespace.clone(),
                pod: p.name.clone(),
                key: ANNOTATION_POD_DELETION_COST.into(),
                value: v,
            };
            act.plan(action, &why);
        };
        for r in &ranked {
            let why = format!(
                "rank {} on node {} (evacuation score {:.4})",
                r.rank, r.node, r.score
            );
            cost(&r.pod, r.rank.to_string(), why);
        }
        for p in skipped_all {
            cost(
                p,
                i32::MAX.to_string(),
                "a target pod the evictor refuses".into(),
            );
        }
    }
}

#[cfg(test)]
#[path = "binpack_tests.rs"]
mod tests;
