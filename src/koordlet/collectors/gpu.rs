//! GPU usage (gate `Accelerators`; Koordinator's `metricsadvisor/devices/gpu`): per GPU,
//! through NVML, its utilisation (`node_gpu_core_usage`, percent), memory used and total
//! (`node_gpu_memory_usage`, `node_gpu_memory_total`, bytes), labelled with the GPU's minor
//! and uuid. The NodeMetric carries their window averages under `nodeUsage.devices`.

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Samples, Shared};
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::nvml::Nvml;

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
