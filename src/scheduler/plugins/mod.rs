//! The plugin registry: every name the configuration may use, one `match` to build it.

pub mod affinity;
pub mod basic;
pub mod loadaware;
pub mod resources;
pub mod taint;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::framework::Plugin;

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
];

/// Known to Koordinator / kube-scheduler but not built into koord yet: naming one in a
/// configuration is an error that says so (not a silent no-op).
pub const NOT_YET: &[&str] = &[
    "Reservation",
    "NodeNUMAResource",
    "DeviceShare",
    "Coscheduling",
    "ElasticQuota",
    "SchedulingHint",
    "DefaultPreBind",
    "NodeResourcesFitPlus",
    "ScarceResourceAvoidance",
    "InterPodAffinity",
    "PodTopologySpread",
    "DefaultPreemption",
    "ImageLocality",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "DynamicResources",
];

fn args<T: DeserializeOwned + Default>(name: &str, v: Option<&Value>) -> Result<T, String> {
    match v {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => {
            serde_json::from_value(v.clone()).map_err(|e| format!("plugin {name}: args: {e}"))
        }
    }
}

/// Builds plugin `name` with its `pluginConfig` args.
pub fn build(name: &str, raw: Option<&Value>) -> Result<Arc<dyn Plugin>, String> {
    let ctx = |e: String| format!("plugin {name}: args: {e}");
    Ok(match name {
        "PrioritySort" => Arc::new(basic::PrioritySort),
        "SchedulingGates" => Arc::new(basic::SchedulingGates),
        "NodeUnschedulable" => Arc::new(basic::NodeUnschedulable),
        "NodeName" => Arc::new(basic::NodeName),
        "NodePorts" => Arc::new(basic::NodePorts),
        "TaintToleration" => Arc::new(taint::TaintToleration),
        "NodeAffinity" => Arc::new(affinity::NodeAffinity),
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
        n if NOT_YET.contains(&n) => {
            return Err(format!(
                "plugin {n} is not implemented by koord yet; disable it"
            ));
        }
        n => return Err(format!("unknown plugin {n:?}")),
    })
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
