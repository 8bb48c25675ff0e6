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
mod per_pod;
mod spread;

use crate::api::field::FieldError;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use super::framework::action::Action;
use super::framework::fit::NodeFit;
use super::framework::podview::PodView;
use super::lownodeload::args::Namespaces;
use super::lownodeload::pass::NodeInput;
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
    #[serde(default)]
    exit_codes: Vec<i32>,
    including_init_containers: Option<bool>,
});

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OwnerKinds {
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodConditionFilter {
    #[serde(rename = "type")]
    type_: Option<String>,
    status: Option<String>,
    reason: Option<String>,
    min_time_since_last_transition_seconds: Option<u64>,
}

plugin_args!(PodLifeTimeArgs {
    max_pod_life_time_seconds: Option<u64>,
    #[serde(default)]
    states: Vec<String>,
    owner_kinds: Option<OwnerKinds>,
    #[serde(default)]
    conditions: Vec<PodConditionFilter>,
    #[serde(default)]
    exit_codes: Vec<i32>,
    #[serde(default)]
    including_init_containers: bool,
    #[serde(default)]
    including_ephemeral_containers: bool,
});

plugin_args!(RemovePodsHavingTooManyRestartsArgs {
    pod_restart_threshold: Option<i32>,
    including_init_containers: Option<bool>,
    #[serde(default)]
    states: Vec<String>,
});

plugin_args!(RemovePodsViolatingNodeTaintsArgs {
    include_prefer_no_schedule: Option<bool>,
    #[serde(default)]
    excluded_taints: Vec<String>,
    included_taints: Option<Vec<String>>,
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
pub struct Env<'a, 'f> {
    pub inputs: &'a [NodeInput],
    pub fit: &'a NodeFit<'f>,
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
                per_pod::validate_pod_life_time(&a)?;
                ("PodLifeTime", Plugin::PodLifeTime(a))
            }
            "RemovePodsHavingTooManyRestarts" => {
                let a: RemovePodsHavingTooManyRestartsArgs = args_of(name, args)?;
                if a.pod_restart_threshold.unwrap_or(0) < 1 {
                    return Err(FieldError::whole(
                        "RemovePodsHavingTooManyRestartsArgs.podRestartThreshold must be at least 1",
                    ));
                }
                if a.states
                    .iter()
                    .any(|s| s != "Running" && s != "CrashLoopBackOff")
                {
                    return Err(FieldError::new(
                        "RemovePodsHavingTooManyRestartsArgs.states",
                        "states must be one of [CrashLoopBackOff Running]",
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
            "RemovePodsViolatingNodeAffinity" => {
                let a: RemovePodsViolatingNodeAffinityArgs = args_of(name, args)?;
                if a.node_affinity_type.is_empty() {
                    return Err(FieldError::new(
                        "RemovePodsViolatingNodeAffinityArgs.nodeAffinityType",
                        "nodeAffinityType needs to be set",
                    ));
                }
                (
                    "RemovePodsViolatingNodeAffinity",
                    Plugin::RemovePodsViolatingNodeAffinity(a),
                )
            }
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
                for (pod, _, why) in per_pod::candidates(&self.plugin, env) {
                    if act.filter(&pod, true) && act.pre_evict(&pod, true) {
                        act.evict(&pod, &why);
                    }
                }
            }
        }
    }
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
        let prefer_not = p
            .annotation(super::framework::podview::PREFER_NO_EVICTION)
            .is_some();
        (p.priority.map_or(0, |_| 1), p.priority, qos, prefer_not)
    };
    pods.sort_by_key(|p| key(p));
}

#[cfg(test)]
#[path = "plugins_tests.rs"]
mod tests;
