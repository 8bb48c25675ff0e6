//! The upstream descheduler plugins koord runs, with sigs.k8s.io/descheduler's arg names and
//! semantics. Deschedule: RemoveFailedPods, PodLifeTime, RemovePodsHavingTooManyRestarts,
//! RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity,
//! RemovePodsViolatingInterPodAntiAffinity. Balance: RemoveDuplicates,
//! RemovePodsViolatingTopologySpreadConstraint, LowNodeUtilization, HighNodeUtilization;
//! and Koordinator's own Balance plugins: FragmentationAware, ScaleDownBinPack,
//! CustomPriority. Each asks the profile's evictor ([`Act`]) as its source asks its handle.

mod antiaffinity;
mod binpack;
mod custom_priority;
mod duplicates;
mod fragmentation;
mod koord_scope;
mod nodeutilization;
mod spread;

use crate::api::field::FieldError;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use super::framework::Action;
use super::framework::fit::NodeFit;
use super::framework::podview::PodView;
use super::lownodeload::args::Namespaces;
use super::lownodeload::pass::NodeInput;
use crate::api::placement::tolerates;
use crate::api::selector::label_selector_matches;

/// A plugin's args type: sigs.k8s.io/descheduler's fields for it, plus the common ones;
/// anything else is refused, as upstream's typed args would.
macro_rules! plugin_args {
    ($name:ident { $($(#[$m:meta])* $f:ident : $t:ty),* $(,)? }) => {
        #[derive(Debug, Clone, Default, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        // `apiVersion` and `kind` are accepted only so Koordinator's files load.
        #[allow(dead_code)]
        pub struct $name {
            api_version: Option<String>,
            kind: Option<String>,
            namespaces: Option<Namespaces>,
            label_selector: Option<LabelSelector>,
            $($(#[$m])* $f: $t,)*
        }

        impl Scope for $name {
            fn namespaces(&self) -> Option<&Namespaces> {
                self.namespaces.as_ref()
            }
            fn label_selector(&self) -> Option<&LabelSelector> {
                self.label_selector.as_ref()
            }
        }
    };
}

/// The pods a plugin looks at: `namespaces` and `labelSelector`, common to every args type.
trait Scope {
    fn namespaces(&self) -> Option<&Namespaces>;
    fn label_selector(&self) -> Option<&LabelSelector>;

    fn selects(&self, p: &PodView) -> bool {
        let ns_ok = self.namespaces().is_none_or(|f| f.allows(&p.namespace));
        let sel_ok = self.label_selector().is_none()
            || label_selector_matches(self.label_selector(), p.labels_map().as_ref());
        ns_ok && sel_ok
    }
}

plugin_args!(RemoveFailedPodsArgs {
    min_pod_lifetime_seconds: Option<u64>,
    #[serde(default)]
    exclude_owner_kinds: Vec<String>,
    #[serde(default)]
    reasons: Vec<String>,
    including_init_containers: Option<bool>,
});

plugin_args!(PodLifeTimeArgs {
    max_pod_life_time_seconds: Option<u64>,
    #[serde(default)]
    states: Vec<String>,
});

plugin_args!(RemovePodsHavingTooManyRestartsArgs {
    pod_restart_threshold: Option<i32>,
    including_init_containers: Option<bool>,
});

plugin_args!(RemovePodsViolatingNodeTaintsArgs {
    include_prefer_no_schedule: Option<bool>,
    #[serde(default)]
    excluded_taints: Vec<String>,
});

plugin_args!(RemovePodsViolatingNodeAffinityArgs {
    #[serde(default)]
    node_affinity_type: Vec<String>,
});

plugin_args!(RemoveDuplicatesArgs {
    #[serde(default)]
    exclude_owner_kinds: Vec<String>,
});

plugin_args!(RemovePodsViolatingInterPodAntiAffinityArgs {});

plugin_args!(RemovePodsViolatingTopologySpreadConstraintArgs {
    #[serde(default)]
    constraints: Vec<String>,
    topology_balance_node_fit: Option<bool>,
});

/// One upstream plugin with its own args.
enum Plugin {
    RemoveFailedPods(RemoveFailedPodsArgs),
    PodLifeTime(PodLifeTimeArgs),
    RemovePodsHavingTooManyRestarts(RemovePodsHavingTooManyRestartsArgs),
    RemovePodsViolatingNodeTaints(RemovePodsViolatingNodeTaintsArgs),
    RemovePodsViolatingNodeAffinity(RemovePodsViolatingNodeAffinityArgs),
    RemovePodsViolatingInterPodAntiAffinity(RemovePodsViolatingInterPodAntiAffinityArgs),
    RemoveDuplicates(RemoveDuplicatesArgs),
    RemovePodsViolatingTopologySpreadConstraint(RemovePodsViolatingTopologySpreadConstraintArgs),
    LowNodeUtilization(Box<nodeutilization::Low>),
    HighNodeUtilization(Box<nodeutilization::High>),
    FragmentationAware(Box<fragmentation::FragmentationAware>),
    ScaleDownBinPack(Box<binpack::ScaleDownBinPack>),
    CustomPriority(Box<custom_priority::CustomPriority>),
}

/// What a plugin sees of the pass: its nodes with their pods, and the node-fit check.
pub struct Env<'a> {
    pub inputs: &'a [NodeInput],
    pub fit: &'a NodeFit,
    pub now_ms: i64,
}

/// The profile's evictor as a plugin calls it (upstream's `handle.Evictor()`).
pub trait Act {
    /// The Filter plugins (non-retryable checks); `record`: a refusal is reported as a skip
    /// (off while a plugin only lists the pods it may take).
    fn filter(&mut self, p: &PodView, record: bool) -> bool;
    /// The PreEvictionFilter plugins (DefaultEvictor's `nodeFit`).
    fn pre_evict(&mut self, p: &PodView, record: bool) -> bool;
    /// The limits, then the Evict plugin; whether the pod counts as evicted.
    fn evict(&mut self, p: &Arc<PodView>, reason: &str) -> bool;
    /// A change besides an eviction (cordon a node, annotate a pod).
    fn plan(&mut self, action: Action, reason: &str);
}

/// `name`'s args from the configuration (none: the defaults), with serde's unknown-field
/// error worded as before (`unknown field "x" in NameArgs`).
fn args_of<T: serde::de::DeserializeOwned + Default>(
    name: &str,
    v: &Value,
) -> Result<T, FieldError> {
    if v.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(v.clone()).map_err(|e| {
        let e = e.to_string();
        match e
            .strip_prefix("unknown field `")
            .and_then(|r| r.split_once('`'))
        {
            Some((field, _)) => FieldError::whole(format!("unknown field {field:?} in {name}Args")),
            None => FieldError::new(format!("{name}Args"), e),
        }
    })
}

pub struct Upstream {
    name: &'static str,
    plugin: Plugin,
}

impl Upstream {
    pub fn new(name: &str, args: &Value) -> Result<Upstream, FieldError> {
        let (name, plugin) = match name {
            "RemoveFailedPods" => (
                "RemoveFailedPods",
                Plugin::RemoveFailedPods(args_of(name, args)?),
            ),
            "PodLifeTime" => {
                let a: PodLifeTimeArgs = args_of(name, args)?;
                if a.max_pod_life_time_seconds.is_none() {
                    return Err(FieldError::whole(
                        "PodLifeTimeArgs.maxPodLifeTimeSeconds must be set",
                    ));
                }
                ("PodLifeTime", Plugin::PodLifeTime(a))
            }
            "RemovePodsHavingTooManyRestarts" => {
                let a: RemovePodsHavingTooManyRestartsArgs = args_of(name, args)?;
                if a.pod_restart_threshold.unwrap_or(0) < 1 {
                    return Err(FieldError::whole(
                        "RemovePodsHavingTooManyRestartsArgs.podRestartThreshold must be at least 1",
                    ));
                }
                (
                    "RemovePodsHavingTooManyRestarts",
                    Plugin::RemovePodsHavingTooManyRestarts(a),
                )
            }
            "RemovePodsViolatingNodeTaints" => (
                "RemovePodsViolatingNodeTaints",
                Plugin::RemovePodsViolatingNodeTaints(args_of(name, args)?),
            ),
            "RemovePodsViolatingNodeAffinity" => (
                "RemovePodsViolatingNodeAffinity",
                Plugin::RemovePodsViolatingNodeAffinity(args_of(name, args)?),
            ),
            "RemovePodsViolatingInterPodAntiAffinity" => (
                "RemovePodsViolatingInterPodAntiAffinity",
                Plugin::RemovePodsViolatingInterPodAntiAffinity(args_of(name, args)?),
            ),
            "RemoveDuplicates" => (
                "RemoveDuplicates",
                Plugin::RemoveDuplicates(args_of(name, args)?),
            ),
            "RemovePodsViolatingTopologySpreadConstraint" => {
                let a: RemovePodsViolatingTopologySpreadConstraintArgs = args_of(name, args)?;
                spread::validate(&a)?;
                (
                    "RemovePodsViolatingTopologySpreadConstraint",
                    Plugin::RemovePodsViolatingTopologySpreadConstraint(a),
                )
            }
            "LowNodeUtilization" => (
                "LowNodeUtilization",
                Plugin::LowNodeUtilization(Box::new(nodeutilization::Low::new(args_of(
                    name, args,
                )?)?)),
            ),
            "HighNodeUtilization" => (
                "HighNodeUtilization",
                Plugin::HighNodeUtilization(Box::new(nodeutilization::High::new(args_of(
                    name, args,
                )?)?)),
            ),
            "FragmentationAware" => (
                "FragmentationAware",
                Plugin::FragmentationAware(Box::new(fragmentation::FragmentationAware::new(
                    args_of(name, args)?,
                )?)),
            ),
            "ScaleDownBinPack" => (
                "ScaleDownBinPack",
                Plugin::ScaleDownBinPack(Box::new(binpack::ScaleDownBinPack::new(args_of(
                    name, args,
                )?)?)),
            ),
            "CustomPriority" => (
                "CustomPriority",
                Plugin::CustomPriority(Box::new(custom_priority::CustomPriority::new(args_of(
                    name, args,
                )?)?)),
            ),
            other => {
                return Err(FieldError::whole(format!(
                    "{other} is not an upstream plugin koord runs"
                )));
            }
        };
        Ok(Upstream { name, plugin })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// One run of the plugin at its extension point.
    pub fn run(&self, env: &Env, act: &mut dyn Act) {
        match &self.plugin {
            Plugin::RemovePodsViolatingInterPodAntiAffinity(a) => antiaffinity::run(a, env, act),
            Plugin::RemoveDuplicates(a) => duplicates::run(a, env, act),
            Plugin::RemovePodsViolatingTopologySpreadConstraint(a) => spread::run(a, env, act),
            Plugin::LowNodeUtilization(p) => p.run(env, act),
            Plugin::HighNodeUtilization(p) => p.run(env, act),
            Plugin::FragmentationAware(p) => p.run(env, act),
            Plugin::ScaleDownBinPack(p) => p.run(env, act),
            Plugin::CustomPriority(p) => p.run(env, act),
            _ => {
                for (pod, _, why) in self.candidates(env.inputs, env.now_ms) {
                    if act.filter(&pod, true) && act.pre_evict(&pod, true) {
                        act.evict(&pod, &why);
                    }
                }
            }
        }
    }

    /// (pod, node, reason) for every pod one of the per-pod Deschedule plugins would evict.
    pub fn candidates(
        &self,
        inputs: &[NodeInput],
        now_ms: i64,
    ) -> Vec<(Arc<PodView>, String, String)> {
        let mut out = Vec::new();
        for i in inputs {
            let node = i.node.metadata.name.clone().unwrap_or_default();
            for p in &i.pods {
                let why = match &self.plugin {
                    Plugin::RemoveFailedPods(a) if a.selects(p) => failed(a, p, now_ms),
                    Plugin::PodLifeTime(a) if a.selects(p) => too_old(a, p, now_ms),
                    Plugin::RemovePodsHavingTooManyRestarts(a) if a.selects(p) => restarts(a, p),
                    Plugin::RemovePodsViolatingNodeTaints(a) if a.selects(p) => {
                        taints(a, p, &i.node)
                    }
                    Plugin::RemovePodsViolatingNodeAffinity(a) if a.selects(p) => {
                        affinity(a, p, &i.node, inputs)
                    }
                    _ => None,
                };
                if let Some(why) = why {
                    out.push((p.clone(), node.clone(), why));
                }
            }
        }
        out
    }
}

fn failed(a: &RemoveFailedPodsArgs, p: &PodView, now_ms: i64) -> Option<String> {
    if p.phase.as_deref() != Some("Failed") {
        return None;
    }
    if let Some(min) = a.min_pod_lifetime_seconds
        && age_s(p, now_ms) < min as i64
    {
        return None;
    }
    let kinds = p.owners.iter().map(|o| o.kind.as_str());
    if kinds
        .clone()
        .any(|k| a.exclude_owner_kinds.iter().any(|x| x == k))
    {
        return None;
    }
    let mut reasons: Vec<String> = p.reason.iter().cloned().collect();
    let init = a.including_init_containers.unwrap_or(false);
    for c in p.containers.iter().filter(|c| init || !c.init) {
        reasons.extend(c.waiting.clone());
        reasons.extend(c.terminated.clone());
    }
    if !a.reasons.is_empty() && !reasons.iter().any(|r| a.reasons.contains(r)) {
        return None;
    }
    Some(format!("pod failed ({})", reasons.join(", ")))
}

fn too_old(a: &PodLifeTimeArgs, p: &PodView, now_ms: i64) -> Option<String> {
    let max = a.max_pod_life_time_seconds? as i64;
    let age = age_s(p, now_ms);
    if age <= max {
        return None;
    }
    if !a.states.is_empty() {
        let phase = p.phase.clone().into_iter();
        let waiting = p
            .containers
            .iter()
            .filter(|c| !c.init)
            .filter_map(|c| c.waiting.clone());
        if !phase.chain(waiting).any(|s| a.states.contains(&s)) {
            return None;
        }
    }
    Some(format!(
        "pod is {age}s old, over maxPodLifeTimeSeconds {max}"
    ))
}

fn restarts(a: &RemovePodsHavingTooManyRestartsArgs, p: &PodView) -> Option<String> {
    let init = a.including_init_containers.unwrap_or(false);
    let n: i32 = p
        .containers
        .iter()
        .filter(|c| init || !c.init)
        .map(|c| c.restarts)
        .sum();
    let t = a.pod_restart_threshold?;
    (n >= t).then(|| format!("pod restarted {n} times, threshold {t}"))
}

fn taints(a: &RemovePodsViolatingNodeTaintsArgs, p: &PodView, node: &Node) -> Option<String> {
    let tolerations = &p.tolerations;
    let prefer = a.include_prefer_no_schedule.unwrap_or(false);
    let excluded = |k: &str, v: Option<&str>| {
        a.excluded_taints.iter().any(|e| match e.split_once('=') {
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

fn affinity(
    a: &RemovePodsViolatingNodeAffinityArgs,
    p: &PodView,
    node: &Node,
    inputs: &[NodeInput],
) -> Option<String> {
    let required = "requiredDuringSchedulingIgnoredDuringExecution";
    if !a.node_affinity_type.is_empty() && !a.node_affinity_type.iter().any(|t| t == required) {
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

/// Upstream's `SortPodsBasedOnPriorityLowToHigh`: no priority first, then ascending
/// priority; at equal priority BestEffort, Burstable, Guaranteed, and within a QoS class
/// pods without `prefer-no-eviction` first.
fn priority_low_to_high(pods: &mut [Arc<PodView>]) {
    use crate::api::extension::qos::KubeQoS;
    let key = |p: &PodView| {
        let qos = match p.kube_qos {
            KubeQoS::BestEffort => 0,
            KubeQoS::Burstable => 1,
            KubeQoS::Guaranteed => 2,
        };
        let prefer_not = p.annotation(PREFER_NO_EVICTION).is_some();
        (p.priority.map_or(0, |_| 1), p.priority, qos, prefer_not)
    };
    pods.sort_by_key(|p| key(p));
}

/// The annotation asking the descheduler to take a pod last.
pub const PREFER_NO_EVICTION: &str = "descheduler.alpha.kubernetes.io/prefer-no-eviction";

fn age_s(p: &PodView, now_ms: i64) -> i64 {
    p.created_ms.map_or(0, |t| (now_ms - t) / 1000)
}

#[cfg(test)]
#[path = "plugins_tests.rs"]
mod tests;
