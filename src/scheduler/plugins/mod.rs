//! The plugin registry: every name the configuration may use, one `match` to build it.

pub mod affinity;
pub mod basic;
pub mod coscheduling;
pub mod deviceshare;
pub mod elasticquota;
pub mod fitplus;
pub mod hint;
pub mod image;
pub mod interpod;
pub mod loadaware;
pub mod numa;
pub mod preemption;
pub mod reservation;
pub mod resources;
pub mod scarce;
pub mod spread;
pub mod taint;
pub mod volumes;

#[cfg(test)]
mod interpod_tests;
#[cfg(test)]
mod preemption_tests;
#[cfg(test)]
mod resources_tests;
#[cfg(test)]
mod spread_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::framework::Plugin;
use crate::api::field::FieldError;
use crate::scheduler::model::reservation as reservation_model;

/// Plugins koord implements.
pub const IMPLEMENTED: &[&str] = &[
    "PrioritySort",
    "SchedulingGates",
    "NodeUnschedulable",
    "NodeName",
    "NodePorts",
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "TaintToleration",
    "NodeAffinity",
    "LoadAwareScheduling",
    "DefaultBinder",
    "InterPodAffinity",
    "PodTopologySpread",
    "DefaultPreemption",
    "NodeNUMAResource",
    "Reservation",
    "ElasticQuota",
    "Coscheduling",
    "DeviceShare",
    "VolumeBinding",
    "VolumeZone",
    "NodeVolumeLimits",
    "VolumeRestrictions",
    "ImageLocality",
    "NodeResourcesFitPlus",
    "ScarceResourceAvoidance",
    "SchedulingHint",
];

/// Known to Koordinator / kube-scheduler but not built into koord yet: a configuration
/// naming one runs without it, with a warning (an error in strict mode; `compat.rs`).
pub const NOT_YET: &[&str] = &["DynamicResources"];

fn args<T: DeserializeOwned + Default>(name: &str, v: Option<&Value>) -> Result<T, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| FieldError::whole(e.to_string()).within(format!("plugin {name}: args"))),
    }
}

/// Builds plugin `name` with its `pluginConfig` args, under Koordinator's default gates.
pub fn build(name: &str, raw: Option<&Value>) -> Result<Arc<dyn Plugin>, FieldError> {
    build_with(
        name,
        raw,
        &crate::scheduler::features::SCHEDULER_GATES.defaults(),
    )
}

/// Builds plugin `name` with its `pluginConfig` args under the scheduler's feature gates.
pub fn build_with(
    name: &str,
    raw: Option<&Value>,
    gates: &crate::kernel::features::Gates,
) -> Result<Arc<dyn Plugin>, FieldError> {
    let ctx = |e: FieldError| e.within(format!("plugin {name}: args"));
    Ok(match name {
        "PrioritySort" => Arc::new(basic::PrioritySort),
        "SchedulingGates" => Arc::new(basic::SchedulingGates),
        "NodeUnschedulable" => Arc::new(basic::NodeUnschedulable),
        "NodeName" => Arc::new(basic::NodeName),
        "NodePorts" => Arc::new(basic::NodePorts),
        "TaintToleration" => Arc::new(taint::TaintToleration),
        "NodeAffinity" => {
            Arc::new(affinity::NodeAffinity::new(strip_meta(args(name, raw)?)).map_err(ctx)?)
        }
        "NodeResourcesFit" => {
            Arc::new(resources::NodeResourcesFit::new(strip_meta(args(name, raw)?)).map_err(ctx)?)
        }
        "NodeResourcesBalancedAllocation" => Arc::new(resources::BalancedAllocation::new(
            strip_meta(args(name, raw)?),
        )),
        "LoadAwareScheduling" => {
            Arc::new(loadaware::LoadAware::new(args(name, raw)?).map_err(ctx)?)
        }
        "DefaultBinder" => Arc::new(basic::DefaultBinder),
        "Reservation" => {
            let a: ReservationArgs = strip_meta(args(name, raw)?);
            Arc::new(reservation::plugin::ReservationPlugin {
                ignored: Arc::new(a.ignored().map_err(ctx)?),
                preemption: a.enable_preemption.unwrap_or(false),
                pre_allocation: Arc::new(a.pre_allocation_config.unwrap_or_default()),
                selector_index: a.reservation_selector_index.unwrap_or_default(),
            })
        }
        "NodeNUMAResource" => {
            Arc::new(numa::NodeNUMAResource::new(strip_meta(args(name, raw)?)).map_err(ctx)?)
        }
        "ElasticQuota" => {
            let args = elasticquota::args::Args::parse(raw).map_err(ctx)?;
            Arc::new(elasticquota::ElasticQuota { args })
        }
        "Coscheduling" => Arc::new(coscheduling::Coscheduling::new(raw).map_err(ctx)?),
        "DeviceShare" => Arc::new(
            deviceshare::DeviceShare::new(strip_meta(args(name, raw)?))
                .map_err(ctx)?
                .with_adaption(gates.on(crate::scheduler::features::DEVICE_PLUGIN_ADAPTION)),
        ),
        "DefaultPreemption" => {
            let _: WithMeta<PreemptionArgs> = args(name, raw)?;
            Arc::new(preemption::DefaultPreemption)
        }
        "PodTopologySpread" => {
            Arc::new(spread::PodTopologySpread::new(strip_meta(args(name, raw)?)).map_err(ctx)?)
        }
        "InterPodAffinity" => {
            let a: InterPodArgs = strip_meta(args(name, raw)?);
            Arc::new(interpod::InterPodAffinity {
                ignore_existing_preferred: a.ignore_preferred_terms_of_existing_pods,
                hard_weight: a.hard_pod_affinity_weight,
            })
        }
        "VolumeBinding" => Arc::new(
            volumes::binding::VolumeBinding::new(strip_meta(args(name, raw)?)).map_err(ctx)?,
        ),
        "VolumeZone" => Arc::new(volumes::zone::VolumeZone),
        "ImageLocality" => Arc::new(image::ImageLocality),
        "SchedulingHint" => {
            Arc::new(hint::SchedulingHint::new(strip_meta(args(name, raw)?)).map_err(ctx)?)
        }
        "NodeResourcesFitPlus" => Arc::new(fitplus::NodeResourcesFitPlus {
            args: strip_meta(args(name, raw)?),
        }),
        "ScarceResourceAvoidance" => Arc::new(scarce::ScarceResourceAvoidance {
            args: strip_meta(args(name, raw)?),
        }),
        "NodeVolumeLimits" => Arc::new(volumes::limits::NodeVolumeLimits),
        "VolumeRestrictions" => Arc::new(volumes::restrictions::VolumeRestrictions),
        n if NOT_YET.contains(&n) => {
            return Err(FieldError::whole(format!(
                "plugin {n} is not implemented by koord yet; disable it"
            )));
        }
        n => return Err(FieldError::whole(format!("unknown plugin {n:?}"))),
    })
}

/// `InterPodAffinityArgs`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InterPodArgs {
    #[serde(default)]
    ignore_preferred_terms_of_existing_pods: bool,
    #[serde(default = "one", deserialize_with = "hard_weight")]
    hard_pod_affinity_weight: i64,
}

fn one() -> i64 {
    1
}

/// kube's `ValidateInterPodAffinityArgs`: the weight lies in [0, 100].
fn hard_weight<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = i64::deserialize(d)?;
    if (0..=100).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "hardPodAffinityWeight: Invalid value: {v}: not in valid range [0-100]"
        )))
    }
}

/// `ReservationArgs`: accepted with Koordinator's fields; koord reads the ignored resources
/// and `preAllocationConfig` here, `resyncIntervalSeconds`, `gcDurationSeconds` and `disableGarbageCollection` in its
/// reservation controller, and examines every node.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct ReservationArgs {
    enable_preemption: Option<bool>,
    min_candidate_nodes_percentage: Option<i32>,
    min_candidate_nodes_absolute: Option<i32>,
    controller_workers: Option<i32>,
    gc_duration_seconds: Option<i64>,
    gc_interval_seconds: Option<i64>,
    disable_garbage_collection: Option<bool>,
    resync_interval_seconds: Option<i64>,
    ignored_resources: Option<Vec<String>>,
    ignored_resource_groups: Option<Vec<String>>,
    pre_allocation_config: Option<reservation::pre_allocation::Config>,
    reservation_selector_index: Option<crate::scheduler::model::reservation_index::IndexArgs>,
}

impl ReservationArgs {
    /// Koordinator's `ValidateReservationArgs` for the ignored resources: extended resource
    /// names only, and groups usable as an extended-resource prefix.
    fn ignored(&self) -> Result<reservation_model::IgnoredResources, FieldError> {
        let names = self.ignored_resources.clone().unwrap_or_default();
        for (i, n) in names.iter().enumerate() {
            if !is_extended_resource(n) {
                return Err(FieldError::new(
                    format!("ignoredResources[{i}]"),
                    format!(
                        "Invalid value: {n:?}: must be an extended resource name (e.g. example.com/gpu); native resources cannot be ignored"
                    ),
                ));
            }
        }
        let groups = self.ignored_resource_groups.clone().unwrap_or_default();
        for (i, g) in groups.iter().enumerate() {
            let why = if g.contains('/') {
                "resource group name can't contain '/'"
            } else if !is_extended_resource(&format!("{g}/x")) {
                "must be usable as an extended resource prefix (a valid DNS subdomain and not the reserved \"kubernetes.io\" namespace)"
            } else {
                continue;
            };
            return Err(FieldError::new(
                format!("ignoredResourceGroups[{i}]"),
                format!("Invalid value: {g:?}: {why}"),
            ));
        }
        Ok(reservation_model::IgnoredResources { names, groups })
    }
}

/// kube's `IsExtendedResourceName`: a qualified name outside the `kubernetes.io` namespace
/// (and not a `requests.` quota name).
fn is_extended_resource(name: &str) -> bool {
    let Some((prefix, rest)) = name.split_once('/') else {
        return false;
    };
    let native = prefix == "kubernetes.io" || prefix.ends_with(".kubernetes.io");
    let dns = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    };
    let part = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    !native && !name.starts_with("requests.") && dns(prefix) && part(rest)
}

/// `DefaultPreemptionArgs`: candidate sampling knobs; koord examines every node.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct PreemptionArgs {
    min_candidate_nodes_percentage: Option<i32>,
    min_candidate_nodes_absolute: Option<i32>,
}

/// A plugin's args without `apiVersion`/`kind`; the defaults when absent.
pub(crate) fn plain_args<T: DeserializeOwned + Default>(
    v: Option<&Value>,
) -> Result<T, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value::<WithMeta<T>>(v.clone())
            .map(strip_meta)
            .map_err(|e| FieldError::whole(e.to_string())),
    }
}

/// Args documents may carry `apiVersion`/`kind`; the upstream arg types here do not.
fn strip_meta<T>(t: WithMeta<T>) -> T {
    t.inner
}

#[derive(Default)]
struct WithMeta<T> {
    inner: T,
}

impl<'de, T: DeserializeOwned + Default> serde::Deserialize<'de> for WithMeta<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut v = Value::deserialize(d)?;
        if let Some(m) = v.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        let inner = if v.is_null() {
            T::default()
        } else {
            serde_json::from_value(v).map_err(serde::de::Error::custom)?
        };
        Ok(WithMeta { inner })
    }
}
