//! `fillPodDevicesAllocatedByKoord`: the devices koord's scheduler allocated, added to the
//! kubelet's answer on each pod's first container.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use super::pb;
use crate::api::extension::keys::ANNOTATION_DEVICE_ALLOCATED;

/// The resource name each allocated device type is reported under.
fn resource_name(device_type: &str) -> Option<&'static str> {
    match device_type {
        "gpu" => Some("nvidia.com/gpu"),
        "rdma" => Some("koordinator.sh/rdma"),
        _ => None,
    }
}

/// (resource name, device ids) per device type of the annotation: each device's `id`, or,
/// with an `extension`, its virtual functions' bus ids.
pub fn allocated_devices(annotation: &str) -> Option<Vec<(String, Vec<String>)>> {
    let v: serde_json::Value = serde_json::from_str(annotation).ok()?;
    let mut out = Vec::new();
    for (device_type, devices) in v.as_object()? {
        let Some(name) = resource_name(device_type) else {
            continue;
        };
        let mut ids = Vec::new();
        for d in devices.as_array().into_iter().flatten() {
            match d.get("extension") {
                Some(ext) if !ext.is_null() => {
                    let vfs = ext.get("vfs").and_then(|v| v.as_array());
                    ids.extend(
                        vfs.into_iter()
                            .flatten()
                            .filter_map(|vf| vf.get("busID")?.as_str().map(str::to_string)),
                    );
                }
                _ => ids.extend(d.get("id").and_then(|i| i.as_str()).map(str::to_string)),
            }
        }
        out.push((name.to_string(), ids));
    }
    Some(out)
}

pub fn fill_pod_devices_allocated_by_koord<'a>(
    answer: &mut pb::ListPodResourcesResponse,
    pods: impl Iterator<Item = &'a Pod>,
) {
    let by_name: HashMap<(&str, &str), &Pod> = pods
        .map(|p| {
            let m = &p.metadata;
            let key = (
                m.namespace.as_deref().unwrap_or(""),
                m.name.as_deref().unwrap_or(""),
            );
            (key, p)
        })
        .collect();
    for pr in &mut answer.pod_resources {
        let Some(first) = pr.containers.first_mut() else {
            continue;
        };
        let Some(pod) = by_name.get(&(pr.namespace.as_str(), pr.name.as_str())) else {
            continue;
        };
        let annotations = pod.metadata.annotations.as_ref();
        let Some(raw) = annotations.and_then(|a| a.get(ANNOTATION_DEVICE_ALLOCATED)) else {
            continue;
        };
        let Some(devices) = allocated_devices(raw) else {
            continue;
        };
        for (resource_name, device_ids) in devices {
            first.devices.push(pb::ContainerDevices {
                resource_name,
                device_ids,
                topology: None,
            });
        }
        first
            .devices
            .sort_by(|a, b| a.resource_name.cmp(&b.resource_name));
    }
}
