//! FragmentationAware (Koordinator, Balance): a node whose requested fractions of its
//! resources are far apart (their population standard deviation above
//! `imbalanceThreshold`) gives up the one evictable pod whose removal evens them out most,
//! if that gains more than `minImprovementThreshold`.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use super::koord_scope::{KoordScope, PodSelector};
use super::{Act, Env};
use crate::api::field::FieldError;
use crate::api::pod::amounts;
use crate::descheduler::framework::plugin::NodeInput;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::lownodeload::args::Namespaces;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)] // apiVersion and kind are accepted only so Koordinator's files load.
pub struct FragmentationAwareArgs {
    api_version: Option<String>,
    kind: Option<String>,
    paused: Option<bool>,
    dry_run: Option<bool>,
    node_selector: Option<LabelSelector>,
    evictable_namespaces: Option<Namespaces>,
    #[serde(default)]
    pod_selectors: Vec<PodSelector>,
    node_fit: Option<bool>,
    #[serde(default)]
    resources: Vec<String>,
    imbalance_threshold: Option<f64>,
    min_improvement_threshold: Option<f64>,
}

pub struct FragmentationAware {
    scope: KoordScope,
    paused: bool,
    dry_run: bool,
    node_fit: bool,
    resources: Vec<String>,
    imbalance: f64,
    min_gain: f64,
}

impl FragmentationAware {
    /// Koordinator's defaults (nodeFit, cpu and memory, 0.15, 0.02) and validation.
    pub fn new(a: FragmentationAwareArgs) -> Result<FragmentationAware, FieldError> {
        let resources = if a.resources.is_empty() {
            vec!["cpu".to_string(), "memory".to_string()]
        } else {
            a.resources.clone()
        };
        if let Some((i, r)) = resources
            .iter()
            .enumerate()
            .find(|(i, r)| resources[..*i].contains(r))
        {
            return Err(FieldError::new(
                format!("resources[{i}]"),
                format!("duplicate value {r:?}"),
            ));
        }
        let imbalance = a.imbalance_threshold.unwrap_or(0.15);
        let min_gain = a.min_improvement_threshold.unwrap_or(0.02);
        for (field, v) in [
            ("imbalanceThreshold", imbalance),
            ("minImprovementThreshold", min_gain),
        ] {
            if v < 0.0 || !v.is_finite() {
                return Err(FieldError::new(field, "must be greater than or equal to 0"));
            }
        }
        Ok(FragmentationAware {
            scope: KoordScope::new(
                a.node_selector.as_ref(),
                &a.pod_selectors,
                a.evictable_namespaces.as_ref(),
            )?,
            paused: a.paused.unwrap_or(false),
            dry_run: a.dry_run.unwrap_or(false),
            node_fit: a.node_fit.unwrap_or(true),
            resources,
            imbalance,
            min_gain,
        })
    }

    /// Population standard deviation of Σ requests / allocatable over the resources the
    /// node has (`scoreNodeImbalance`).
    fn imbalance_of<'a>(
        &self,
        i: &NodeInput,
        pods: impl Iterator<Item = &'a Arc<PodView>> + Clone,
    ) -> f64 {
        let alloc = amounts(i.node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
        let fractions: Vec<f64> = self
            .resources
            .iter()
            .filter_map(|r| {
                let a = *alloc.get(r).filter(|a| **a != 0)?;
                let used: i64 = if r == "pods" {
                    pods.clone().count() as i64
                } else {
                    pods.clone()
                        .map(|p| p.requests().get(r).copied().unwrap_or(0))
                        .sum()
                };
                Some(used as f64 / a as f64)
            })
            .collect();
        std_dev(&fractions)
    }

    pub fn run(&self, env: &Env, act: &mut dyn Act) {
        if self.paused {
            return;
        }
        let nodes: Vec<&NodeInput> = env
            .inputs
            .iter()
            .filter(|i| self.scope.node(&i.node))
            .collect();
        let names: Vec<&str> = nodes
            .iter()
            .filter_map(|i| i.node.metadata.name.as_deref())
            .collect();
        for i in &nodes {
            let before = self.imbalance_of(i, i.pods.iter());
            if before <= self.imbalance {
                continue;
            }
            let mut best: Option<(&Arc<PodView>, f64, f64)> = None;
            for p in i
                .pods
                .iter()
                .filter(|p| self.scope.pod(p) && act.filter(p, false))
            {
                if self.node_fit && !env.fit.fits_any_other(p, Some(&names)) {
                    continue;
                }
                let after = self.imbalance_of(i, i.pods.iter().filter(|o| !Arc::ptr_eq(o, p)));
                let gain = before - after;
                if gain > self.min_gain && best.is_none_or(|(_, g, _)| gain > g) {
                    best = Some((p, gain, after));
                }
            }
            let Some((p, gain, after)) = best else {
                continue;
            };
            if !act.pre_evict(p, true) || self.dry_run {
                continue;
            }
            let why = format!(
                "fragmentation reduction: stdBefore={before:.4} stdAfter={after:.4} gain={gain:.4}"
            );
            act.evict(p, &why);
        }
    }
}

fn std_dev(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
}

#[cfg(test)]
#[path = "fragmentation_tests.rs"]
mod tests;
