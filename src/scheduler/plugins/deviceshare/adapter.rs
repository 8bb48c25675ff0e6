//! DevicePluginAdaption (Koordinator's alpha gate of that name, off by default): the devices
//! DeviceShare chose, written also in the forms third-party device plugins read, so their
//! plugins allocate what the scheduler decided without modification
//! (`device_plugin_adapter.go`). Every pod gets its bind time; a GPU pod its minors; Huawei,
//! Cambricon and MetaX pods their vendor's annotations. Cambricon's and MetaX's plugins find
//! their pod by a lock on the Node, so only one such pod per node may be between binding and
//! the plugin's allocation: the lock names the pod and expires after five minutes or when
//! that pod is gone.

use std::collections::BTreeMap;

use crate::api::extension::resources::{GPU_CORE, GPU_MEMORY};
use crate::scheduler::model::devices::{Allocations, Granted};

pub const ANNOTATION_BIND_TIMESTAMP: &str = "scheduling.koordinator.sh/bind-timestamp";
pub const ANNOTATION_GPU_MINORS: &str = "scheduling.koordinator.sh/gpu-minors";
pub const ANNOTATION_HAMI_LOCK: &str = "hami.io/mutex.lock";
pub const ANNOTATION_PREDICATE_TIME: &str = "predicate-time";
pub const ANNOTATION_HUAWEI_NPU_CORE: &str = "huawei.com/npu-core";
pub const ANNOTATION_HUAWEI_ASCEND310P: &str = "huawei.com/Ascend310P";
// The misspelling is Cambricon's plugin's key.
pub const ANNOTATION_CAMBRICON_DSMLU_ASSIGNED: &str = "CAMBRICON_DSMLU_ASSIGHED";
pub const ANNOTATION_CAMBRICON_DSMLU_PROFILE: &str = "CAMBRICON_DSMLU_PROFILE";
pub const ANNOTATION_CAMBRICON_DSMLU_LOCK: &str = "cambricon.com/dsmlu.lock";
pub const ANNOTATION_METAX_GPU_DEVICES_ALLOCATED: &str = "metax-tech.com/gpu-devices-allocated";
pub const LABEL_GPU_ISOLATION_PROVIDER: &str = "koordinator.sh/gpu-isolation-provider";
pub const LABEL_HAMI_VGPU_NODE_NAME: &str = "hami.io/vgpu-node";
const HAMI_CORE: &str = "HAMi-core";
const ASCEND_310P_DUO: &str = "Ascend-310P3-300I-DUO";

/// Cambricon's minimal dynamic sMLU memory unit (the plugin's `min-dsmlu-unit`).
const CAMBRICON_VMEMORY_UNIT: i64 = 256 * 1024 * 1024;
/// MetaX's minimal sGPU memory unit.
const METAX_VRAM_UNIT: i64 = 1024 * 1024;
/// A lock older than this is taken over (its plugin never released it).
pub const NODE_LOCK_TIMEOUT_MS: i64 = 5 * 60 * 1000;

/// What adaption adds to the pod and its node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Adapted {
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    /// Annotations that carry the bind time in unix nanoseconds, stamped at PreBind.
    pub stamped: Vec<&'static str>,
    /// The Node annotation to set: (key, `<RFC 3339 time>,<namespace>,<name>`).
    pub node_lock: Option<(&'static str, String)>,
}

/// The pod and node adaption is for.
pub struct Target<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub node: &'a str,
    pub node_annotations: &'a BTreeMap<String, String>,
    /// The node's Device's `node.koordinator.sh/gpu-vendor` and `gpu-model` labels.
    pub vendor: &'a str,
    pub model: &'a str,
    pub now_ms: i64,
    /// Whether the pod `namespace/name` still exists (a lock held by a deleted pod is free).
    pub alive: &'a dyn Fn(&str) -> bool,
}

/// Adaption for the devices `allocs` on `t.node`; an error names what the vendor's plugin
/// could not be given (Koordinator fails the pod's PreBind with it).
pub fn adapt(t: &Target, allocs: &Allocations) -> Result<Adapted, String> {
    let mut out = Adapted::default();
    general(&mut out);
    let Some(gpus) = allocs.get("gpu") else {
        return Ok(out);
    };
    general_gpu(&mut out, t, gpus);
    vendor(&mut out, t, gpus).map_err(|e| {
        let v = t.vendor;
        format!("failed to adapt for GPU device plugin of vendor {v:?}: {e}")
    })?;
    Ok(out)
}

/// The vendor's own annotations, and the node lock where its plugin needs one.
fn vendor(out: &mut Adapted, t: &Target, gpus: &[Granted]) -> Result<(), String> {
    let key = match t.vendor {
        "huawei" => return huawei(out, t.model, gpus),
        "cambricon" => {
            cambricon(out, gpus)?;
            ANNOTATION_CAMBRICON_DSMLU_LOCK
        }
        "metax" => {
            metax(out, gpus)?;
            ANNOTATION_HAMI_LOCK
        }
        _ => return Ok(()),
    };
    let value = lock_node(t, key).map_err(|e| format!("failed to lock node: {e}"))?;
    out.node_lock = Some((key, value));
    Ok(())
}

/// PreBind: the pod's annotations and labels, its bind time stamped now.
pub fn write(a: &Adapted, pod: &mut crate::scheduler::framework::PodDraft) {
    let now = bind_timestamp();
    let annotations = pod.annotations_mut();
    annotations.extend(a.annotations.clone());
    for key in &a.stamped {
        annotations.insert(key.to_string(), now.clone());
    }
    if !a.labels.is_empty() {
        let labels = pod
            .get_mut()
            .metadata
            .labels
            .get_or_insert_with(Default::default);
        labels.extend(a.labels.clone());
    }
}

/// Every pod: the bind time, by which custom device plugins tell apart pods bound to one
/// node at once (they cannot read pod annotations from the kubelet).
fn general(out: &mut Adapted) {
    out.stamped.push(ANNOTATION_BIND_TIMESTAMP);
}

/// GPU pods: the minors, for pods to override CUDA images' `NVIDIA_VISIBLE_DEVICES=all`
/// through an env field ref; HAMi-core isolated pods also the node HAMi's monitor expects.
fn general_gpu(out: &mut Adapted, t: &Target, gpus: &[Granted]) {
    out.annotations
        .insert(ANNOTATION_GPU_MINORS.into(), minors(gpus, ""));
    if t.labels
        .get(LABEL_GPU_ISOLATION_PROVIDER)
        .map(String::as_str)
        == Some(HAMI_CORE)
    {
        out.labels
            .insert(LABEL_HAMI_VGPU_NODE_NAME.into(), t.node.to_string());
    }
}

fn huawei(out: &mut Adapted, model: &str, gpus: &[Granted]) -> Result<(), String> {
    out.stamped.push(ANNOTATION_PREDICATE_TIME);
    let (key, value) = match gpus.first() {
        _ if model == ASCEND_310P_DUO => {
            (ANNOTATION_HUAWEI_ASCEND310P, minors(gpus, "Ascend310P-"))
        }
        // A vNPU: the NPU's minor and the template it is cut by.
        Some(Granted {
            minor,
            template: Some(t),
            ..
        }) if !t.is_empty() => (ANNOTATION_HUAWEI_NPU_CORE, format!("{minor}-{t}")),
        _ => (ANNOTATION_HUAWEI_NPU_CORE, minors(gpus, "")),
    };
    out.annotations.insert(key.into(), value);
    Ok(())
}

fn cambricon(out: &mut Adapted, gpus: &[Granted]) -> Result<(), String> {
    let [g] = gpus else {
        return Err("multiple gpu share is not supported on device side".into());
    };
    let (core, vmemory) = core_and_memory(g, CAMBRICON_VMEMORY_UNIT)?;
    out.annotations
        .insert(ANNOTATION_CAMBRICON_DSMLU_ASSIGNED.into(), "false".into());
    out.annotations.insert(
        ANNOTATION_CAMBRICON_DSMLU_PROFILE.into(),
        format!("{}_{core}_{vmemory}", g.minor),
    );
    Ok(())
}

/// One device of a MetaX container's request, its fields in the order MetaX's plugin writes.
#[derive(serde::Serialize)]
struct MetaxRequest<'a> {
    uuid: &'a str,
    compute: i64,
    #[serde(rename = "vRam")]
    vram: i64,
}

fn metax(out: &mut Adapted, gpus: &[Granted]) -> Result<(), String> {
    let mut requests = Vec::with_capacity(gpus.len());
    for g in gpus {
        let (compute, vram) = core_and_memory(g, METAX_VRAM_UNIT)?;
        requests.push(MetaxRequest {
            uuid: &g.id,
            compute,
            vram,
        });
    }
    // One container's requests, in the list of containers MetaX's plugin reads.
    let value = serde_json::to_string(&[requests]).map_err(|e| e.to_string())?;
    out.annotations
        .insert(ANNOTATION_METAX_GPU_DEVICES_ALLOCATED.into(), value);
    Ok(())
}

/// A share's gpu-core and its gpu-memory in `unit`s, or why the vendor cannot cut it.
fn core_and_memory(g: &Granted, unit: i64) -> Result<(i64, i64), String> {
    let core = *g
        .resources
        .get(GPU_CORE)
        .ok_or("gpu core resource is required")?;
    let memory = g.resources.get(GPU_MEMORY).copied().unwrap_or(0);
    if memory < unit {
        return Err(format!("gpu memory must not be less than {unit} bytes"));
    }
    Ok((core, memory / unit))
}

/// The lock's value for this pod, unless another pod holds the node's lock.
fn lock_node(t: &Target, key: &str) -> Result<String, String> {
    if let Some(held) = t.node_annotations.get(key) {
        let parts: Vec<&str> = held.split(',').collect();
        let [at, ns, name] = parts[..] else {
            return Err(format!("invalid node lock value {held:?}"));
        };
        let at = at
            .parse::<k8s_openapi::jiff::Timestamp>()
            .map_err(|e| format!("invalid node lock time {at:?}: {e}"))?;
        let expired = t.now_ms - at.as_millisecond() > NODE_LOCK_TIMEOUT_MS;
        if !expired && (t.alive)(&format!("{ns}/{name}")) {
            return Err(format!("node {:?} has been locked", t.node));
        }
    }
    Ok(format!("{},{},{}", rfc3339(t.now_ms), t.namespace, t.name))
}

/// Whole seconds in UTC, as Go's `time.RFC3339` layout writes them.
fn rfc3339(ms: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

fn minors(gpus: &[Granted], prefix: &str) -> String {
    let each: Vec<String> = gpus
        .iter()
        .map(|g| format!("{prefix}{}", g.minor))
        .collect();
    each.join(",")
}

/// The bind time in unix nanoseconds, strictly increasing within this process so two pods
/// bound to one node in the same instant still differ (what the timestamp is read for).
pub fn bind_timestamp() -> String {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next.to_string(),
            Err(seen) => last = seen,
        }
    }
}

#[cfg(test)]
#[path = "adapter_tests.rs"]
mod tests;
