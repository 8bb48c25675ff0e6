//! What DeviceShare knows about a node's devices (`device_cache.go`): each healthy device's
//! total from the node's `Device`, and what pods hold, read back from their
//! `scheduling.koordinator.sh/device-allocated` annotations — so a restarted scheduler
//! rebuilds every allocation from the pods alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::extension::keys::{ANNOTATION_DEVICE_ALLOCATED, LABEL_GPU_MODEL, LABEL_GPU_VENDOR};
use crate::api::extension::resources::GPU_MEMORY;
use crate::api::quantity::{bytes_binary, from_int, q_value};
use crate::api::scheduling::device::Device;

/// Resource name → integer amount (percent units, bytes for gpu-memory).
pub type DevRes = BTreeMap<String, i64>;

/// One device of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Dev {
    pub minor: i32,
    pub uuid: String,
    pub total: DevRes,
    pub numa: Option<i32>,
    /// The Device gives this device a topology whose NUMA node is -1 (unknown): NUMA
    /// alignment does not exclude it, as Koordinator.
    pub numa_unknown: bool,
    pub pcie: Option<String>,
    pub bus_id: Option<String>,
    /// The Device's labels for this device (what `device-allocate-hint` selectors read).
    pub labels: BTreeMap<String, String>,
    /// Its virtual function groups.
    pub vf_groups: Vec<VfGroup>,
}

/// A virtual function group: its labels and its VFs (bus id, minor).
pub type VfGroup = (BTreeMap<String, String>, Vec<(String, i32)>);

/// A node's healthy devices by type (`gpu`, `rdma`, `fpga`), ordered by minor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeDevices {
    pub by_type: BTreeMap<String, Vec<Dev>>,
    /// The Device's `node.koordinator.sh/gpu-vendor` and `gpu-model` labels.
    pub vendor: String,
    pub model: String,
}

impl NodeDevices {
    /// Unhealthy devices contribute nothing (upstream gives them empty resources).
    pub fn from_device(d: &Device) -> NodeDevices {
        let mut by_type: BTreeMap<String, Vec<Dev>> = BTreeMap::new();
        for info in d.spec.devices.iter().flatten() {
            let (Some(kind), Some(minor)) = (info.type_.clone(), info.minor) else {
                continue;
            };
            if !info.health {
                continue;
            }
            let total: DevRes = info
                .resources
                .iter()
                .flatten()
                .map(|(k, q)| (k.clone(), q_value(q)))
                .collect();
            let vf_groups = info
                .vf_groups
                .iter()
                .flatten()
                .map(|g| {
                    let vfs = g
                        .vfs
                        .iter()
                        .flatten()
                        .filter_map(|vf| Some((vf.bus_id.clone()?, vf.minor)))
                        .collect();
                    (g.labels.clone().unwrap_or_default(), vfs)
                })
                .collect();
            let t = info.topology.as_ref();
            by_type.entry(kind).or_default().push(Dev {
                minor,
                uuid: info.uuid.clone().unwrap_or_default(),
                total,
                numa: t.map(|t| t.node_id).filter(|n| *n >= 0),
                numa_unknown: t.is_some_and(|t| t.node_id == -1),
                pcie: t.map(|t| t.pcie_id.clone()).filter(|p| !p.is_empty()),
                bus_id: t.and_then(|t| t.bus_id.clone()),
                labels: info.labels.clone().unwrap_or_default(),
                vf_groups,
            });
        }
        for devs in by_type.values_mut() {
            devs.sort_by_key(|d| d.minor);
        }
        let label = |k: &str| {
            let labels = d.metadata.labels.as_ref();
            labels.and_then(|l| l.get(k)).cloned().unwrap_or_default()
        };
        NodeDevices {
            by_type,
            vendor: label(LABEL_GPU_VENDOR),
            model: label(LABEL_GPU_MODEL),
        }
    }

    pub fn get(&self, kind: &str, minor: i32) -> Option<&Dev> {
        self.by_type.get(kind)?.iter().find(|d| d.minor == minor)
    }
}

/// One allocated device, as the annotation carries it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Granted {
    pub minor: i32,
    pub id: String,
    pub resources: DevRes,
    pub vfs: Vec<(String, i32)>,
    /// The GPU shared-resource template the share was cut by (`gpuSharedResourceTemplate`).
    pub template: Option<String>,
}

/// Device type → devices given to one pod or reservation.
pub type Allocations = BTreeMap<String, Vec<Granted>>;

#[derive(Serialize, Deserialize, Default)]
struct WireEntry {
    #[serde(default)]
    minor: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    id: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    resources: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    extension: Option<Value>,
}

/// Parses `device-allocated`; malformed text (from outside) is no allocation.
pub fn parse(raw: &str) -> Option<Allocations> {
    let wire: BTreeMap<String, Vec<WireEntry>> = serde_json::from_str(raw).ok()?;
    let out = wire
        .into_iter()
        .map(|(kind, entries)| {
            let granted = entries
                .into_iter()
                .map(|e| Granted {
                    minor: e.minor,
                    id: e.id,
                    resources: {
                        // Allocations written with deprecated names (`TransformDeprecatedDeviceResources`).
                        let mut r: DevRes = e
                            .resources
                            .iter()
                            .map(|(k, q)| (k.clone(), q_value(q)))
                            .collect();
                        super::transform::rename_deprecated(&mut r);
                        r
                    },
                    vfs: e
                        .extension
                        .as_ref()
                        .and_then(|x| x.get("vfs"))
                        .and_then(Value::as_array)
                        .map(|vfs| {
                            vfs.iter()
                                .filter_map(|v| {
                                    let bus = v.get("busID")?.as_str()?.to_string();
                                    Some((bus, v.get("minor")?.as_i64()? as i32))
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    template: e
                        .extension
                        .as_ref()
                        .and_then(|x| x.get("gpuSharedResourceTemplate"))
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
                .collect();
            (kind, granted)
        })
        .collect();
    Some(out)
}

/// `DeviceAllocationExtension`: the VFs and the shared-resource template, when any.
fn extension(g: &Granted) -> Option<Value> {
    let mut x = serde_json::Map::new();
    if !g.vfs.is_empty() {
        let vfs: Vec<Value> = g
            .vfs
            .iter()
            .map(|(bus, minor)| serde_json::json!({"busID": bus, "minor": minor}))
            .collect();
        x.insert("vfs".into(), vfs.into());
    }
    if let Some(t) = &g.template {
        x.insert("gpuSharedResourceTemplate".into(), t.clone().into());
    }
    (!x.is_empty()).then_some(Value::Object(x))
}

/// The annotation value, in Koordinator's shape (`gpu-memory` as a binary quantity).
pub fn format(a: &Allocations) -> String {
    let wire: BTreeMap<&str, Vec<WireEntry>> = a
        .iter()
        .map(|(kind, granted)| {
            let entries = granted
                .iter()
                .map(|g| WireEntry {
                    minor: g.minor,
                    id: g.id.clone(),
                    resources: g
                        .resources
                        .iter()
                        .map(|(k, v)| {
                            let q = if k == GPU_MEMORY {
                                bytes_binary(*v)
                            } else {
                                from_int(*v)
                            };
                            (k.clone(), q)
                        })
                        .collect(),
                    extension: extension(g),
                })
                .collect();
            (kind.as_str(), entries)
        })
        .collect();
    serde_json::to_string(&wire).unwrap_or_default()
}

/// The allocation a pod (or a reservation's reserve pod) carries; parsed once, when the
/// pod enters the cache (`PodInfo::devices`).
pub fn of_annotation(pod: &k8s_openapi::api::core::v1::Pod) -> Option<Allocations> {
    let raw = pod
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_DEVICE_ALLOCATED)?;
    parse(raw)
}

/// (type, minor) → amounts held.
pub type Used = BTreeMap<(String, i32), DevRes>;
