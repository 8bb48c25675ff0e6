//! Pressure stall information (gate `PSICollector`): `avg10`, `avg60` and `avg300` of the
//! some/full lines of cpu, memory and io pressure for the node, pods and containers.

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Samples, Shared};
use crate::koordlet::informer::PodMeta;
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::parse::PsiLine;
use crate::os::procfs::psi;
use crate::os::{CgroupDir, Resource};

pub struct Psi {
    interval: Duration,
}

impl Psi {
    pub fn new(interval: Duration) -> Self {
        Psi { interval }
    }
}

const RESOURCES: [(Resource, &str, &str); 3] = [
    (Resource::CpuPressure, "cpu", "cpu"),
    (Resource::MemoryPressure, "memory", "mem"),
    (Resource::IoPressure, "io", "io"),
];

fn emit(
    out: &mut Samples,
    kind: MetricKind,
    base: &[(&'static str, &str)],
    res: &str,
    some: PsiLine,
    full: Option<PsiLine>,
    ts: i64,
) {
    let mut push = |degree: &str, line: PsiLine| {
        for (precision, v) in [("10", line.avg10), ("60", line.avg60), ("300", line.avg300)] {
            let mut labels = base.to_vec();
            labels.extend([
                ("psi_resource", res),
                ("psi_precision", precision),
                ("psi_degree", degree),
            ]);
            out.push((SeriesKey::new(kind, &labels), Point { ts, value: v }));
        }
    };
    push("some", some);
    if let Some(f) = full {
        push("full", f);
    }
}

fn cgroup_psi(
    env: &CollectEnv<'_>,
    dir: &CgroupDir,
    kind: MetricKind,
    base: &[(&'static str, &str)],
    out: &mut Samples,
) {
    for (res, _, label) in RESOURCES {
        if let Ok((some, full)) = env
            .cgroups
            .read(res, dir)
            .map_err(CollectError::from)
            .and_then(|s| Ok(psi(&s)?))
        {
            emit(out, kind, base, label, some, full, env.now_ms);
        }
    }
}

impl Collector for Psi {
    fn name(&self) -> &'static str {
        "psi"
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
        for (_, file, label) in RESOURCES {
            if let Ok((some, full)) = env.host.pressure(file) {
                emit(out, MetricKind::NodePsi, &[], label, some, full, env.now_ms);
            }
        }
        for pod in env.states.pods.iter() {
            cgroup_psi(
                env,
                &pod.dir,
                MetricKind::PodPsi,
                &[("pod_uid", &pod.uid)],
                out,
            );
            for c in &pod.containers {
                let id = PodMeta::container_id(c);
                cgroup_psi(
                    env,
                    &c.dir,
                    MetricKind::ContainerPsi,
                    &[("pod_uid", &pod.uid), ("container_id", id)],
                    out,
                );
            }
        }
        Ok(())
    }
}
