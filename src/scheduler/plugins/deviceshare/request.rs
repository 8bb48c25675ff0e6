//! A pod's device request, normalised as Koordinator does (`utils.go`,
//! `devicehandler_gpu.go`): which GPU-family resources may be combined, what they mean
//! per GPU, and how many devices of each type the pod needs.

use super::error::DeviceError;
use std::collections::BTreeMap;

use crate::api::extension::resources::{
    FPGA, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED, KOORD_GPU, NPU_CORE, NPU_CPU,
    NPU_DVPP, NVIDIA_GPU, RDMA,
};
use crate::api::pod::Amounts;
use crate::scheduler::model::devices::DevRes;

pub const AMD_GPU: &str = "amd.com/gpu";
pub const HYGON_DCU: &str = "dcu.com/gpu";
/// `ValidateDeviceRequest`'s refusal of a combination, naming the requested resources.
/// (Sorted: Go prints them in map order.)
fn invalid(names: &[&str]) -> DeviceError {
    let mut sorted: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    sorted.sort();
    DeviceError::InvalidRequests(sorted)
}

/// `ValidateDeviceRequest`'s refusal of a percentage resource's amount.
fn invalid_unit(name: &str, v: i64) -> DeviceError {
    DeviceError::InvalidUnit {
        name: name.to_string(),
        value: v,
    }
}

/// The GPU-family names, each with its flag bit.
const GPU_FAMILY: [&str; 11] = [
    NVIDIA_GPU,
    AMD_GPU,
    HYGON_DCU,
    KOORD_GPU,
    GPU_SHARED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    NPU_CORE,
    NPU_CPU,
    NPU_DVPP,
];

fn flag(name: &str) -> u32 {
    GPU_FAMILY
        .iter()
        .position(|n| *n == name)
        .map_or(0, |i| 1 << i)
}

fn flags(names: &[&str]) -> u32 {
    names.iter().map(|n| flag(n)).sum()
}

/// One device type's need: the amount per device, and how many devices.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    pub per: DevRes,
    pub count: usize,
}

/// Device type → need; `shared_gpu` (Koordinator's `gpuShared`: less than a whole GPU's
/// memory per GPU) is what `gpuShareUnsupportedModels` refuses.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Request {
    pub by_type: BTreeMap<String, Need>,
    pub shared_gpu: bool,
}

/// `≤ 100`, or a whole number of devices.
fn percentage(v: i64) -> bool {
    v <= 100 || v % 100 == 0
}

fn multiple_of(v: Option<i64>, k: i64) -> bool {
    v.is_none_or(|v| v % k == 0 && v / k <= 100)
}

/// The GPU request in per-pod terms, or an error for a combination Koordinator refuses.
fn gpu_total(req: &Amounts) -> Result<Option<DevRes>, DeviceError> {
    let get = |n: &str| req.get(n).copied().filter(|v| *v > 0);
    let present: Vec<&str> = GPU_FAMILY
        .iter()
        .copied()
        .filter(|n| get(n).is_some())
        .collect();
    if present.is_empty() {
        return Ok(None);
    }
    let bits = flags(&present);
    let whole = |n: i64| {
        DevRes::from([
            (GPU_CORE.into(), n * 100),
            (GPU_MEMORY_RATIO.into(), n * 100),
        ])
    };
    let given = || -> DevRes {
        present
            .iter()
            .filter_map(|n| Some((n.to_string(), get(n)?)))
            .collect()
    };
    let pct =
        || get(GPU_CORE).is_none_or(percentage) && get(GPU_MEMORY_RATIO).is_none_or(percentage);
    let out = match bits {
        b if b == flag(NVIDIA_GPU) || b == flag(AMD_GPU) || b == flag(HYGON_DCU) => {
            whole(get(present[0]).unwrap_or(0))
        }
        b if b == flag(KOORD_GPU) => {
            let p = get(KOORD_GPU).unwrap_or(0);
            if !percentage(p) {
                return Err(invalid_unit(KOORD_GPU, p));
            }
            DevRes::from([(GPU_CORE.into(), p), (GPU_MEMORY_RATIO.into(), p)])
        }
        b if [
            flags(&[GPU_MEMORY]),
            flags(&[GPU_MEMORY_RATIO]),
            flags(&[GPU_CORE, GPU_MEMORY]),
            flags(&[GPU_CORE, GPU_MEMORY_RATIO]),
            flags(&[NPU_CORE, GPU_MEMORY_RATIO]),
        ]
        .contains(&b) =>
        {
            if !pct() {
                return Err(invalid(&present));
            }
            given()
        }
        b if b & flag(GPU_SHARED) != 0
            && [
                flags(&[GPU_SHARED, GPU_MEMORY]),
                flags(&[GPU_SHARED, GPU_MEMORY_RATIO]),
                flags(&[GPU_SHARED, GPU_CORE, GPU_MEMORY]),
                flags(&[GPU_SHARED, GPU_CORE, GPU_MEMORY_RATIO]),
            ]
            .contains(&b) =>
        {
            let k = get(GPU_SHARED).unwrap_or(1);
            if !multiple_of(get(GPU_CORE), k) || !multiple_of(get(GPU_MEMORY_RATIO), k) {
                return Err(invalid(&present));
            }
            given()
        }
        b if b == flags(&[GPU_SHARED, NPU_CORE, NPU_CPU, GPU_MEMORY])
            || b == flags(&[GPU_SHARED, NPU_CORE, NPU_CPU, NPU_DVPP, GPU_MEMORY]) =>
        {
            if get(GPU_SHARED).unwrap_or(0) > 1 || get(NPU_DVPP).is_some_and(|v| v > 100) {
                return Err(invalid(&present));
            }
            given()
        }
        _ => return Err(invalid(&present)),
    };
    Ok(Some(out))
}

/// Splits a per-pod total over `count` devices.
fn split(total: &DevRes, count: usize) -> DevRes {
    total
        .iter()
        .filter(|(k, _)| k.as_str() != GPU_SHARED)
        .map(|(k, v)| (k.clone(), v / count.max(1) as i64))
        .collect()
}

/// The pod's device request; `None` when it asks for no device.
pub fn of_requests(req: &Amounts) -> Result<Option<Request>, DeviceError> {
    let mut out = Request::default();
    if let Some(total) = gpu_total(req)? {
        let shared = total.get(GPU_SHARED).copied().unwrap_or(0);
        let ratio = total.get(GPU_MEMORY_RATIO).copied().unwrap_or(0);
        let count = if shared > 0 {
            shared as usize
        } else if ratio > 100 && ratio % 100 == 0 {
            (ratio / 100) as usize
        } else {
            1
        };
        let per = split(&total, count);
        let per_ratio = per.get(GPU_MEMORY_RATIO).copied();
        out.shared_gpu = per_ratio.is_some_and(|r| r < 100)
            || (per_ratio.is_none() && per.contains_key(GPU_MEMORY));
        out.by_type.insert("gpu".into(), Need { per, count });
    }
    for (kind, name) in [("rdma", RDMA), ("fpga", FPGA)] {
        let Some(v) = req.get(name).copied().filter(|v| *v > 0) else {
            continue;
        };
        if !percentage(v) {
            return Err(invalid_unit(name, v));
        }
        let count = if v > 100 { (v / 100) as usize } else { 1 };
        let per = DevRes::from([(name.to_string(), v / count as i64)]);
        out.by_type.insert(kind.into(), Need { per, count });
    }
    Ok((!out.by_type.is_empty()).then_some(out))
}

/// `scheduling.koordinator.sh/device-joint-allocate`: allocate the secondary types on the
/// primary's PCIe switches (`requiredScope: SamePCIe` makes that a rule).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JointAllocate {
    #[serde(default)]
    pub device_types: Vec<String>,
    #[serde(default)]
    pub required_scope: Option<String>,
}

pub const ANNOTATION_JOINT_ALLOCATE: &str = "scheduling.koordinator.sh/device-joint-allocate";

impl JointAllocate {
    pub fn of(pod: &k8s_openapi::api::core::v1::Pod) -> Result<Option<JointAllocate>, DeviceError> {
        let Some(raw) = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_JOINT_ALLOCATE))
        else {
            return Ok(None);
        };
        serde_json::from_str(raw)
            .map(Some)
            .map_err(|e| DeviceError::Annotation {
                key: ANNOTATION_JOINT_ALLOCATE,
                reason: e.to_string(),
            })
    }

    pub fn same_pcie(&self) -> bool {
        self.required_scope.as_deref() == Some("SamePCIe")
    }
}
