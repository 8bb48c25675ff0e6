//! The `koordinator-system/slo-controller-config` ConfigMap: typed keys with Koordinator's
//! defaults, validation and JSON-overlay layering (cluster → node). Shared by the manager's
//! controllers, its ConfigMap webhook and `koord explain`.

pub mod colocation;
pub mod normalization;
pub mod strategies;
pub mod validate;

#[cfg(test)]
mod tests;

use crate::api::field::FieldError;
use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use colocation::{CalculatePolicy, ColocationCfg, ColocationStrategy};
pub use strategies::{HostApplicationCfg, StrategyCfg};

use crate::api::slo::nodeslo::{
    CPUBurstStrategy, ResourceQOSStrategy, ResourceThresholdStrategy, SystemStrategy,
};

pub const DEFAULT_NAMESPACE: &str = "koordinator-system";
pub const DEFAULT_NAME: &str = "slo-controller-config";

pub const KEY_COLOCATION: &str = "colocation-config";
pub const KEY_THRESHOLD: &str = "resource-threshold-config";
pub const KEY_QOS: &str = "resource-qos-config";
pub const KEY_CPU_BURST: &str = "cpu-burst-config";
pub const KEY_SYSTEM: &str = "system-config";
pub const KEY_HOST_APPLICATION: &str = "host-application-config";

/// Event reasons Koordinator emits on the ConfigMap.
pub const REASON_COLOCATION_FAILED: &str = "ColocationCfgUnmarshalFailed";
pub const REASON_SLO_FAILED: &str = "SLOCfgUnmarshalFailed";
pub const REASON_CPU_NORMALIZATION_FAILED: &str = "CPUNormalizationCfgUnmarshalFailed";
pub const REASON_AMPLIFICATION_FAILED: &str = "ResourceAmplificationCfgUnmarshalFailed";

/// Koordinator's JSON overlay (`MergeCfg`): present scalars replace, objects merge
/// recursively, arrays are replaced wholesale.
pub fn overlay<T: Serialize + DeserializeOwned + Clone>(base: &T, over: &T) -> T {
    let (Ok(mut b), Ok(o)) = (serde_json::to_value(base), serde_json::to_value(over)) else {
        return base.clone();
    };
    merge_value(&mut b, o);
    serde_json::from_value(b).unwrap_or_else(|_| base.clone())
}

fn merge_value(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    continue;
                }
                match b.get_mut(&k) {
                    Some(slot) => merge_value(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// One key that failed to parse or validate; the previous value of that key is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyError {
    pub key: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// Everything the manager derives from the ConfigMap.
#[derive(Debug, Clone, PartialEq)]
pub struct SloConfig {
    pub colocation: ColocationCfg,
    pub threshold: StrategyCfg<ResourceThresholdStrategy>,
    pub qos: StrategyCfg<ResourceQOSStrategy>,
    pub cpu_burst: StrategyCfg<CPUBurstStrategy>,
    pub system: StrategyCfg<SystemStrategy>,
    pub host_applications: HostApplicationCfg,
    /// CPUNormalization and ResourceAmplification (the NodeResource controller's plugins).
    pub cpu_normalization: normalization::CPUNormalizationCfg,
    pub amplification: normalization::ResourceAmplificationCfg,
    /// The ConfigMap was absent (colocation is then off).
    pub missing: bool,
}

impl Default for SloConfig {
    fn default() -> Self {
        SloConfig {
            colocation: ColocationCfg::defaults(),
            threshold: StrategyCfg::merged(
                StrategyCfg::default(),
                &strategies::default_threshold(),
            ),
            qos: StrategyCfg::merged(StrategyCfg::default(), &strategies::default_qos()),
            cpu_burst: StrategyCfg::merged(
                StrategyCfg::default(),
                &strategies::default_cpu_burst(),
            ),
            system: StrategyCfg::merged(StrategyCfg::default(), &strategies::default_system()),
            host_applications: HostApplicationCfg::default(),
            cpu_normalization: normalization::NodeScoped::merged(
                Default::default(),
                &normalization::default_cpu_normalization(),
            ),
            amplification: Default::default(),
            missing: true,
        }
    }
}

fn parse_key<T: DeserializeOwned + Default>(
    data: &BTreeMap<String, String>,
    key: &'static str,
) -> Result<Option<T>, FieldError> {
    match data.get(key).map(|s| s.trim()) {
        None | Some("") => Ok(None),
        Some(raw) => serde_json::from_str(raw)
            .map(Some)
            .map_err(|e| FieldError::whole(e.to_string())),
    }
}

impl SloConfig {
    /// Parses the ConfigMap's data. A key that fails keeps its value from `previous`
    /// and is reported; a missing key takes the defaults.
    pub fn parse(
        data: Option<&BTreeMap<String, String>>,
        previous: &SloConfig,
    ) -> (SloConfig, Vec<KeyError>) {
        let Some(data) = data else {
            return (SloConfig::default(), Vec::new());
        };
        let mut errors = Vec::new();
        let mut fail = |key, reason, e: FieldError| {
            errors.push(KeyError {
                key,
                reason,
                message: e.to_string(),
            })
        };
        let colocation = match parse_key::<ColocationCfg>(data, KEY_COLOCATION)
            .and_then(|user| ColocationCfg::from_user(user.unwrap_or_default()))
        {
            Ok(c) => c,
            Err(e) => {
                fail(KEY_COLOCATION, REASON_COLOCATION_FAILED, e);
                previous.colocation.clone()
            }
        };
        // A strategy key with a value out of Koordinator's ranges is refused whole (as the
        // webhook refuses it), so a config written while no webhook ran never reaches a
        // NodeSLO. Colocation node entries are checked one by one by `from_user`.
        let in_range = |key: &str| {
            let raw = data.get(key).map(|s| s.trim()).unwrap_or_default();
            validate::ranges(key, raw)
        };
        macro_rules! strategy {
            ($key:expr, $field:ident, $default:expr) => {
                match in_range($key).and_then(|_| parse_key(data, $key)) {
                    Ok(user) => StrategyCfg::merged(user.unwrap_or_default(), &$default),
                    Err(e) => {
                        fail($key, REASON_SLO_FAILED, e);
                        previous.$field.clone()
                    }
                }
            };
        }
        let threshold = strategy!(KEY_THRESHOLD, threshold, strategies::default_threshold());
        let qos = strategy!(KEY_QOS, qos, strategies::default_qos());
        let cpu_burst = strategy!(KEY_CPU_BURST, cpu_burst, strategies::default_cpu_burst());
        let system = strategy!(KEY_SYSTEM, system, strategies::default_system());
        let host_applications = match parse_key(data, KEY_HOST_APPLICATION) {
            Ok(h) => h.unwrap_or_default(),
            Err(e) => {
                fail(KEY_HOST_APPLICATION, REASON_SLO_FAILED, e);
                previous.host_applications.clone()
            }
        };
        use normalization::{KEY_CPU_NORMALIZATION, KEY_RESOURCE_AMPLIFICATION, NodeScoped};
        let cpu_normalization = match parse_key(data, KEY_CPU_NORMALIZATION) {
            Ok(user) => NodeScoped::merged(
                user.unwrap_or_default(),
                &normalization::default_cpu_normalization(),
            ),
            Err(e) => {
                fail(KEY_CPU_NORMALIZATION, REASON_CPU_NORMALIZATION_FAILED, e);
                previous.cpu_normalization.clone()
            }
        };
        let amplification = match parse_key(data, KEY_RESOURCE_AMPLIFICATION) {
            Ok(user) => NodeScoped::merged(user.unwrap_or_default(), &Default::default()),
            Err(e) => {
                fail(KEY_RESOURCE_AMPLIFICATION, REASON_AMPLIFICATION_FAILED, e);
                previous.amplification.clone()
            }
        };
        let cfg = SloConfig {
            colocation,
            threshold,
            qos,
            cpu_burst,
            system,
            host_applications,
            cpu_normalization,
            amplification,
            missing: false,
        };
        (cfg, errors)
    }
}
