//! `scheduling.koordinator.sh/device-allocate-hint` (`apiext.DeviceAllocateHints`): per
//! device type, which devices the pod may get (`selector` on the Device's per-device
//! labels) and, with `vfSelector`, that it needs one of their virtual functions from a VF
//! group those labels select.

use super::error::DeviceError;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::api::selector::Selector;

pub const ANNOTATION_DEVICE_ALLOCATE_HINT: &str = "scheduling.koordinator.sh/device-allocate-hint";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    selector: Option<LabelSelector>,
    #[serde(rename = "vfSelector")]
    vf_selector: Option<LabelSelector>,
    allocate_strategy: Option<String>,
    exclusive_policy: Option<String>,
}

/// One device type's hint, its selectors parsed.
#[derive(Debug, Clone, Default)]
pub struct Hint {
    pub selector: Option<Selector>,
    /// Set: a virtual function must be allocated, from a group this selects.
    pub vf_selector: Option<Selector>,
    /// `allocateStrategy`: `ApplyForAll` (every device of the type the selector picks) or
    /// `RequestsAsCount` (the request is a number of devices); other values do nothing.
    pub strategy: Option<String>,
    /// `exclusivePolicy`: `DeviceLevel` (with RequestsAsCount: whole devices) or
    /// `PCIeLevel` (only devices whose PCIe switch is wholly free).
    pub exclusive: Option<String>,
}

pub const APPLY_FOR_ALL: &str = "ApplyForAll";
pub const REQUESTS_AS_COUNT: &str = "RequestsAsCount";
pub const DEVICE_LEVEL: &str = "DeviceLevel";
pub const PCIE_LEVEL: &str = "PCIeLevel";

impl Hint {
    pub fn is(&self, strategy: &str) -> bool {
        self.strategy.as_deref() == Some(strategy)
    }
}

/// Device type → hint.
pub type Hints = BTreeMap<String, Hint>;

fn parse_selector(
    kind: &str,
    what: &'static str,
    s: Option<&LabelSelector>,
) -> Result<Option<Selector>, DeviceError> {
    s.map(|s| {
        Selector::from_label_selector(s).map_err(|e| DeviceError::Hint {
            what,
            kind: kind.to_string(),
            reason: e.to_string(),
        })
    })
    .transpose()
}

/// The pod's hints (none without the annotation); a malformed one is an error naming it.
pub fn of(pod: &k8s_openapi::api::core::v1::Pod) -> Result<Hints, DeviceError> {
    let Some(raw) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DEVICE_ALLOCATE_HINT))
    else {
        return Ok(Hints::new());
    };
    let wire: BTreeMap<String, Wire> =
        serde_json::from_str(raw).map_err(|e| DeviceError::Annotation {
            key: ANNOTATION_DEVICE_ALLOCATE_HINT,
            reason: e.to_string(),
        })?;
    wire.into_iter()
        .map(|(kind, w)| {
            let selector = parse_selector(&kind, "Selector", w.selector.as_ref())?;
            let vf_selector = parse_selector(&kind, "VFSelector", w.vf_selector.as_ref())?;
            Ok((
                kind,
                Hint {
                    selector,
                    vf_selector,
                    strategy: w.allocate_strategy,
                    exclusive: w.exclusive_policy,
                },
            ))
        })
        .collect()
}
