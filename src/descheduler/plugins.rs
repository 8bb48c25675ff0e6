//! The upstream descheduler plugins koord runs at Deschedule, with sigs.k8s.io/descheduler's
//! arg names: RemoveFailedPods, PodLifeTime, RemovePodsHavingTooManyRestarts,
//! RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity. Each names candidates;
//! the profile's evictor filters and limits them.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use super::framework::podview::PodView;
use super::lownodeload::args::Namespaces;
use super::lownodeload::pass::NodeInput;
use crate::api::placement::tolerates;
use crate::api::selector::label_selector_matches;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// Some fields are accepted only so Koordinator's files load; koord's settings govern them.
#[allow(dead_code)]
struct RawArgs {
    api_version: Option<String>,
    kind: Option<String>,
    namespaces: Option<Namespaces>,
    label_selector: Option<LabelSelector>,
    // RemoveFailedPods
    min_pod_lifetime_seconds: Option<u64>,
    #[serde(default)]
    exclude_owner_kinds: Vec<String>,
    #[serde(default)]
    reasons: Vec<String>,
    including_init_containers: Option<bool>,
    // PodLifeTime
    max_pod_life_time_seconds: Option<u64>,
    #[serde(default)]
    states: Vec<String>,
    // RemovePodsHavingTooManyRestarts
    pod_restart_threshold: Option<i32>,
    // RemovePodsViolatingNodeTaints
    include_prefer_no_schedule: Option<bool>,
    #[serde(default)]
    excluded_taints: Vec<String>,
    // RemovePodsViolatingNodeAffinity
    #[serde(default)]
    node_affinity_type: Vec<String>,
}

/// Fields that belong to each plugin (others are rejected, as upstream's typed args would).
const FIELDS: &[(&str, &[&str])] = &[
    (
        "RemoveFailedPods",
        &[
            "minPodLifetimeSeconds",
            "excludeOwnerKinds",
            "reasons",
            "includingInitContainers",
        ],
    ),
    ("PodLifeTime", &["maxPodLifeTimeSeconds", "states"]),
    (
        "RemovePodsHavingTooManyRestarts",
        &["podRestartThreshold", "includingInitContainers"],
    ),
    (
        "RemovePodsViolatingNodeTaints",
        &["includePreferNoSchedule", "excludedTaints"],
    ),
    ("RemovePodsViolatingNodeAffinity", &["nodeAffinityType"]),
];

pub struct Upstream {
    name: &'static str,
    args: RawArgs,
}

impl Upstream {
    pub fn new(name: &str, args: &Value) -> Result<Upstream, String> {
        let Some((name, own)) = FIELDS.iter().find(|(n, _)| *n == name) else {
            return Err(format!("{name} is not a Deschedule plugin koord runs"));
        };
        if let Some(o) = args.as_object() {
            let common = ["apiVersion", "kind", "namespaces", "labelSelector"];
            if let Some(k) = o
                .keys()
                .find(|k| !common.contains(&k.as_str()) && !own.contains(&k.as_str()))
            {
                return Err(format!("unknown field {k:?} in {name}Args"));
            }
        }
        let args: RawArgs = if args.is_null() {
            RawArgs::default()
        } else {
            serde_json::from_value(args.clone()).map_err(|e| format!("{name}Args: {e}"))?
        };
        if *name == "PodLifeTime" && args.max_pod_life_time_seconds.is_none() {
            return Err("PodLifeTimeArgs.maxPodLifeTimeSeconds must be set".into());
        }
        if *name == "RemovePodsHavingTooManyRestarts" && args.pod_restart_threshold.unwrap_or(0) < 1
        {
            return Err(
                "RemovePodsHavingTooManyRestartsArgs.podRestartThreshold must be at least 1".into(),
            );
        }
        Ok(Upstream { name, args })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    fn selected(&self, p: &PodView) -> bool {
        let ns_ok = self
            .args
            .namespaces
            .as_ref()
            .is_none_or(|f| f.allows(&p.namespace));
        let sel_ok = self.args.label_selector.is_none()
            || label_selector_matches(self.args.label_selector.as_ref(), p.labels_map().as_ref());
        ns_ok && sel_ok
    }

    /// (pod, node, reason) for every pod this plugin would evict.
    pub fn candidates(
        &self,
        inputs: &[NodeInput],
        now_ms: i64,
    ) -> Vec<(Arc<PodView>, String, String)> {
        let mut out = Vec::new();
        for i in inputs {
            let node = i.node.metadata.name.clone().unwrap_or_default();
            for p in i.pods.iter().filter(|p| self.selected(p)) {
                let why = match self.name {
                    "RemoveFailedPods" => self.failed(p, now_ms),
                    "PodLifeTime" => self.too_old(p, now_ms),
                    "RemovePodsHavingTooManyRestarts" => self.restarts(p),
                    "RemovePodsViolatingNodeTaints" => self.taints(p, &i.node),
                    _ => self.affinity(p, &i.node, inputs),
                };
                if let Some(why) = why {
                    out.push((p.clone(), node.clone(), why));
                }
            }
        }
        out
    }

    fn failed(&self, p: &PodView, now_ms: i64) -> Option<String> {
        if p.phase.as_deref() != Some("Failed") {
            return None;
        }
        if let Some(min) = self.args.min_pod_lifetime_seconds
            && age_s(p, now_ms) < min as i64
        {
            return None;
        }
        let kinds = p.owners.iter().map(|o| o.kind.as_str());
        if kinds
            .clone()
            .any(|k| self.args.exclude_owner_kinds.iter().any(|x| x == k))
        {
            return None;
        }
        let mut reasons: Vec<String> = p.reason.iter().cloned().collect();
        let init = self.args.including_init_containers.unwrap_or(false);
        for c in p.containers.iter().filter(|c| init || !c.init) {
            reasons.extend(c.waiting.clone());
            reasons.extend(c.terminated.clone());
        }
        if !self.args.reasons.is_empty() && !reasons.iter().any(|r| self.args.reasons.contains(r)) {
            return None;
        }
        Some(format!("pod failed ({})", reasons.join(", ")))
    }

    fn too_old(&self, p: &PodView, now_ms: i64) -> Option<String> {
        let max = self.args.max_pod_life_time_seconds? as i64;
        let age = age_s(p, now_ms);
        if age <= max {
            return None;
        }
        if !self.args.states.is_empty() {
            let phase = p.phase.clone().into_iter();
            let waiting = p
                .containers
                .iter()
                .filter(|c| !c.init)
                .filter_map(|c| c.waiting.clone());
            if !phase.chain(waiting).any(|s| self.args.states.contains(&s)) {
                return None;
            }
        }
        Some(format!(
            "pod is {age}s old, over maxPodLifeTimeSeconds {max}"
        ))
    }

    fn restarts(&self, p: &PodView) -> Option<String> {
        let init = self.args.including_init_containers.unwrap_or(false);
        let n: i32 = p
            .containers
            .iter()
            .filter(|c| init || !c.init)
            .map(|c| c.restarts)
            .sum();
        let t = self.args.pod_restart_threshold?;
        (n >= t).then(|| format!("pod restarted {n} times, threshold {t}"))
    }

    fn taints(&self, p: &PodView, node: &Node) -> Option<String> {
        let tolerations = &p.tolerations;
        let prefer = self.args.include_prefer_no_schedule.unwrap_or(false);
        let excluded = |k: &str, v: Option<&str>| {
            self.args
                .excluded_taints
                .iter()
                .any(|e| match e.split_once('=') {
                    Some((ek, ev)) => ek == k && Some(ev) == v,
                    None => e == k,
                })
        };
        node.spec
            .as_ref()?
            .taints
            .iter()
            .flatten()
            .filter(|t| t.effect == "NoSchedule" || (prefer && t.effect == "PreferNoSchedule"))
            .filter(|t| !excluded(&t.key, t.value.as_deref()))
            .find(|t| !tolerates(tolerations, t))
            .map(|t| {
                format!(
                    "pod does not tolerate taint {}={}:{} of its node",
                    t.key,
                    t.value.as_deref().unwrap_or(""),
                    t.effect
                )
            })
    }

    fn affinity(&self, p: &PodView, node: &Node, inputs: &[NodeInput]) -> Option<String> {
        let required = "requiredDuringSchedulingIgnoredDuringExecution";
        if !self.args.node_affinity_type.is_empty()
            && !self.args.node_affinity_type.iter().any(|t| t == required)
        {
            return None;
        }
        let fits = |n: &Node| {
            let labels: BTreeMap<String, String> = n.metadata.labels.clone().unwrap_or_default();
            p.fits_node(&labels, n.metadata.name.as_deref().unwrap_or(""))
        };
        if fits(node) || !inputs.iter().any(|i| fits(&i.node)) {
            return None;
        }
        Some("pod's required node affinity no longer matches its node".into())
    }
}

fn age_s(p: &PodView, now_ms: i64) -> i64 {
    p.created_ms.map_or(0, |t| (now_ms - t) / 1000)
}

#[cfg(test)]
#[path = "plugins_tests.rs"]
mod tests;
