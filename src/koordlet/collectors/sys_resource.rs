//! System usage: what the node uses beyond its pods and host applications,
//! `max(node − Σpods − Σapps, 0)`, from the same pass.

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Samples, Shared};
use crate::koordlet::store::{MetricKind, Point, SeriesKey};

pub struct SysResource {
    interval: Duration,
}

impl SysResource {
    pub fn new(interval: Duration) -> Self {
        SysResource { interval }
    }
}

impl Collector for SysResource {
    fn name(&self) -> &'static str {
        "sysResource"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn collect(
        &mut self,
        env: &CollectEnv<'_>,
        shared: &mut Shared,
        out: &mut Samples,
    ) -> Result<(), CollectError> {
        if let (Some(node), Some(pods)) = (shared.node_cpu, shared.pods_cpu) {
            let v = (node - pods - shared.apps_cpu).max(0.0);
            out.push((
                SeriesKey::node(MetricKind::SysCpuUsage),
                Point {
                    ts: env.now_ms,
                    value: v,
                },
            ));
        }
        if let (Some(node), Some(pods)) = (shared.node_memory, shared.pods_memory) {
            let v = (node - pods - shared.apps_memory).max(0.0);
            out.push((
                SeriesKey::node(MetricKind::SysMemoryUsage),
                Point {
                    ts: env.now_ms,
                    value: v,
                },
            ));
        }
        Ok(())
    }
}
