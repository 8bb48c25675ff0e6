//! GPU usage (gate `Accelerators`; Koordinator's `metricsadvisor/devices/gpu`): per GPU,
//! through NVML, its utilisation (`node_gpu_core_usage`, percent), memory used and total
//! (`node_gpu_memory_usage`, `node_gpu_memory_total`, bytes), labelled with the GPU's minor
//! and uuid. The NodeMetric carries their window averages under `nodeUsage.devices`.
//! Per pod and container (`pod_gpu_core_usage`, `pod_gpu_memory_usage`,
//! `container_gpu_*`): the SM utilisation and memory of the GPU processes in its
//! containers' cgroups, summed per GPU (Koordinator's per-process accounting), carried
//! under each pod's `podUsage.devices`.

use std::collections::HashMap;

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Samples, Shared};
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::Resource;
use crate::os::nvml::{Gpu, Nvml};

pub struct GpuUsage {
    nvml: Option<Nvml>,
    interval: Duration,
}

impl GpuUsage {
    /// Without the library (no NVIDIA driver) the collector reports itself disabled.
    pub fn new(library: &str, interval: Duration) -> Self {
        GpuUsage {
            nvml: Nvml::open(library).ok().flatten(),
            interval,
        }
    }
}

pub fn key(kind: MetricKind, minor: u32, uuid: &str) -> SeriesKey {
    SeriesKey::new(
        kind,
        &[("gpu_minor", &minor.to_string()), ("gpu_device_uuid", uuid)],
    )
}

/// A pod's or container's series key for one GPU.
pub fn owner_key(
    kind: MetricKind,
    owner: (&'static str, &str),
    minor: u32,
    uuid: &str,
) -> SeriesKey {
    SeriesKey::new(
        kind,
        &[
            owner,
            ("gpu_minor", &minor.to_string()),
            ("gpu_device_uuid", uuid),
        ],
    )
}

/// (SM percent, memory bytes) per GPU index, summed over `pids`.
fn usage_of(pids: &[u32], by_pid: &HashMap<u32, Vec<(usize, u32, u64)>>) -> Vec<(usize, f64, f64)> {
    let mut sums: std::collections::BTreeMap<usize, (f64, f64)> = Default::default();
    for (gpu, sm, mem) in pids.iter().filter_map(|p| by_pid.get(p)).flatten() {
        let e = sums.entry(*gpu).or_default();
        e.0 += f64::from(*sm);
        e.1 += *mem as f64;
    }
    sums.into_iter()
        .map(|(g, (sm, mem))| (g, sm, mem))
        .collect()
}

/// Pod and container samples from the GPUs' processes and the containers' cgroups.
fn per_process(env: &CollectEnv<'_>, gpus: &[Gpu], out: &mut Samples) {
    let mut by_pid: HashMap<u32, Vec<(usize, u32, u64)>> = HashMap::new();
    for (i, g) in gpus.iter().enumerate() {
        for p in &g.processes {
            by_pid
                .entry(p.pid)
                .or_default()
                .push((i, p.sm_util, p.memory_used));
        }
    }
    if by_pid.is_empty() {
        return;
    }
    // (core kind, memory kind, owner label) → samples per GPU the pids use.
    let mut emit = |kinds: (MetricKind, MetricKind), owner: (&'static str, &str), pids: &[u32]| {
        for (gpu, sm, mem) in usage_of(pids, &by_pid) {
            let (m, u) = (gpus[gpu].minor, gpus[gpu].uuid.as_str());
            for (kind, value) in [(kinds.0, sm), (kinds.1, mem)] {
                let point = Point {
                    ts: env.now_ms,
                    value,
                };
                out.push((owner_key(kind, owner, m, u), point));
            }
        }
    };
    let container = (
        MetricKind::ContainerGpuCoreUsage,
        MetricKind::ContainerGpuMemoryUsage,
    );
    let pod_kinds = (MetricKind::PodGpuCoreUsage, MetricKind::PodGpuMemoryUsage);
    for pod in env.states.pods.iter() {
        let mut pod_pids = Vec::new();
        for c in pod.containers.iter().filter(|c| c.running) {
            let procs = env
                .cgroups
                .read(Resource::Procs, &c.dir)
                .unwrap_or_default();
            let pids: Vec<u32> = procs
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            let id = crate::koordlet::informer::PodMeta::container_id(c);
            emit(container, ("container_id", id), &pids);
            pod_pids.extend(pids);
        }
        emit(pod_kinds, ("pod_uid", pod.uid.as_str()), &pod_pids);
    }
}

impl Collector for GpuUsage {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn collect(
        &mut self,
        env: &CollectEnv<'_>,
        _: &mut Shared,
        out: &mut Samples,
    ) -> Result<(), CollectError> {
        let Some(nvml) = &self.nvml else {
            return Ok(());
        };
        let gpus = nvml.gpus().map_err(|e| CollectError(e.to_string()))?;
        per_process(env, &gpus, out);
        for g in gpus {
            for (kind, value) in [
                (MetricKind::NodeGpuCoreUsage, g.util_gpu as f64),
                (MetricKind::NodeGpuMemoryUsage, g.memory_used as f64),
                (MetricKind::NodeGpuMemoryTotal, g.memory_total as f64),
            ] {
                let point = Point {
                    ts: env.now_ms,
                    value,
                };
                out.push((key(kind, g.minor, &g.uuid), point));
            }
        }
        Ok(())
    }

    fn disabled(&self) -> Option<&str> {
        self.nvml.is_none().then_some("no NVML library: no GPUs")
    }
}
