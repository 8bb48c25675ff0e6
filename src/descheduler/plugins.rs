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

use super::framework::plugin::{Act, Env, Plugin};
use super::framework::podview::PodView;
use super::lownodeload::args::Namespaces;
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
enum Kind {
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
    plugin: Kind,
}

impl Upstream {
    pub fn new(name: &str, args: &Value) -> Result<Upstream, FieldError> {
        let (name, plugin) = match name {
            "RemoveFailedPods" => (
                "RemoveFailedPods",
                Kind::RemoveFailedPods(args_of(name, args)?),
            ),
            "PodLifeTime" => {
                let a: PodLifeTimeArgs = args_of(name, args)?;
                per_pod::validate_pod_life_time(&a)?;
                ("PodLifeTime", Kind::PodLifeTime(a))
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
                    Kind::RemovePodsHavingTooManyRestarts(a),
                )
            }
            "RemovePodsViolatingNodeTaints" => (
                "RemovePodsViolatingNodeTaints",
                Kind::RemovePodsViolatingNodeTaints(args_of(name, args)?),
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
                    Kind::RemovePodsViolatingNodeAffinity(a),
                )
            }
            "RemovePodsViolatingInterPodAntiAffinity" => (
                "RemovePodsViolatingInterPodAntiAffinity",
                Kind::RemovePodsViolatingInterPodAntiAffinity(args_of(name, args)?),
            ),
            "RemoveDuplicates" => (
                "RemoveDuplicates",
                Kind::RemoveDuplicates(args_of(name, args)?),
            ),
            "RemovePodsViolatingTopologySpreadConstraint" => {
                let a: RemovePodsViolatingTopologySpreadConstraintArgs = args_of(name, args)?;
                spread::validate(&a)?;
                (
                    "RemovePodsViolatingTopologySpreadConstraint",
                    Kind::RemovePodsViolatingTopologySpreadConstraint(a),
                )
            }
            "LowNodeUtilization" => (
                "LowNodeUtilization",
                Kind::LowNodeUtilization(Box::new(nodeutilization::Low::new(args_of(
                    name, args,
                )?)?)),
            ),
            "HighNodeUtilization" => (
                "HighNodeUtilization",
                Kind::HighNodeUtilization(Box::new(nodeutilization::High::new(args_of(
                    name, args,
                )?)?)),
            ),
            "FragmentationAware" => (
                "FragmentationAware",
                Kind::FragmentationAware(Box::new(fragmentation::FragmentationAware::new(
                    args_of(name, args)?,
                )?)),
            ),
            "ScaleDownBinPack" => (
                "ScaleDownBinPack",
                Kind::ScaleDownBinPack(Box::new(binpack::ScaleDownBinPack::new(args_of(
                    name, args,
                )?)?)),
            ),
            "CustomPriority" => (
                "CustomPriority",
                Kind::CustomPriority(Box::new(custom_priority::CustomPriority::new(args_of(
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
}

/// The descheduler's plugins by name: LowNodeLoad and the upstream ones.
pub fn registry(
    name: &str,
    args: &Value,
    interval: std::time::Duration,
) -> Result<Box<dyn Plugin>, FieldError> {
    if name == "LowNodeLoad" {
        return Ok(Box::new(super::lownodeload::plugin(args, interval)?));
    }
    Ok(Box::new(Upstream::new(name, args)?))
}

impl Plugin for Upstream {
    fn name(&self) -> &'static str {
        self.name
    }

    fn run(&mut self, env: &Env, act: &mut dyn Act) {
        match &self.plugin {
            Kind::RemovePodsViolatingInterPodAntiAffinity(a) => antiaffinity::run(a, env, act),
            Kind::RemoveDuplicates(a) => duplicates::run(a, env, act),
            Kind::RemovePodsViolatingTopologySpreadConstraint(a) => spread::run(a, env, act),
            Kind::LowNodeUtilization(p) => p.run(env, act),
            Kind::HighNodeUtilization(p) => p.run(env, act),
            Kind::FragmentationAware(p) => p.run(env, act),
            Kind::ScaleDownBinPack(p) => p.run(env, act),
            Kind::CustomPriority(p) => p.run(env, act),
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
