//! GPUDeviceResource and RDMADeviceResource (`pkg/slo-controller/noderesource/plugins/
//! {gpudeviceresource,rdmadevicereource}`): the node's device resources are the sums over
//! the healthy devices its `Device` reports, and its GPU labels are the Device's. Without a
//! Device, or without a healthy device of a kind, that kind's resources are removed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use super::prepare::Desired;
use crate::api::extension::keys::{LABEL_GPU_DRIVER_VERSION, LABEL_GPU_MODEL, LABEL_GPU_VENDOR};
use crate::api::extension::resources::{GPU_CORE, GPU_SHARED, KOORD_GPU, RDMA};
use crate::api::quantity::q_value;
use crate::api::scheduling::device::{Device, DeviceInfo};

pub use crate::api::extension::resources::GPU_RESOURCES;

pub const GPU_LABELS: [&str; 3] = [LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION];

/// What the two plugins read: the node's Device and gate `EnableSyncGPUSharedResource`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceInputs<'a> {
    pub device: Option<&'a Device>,
    pub sync_gpu_shared: bool,
}

fn healthy<'a>(d: &'a Device, kind: &'a str) -> impl Iterator<Item = &'a DeviceInfo> + 'a {
    d.spec
        .devices
        .iter()
        .flatten()
        .filter(move |i| i.health && i.type_.as_deref() == Some(kind))
}

/// The device resources the node should carry; a name absent here is removed.
pub fn desired(input: &DeviceInputs) -> Desired {
    let mut out = Desired::new();
    let Some(d) = input.device else {
        return out;
    };
    let gpus: Vec<_> = healthy(d, "gpu").collect();
    if !gpus.is_empty() {
        let mut sums: BTreeMap<&str, i64> = BTreeMap::new();
        for g in &gpus {
            for (name, q) in g.resources.iter().flatten() {
                if let Some(n) = GPU_RESOURCES.iter().find(|n| **n == name) {
                    *sums.entry(n).or_default() += q_value(q);
                }
            }
        }
        let vendor = d
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_GPU_VENDOR));
        if vendor.is_none_or(|v| v.is_empty() || v == "nvidia") {
            sums.insert(KOORD_GPU, sums.get(GPU_CORE).copied().unwrap_or(0));
        }
        if input.sync_gpu_shared {
            sums.insert(GPU_SHARED, gpus.len() as i64 * 100);
        }
        out.extend(sums);
    }
    let pfs = healthy(d, "rdma").count() as i64;
    if pfs > 0 {
        out.insert(RDMA, pfs * 100);
    }
    out
}

/// The GPU labels the node should gain or change (upstream never removes them).
pub fn labels_to_set(input: &DeviceInputs, node: &Node) -> BTreeMap<String, String> {
    let Some(d) = input.device else {
        return BTreeMap::new();
    };
    if healthy(d, "gpu").next().is_none() {
        return BTreeMap::new();
    }
    let have = node.metadata.labels.as_ref();
    let want = d.metadata.labels.as_ref();
    GPU_LABELS
        .iter()
        .filter_map(|k| {
            let v = want?.get(*k)?;
            (have.and_then(|h| h.get(*k)) != Some(v)).then(|| (k.to_string(), v.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extension::resources::{GPU_MEMORY, GPU_MEMORY_RATIO};
    use serde_json::json;

    fn device(vendor: Option<&str>, health: [bool; 3]) -> Device {
        let mut labels = json!({});
        if let Some(v) = vendor {
            labels = json!({LABEL_GPU_VENDOR: v, LABEL_GPU_MODEL: "A100-SXM4-80GB"});
        }
        let gpu = |minor: i32, h: bool| {
            json!({"type": "gpu", "minor": minor, "health": h, "resources": {
                GPU_CORE: "100", GPU_MEMORY: "80Gi", GPU_MEMORY_RATIO: "100"}})
        };
        serde_json::from_value(json!({"metadata": {"name": "n1", "labels": labels},
            "spec": {"devices": [gpu(0, health[0]), gpu(1, health[1]),
                {"type": "rdma", "minor": 0, "health": health[2], "resources": {RDMA: "100"}}]}}))
        .unwrap()
    }

    #[test]
    fn sums_healthy_devices_and_names_koordinator_gpu_for_nvidia() {
        let d = device(Some("nvidia"), [true, false, true]);
        let want = desired(&DeviceInputs {
            device: Some(&d),
            sync_gpu_shared: false,
        });
        assert_eq!(want[GPU_CORE], 100);
        assert_eq!(want[GPU_MEMORY], 80 << 30);
        assert_eq!(want[GPU_MEMORY_RATIO], 100);
        assert_eq!(want[KOORD_GPU], 100);
        assert_eq!(want[RDMA], 100);
        assert!(!want.contains_key(GPU_SHARED), "gate off");
        let shared = desired(&DeviceInputs {
            device: Some(&d),
            sync_gpu_shared: true,
        });
        assert_eq!(shared[GPU_SHARED], 100, "100 per healthy GPU");
    }

    #[test]
    fn other_vendors_get_no_koordinator_gpu_and_nothing_without_health() {
        let d = device(Some("huawei"), [true, true, false]);
        let want = desired(&DeviceInputs {
            device: Some(&d),
            sync_gpu_shared: false,
        });
        assert_eq!(want[GPU_CORE], 200);
        assert!(!want.contains_key(KOORD_GPU) && !want.contains_key(RDMA));
        let sick = device(None, [false, false, false]);
        let none = DeviceInputs {
            device: Some(&sick),
            sync_gpu_shared: true,
        };
        assert!(desired(&none).is_empty());
        assert!(desired(&DeviceInputs::default()).is_empty());
    }

    #[test]
    fn labels_copied_only_when_they_differ() {
        let d = device(Some("nvidia"), [true, true, true]);
        let input = DeviceInputs {
            device: Some(&d),
            sync_gpu_shared: false,
        };
        let mut node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
        let set = labels_to_set(&input, &node);
        assert_eq!(set[LABEL_GPU_VENDOR], "nvidia");
        assert_eq!(set[LABEL_GPU_MODEL], "A100-SXM4-80GB");
        node.metadata.labels = Some(set.into_iter().collect());
        assert!(labels_to_set(&input, &node).is_empty());
    }
}
