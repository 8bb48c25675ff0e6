//! System usage: what the node uses beyond its pods and host applications,
//! `max(node − Σpods − Σapps, 0)`, from the same pass; and per NUMA node as Koordinator's
//! `collectSysNUMAResUsed`: memory `max(node's − Σpods', 0)` (host applications are not
//! measured per NUMA node), CPU the system's apportioned by each NUMA node's busy time.

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
        let mut system_cpu = None;
        if let (Some(node), Some(pods)) = (shared.node_cpu, shared.pods_cpu) {
            let v = (node - pods - shared.apps_cpu).max(0.0);
            system_cpu = Some(v);
            out.push((
                SeriesKey::node(MetricKind::SysCpuUsage),
                Point {
                    ts: env.now_ms,
                    value: v,
                },
            ));
        }
        numa(env.now_ms, shared, system_cpu, out);
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

/// The per-NUMA system usage of this pass (nothing without the node's NUMA usage).
fn numa(ts: i64, shared: &Shared, system_cpu: Option<f64>, out: &mut Samples) {
    let point = |value| Point { ts, value };
    if let Some(pods) = &shared.pods_numa_memory {
        for (n, node) in &shared.node_numa_memory {
            let v = (node - pods.get(n).copied().unwrap_or(0.0)).max(0.0);
            out.push((
                SeriesKey::numa(MetricKind::SysNumaMemoryUsage, *n),
                point(v),
            ));
        }
    }
    let Some(system) = system_cpu else { return };
    let total: f64 = shared.node_numa_cpu.values().sum();
    for (n, busy) in &shared.node_numa_cpu {
        let v = if total > 0.0 {
            system * busy / total
        } else {
            0.0
        };
        out.push((SeriesKey::numa(MetricKind::SysNumaCpuUsage, *n), point(v)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_usage_per_numa_node_as_koordinators() {
        let shared = Shared {
            node_numa_cpu: [(0, 3.0), (1, 1.0)].into(),
            node_numa_memory: [(0, 10e9), (1, 4e9)].into(),
            pods_numa_memory: Some([(0, 6e9), (1, 5e9)].into()),
            ..Default::default()
        };
        let mut out = Vec::new();
        numa(1, &shared, Some(2.0), &mut out);
        let get = |k, n| {
            out.iter()
                .find(|(s, _)| *s == SeriesKey::numa(k, n))
                .map(|(_, p)| p.value)
        };
        assert_eq!(get(MetricKind::SysNumaMemoryUsage, 0), Some(4e9));
        assert_eq!(get(MetricKind::SysNumaMemoryUsage, 1), Some(0.0), "clamped");
        assert_eq!(
            get(MetricKind::SysNumaCpuUsage, 0),
            Some(1.5),
            "3/4 of 2 cores"
        );
        assert_eq!(get(MetricKind::SysNumaCpuUsage, 1), Some(0.5));
        let mut none = Vec::new();
        let no_pods = Shared {
            pods_numa_memory: None,
            ..shared
        };
        numa(1, &no_pods, None, &mut none);
        assert!(none.is_empty(), "no pod pass, no system CPU: nothing");
    }
}
