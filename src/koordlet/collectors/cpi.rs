//! Cycles per instruction (gate `CPICollector`): hardware cycle and instruction counters
//! per container in cgroup mode on every CPU, counted for a window and then read. When the
//! kernel or sandbox refuses perf events the collector disables itself with one warning.

use std::time::Duration;

use perf_event::events::Hardware;
use perf_event::{Builder, Counter};

use super::{CollectEnv, CollectError, Collector, Samples, Shared};
use crate::koordlet::informer::PodMeta;
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::{Subsystem, Version};

struct Open {
    uid: String,
    container: String,
    cycles: Vec<Counter>,
    instructions: Vec<Counter>,
}

pub struct Cpi {
    interval: Duration,
    window: Duration,
    opened_at: Option<u64>,
    last_round: Option<u64>,
    open: Vec<Open>,
    disabled: Option<String>,
}

impl Cpi {
    pub fn new(interval: Duration, window: Duration) -> Self {
        Cpi {
            interval,
            window,
            opened_at: None,
            last_round: None,
            open: Vec::new(),
            disabled: None,
        }
    }

    fn open_counters(&mut self, env: &CollectEnv<'_>) -> Result<(), String> {
        let (_, per_cpu) = env.host.proc_stat().map_err(|e| e.to_string())?;
        let cpus: Vec<usize> = per_cpu.iter().map(|(id, _)| *id).collect();
        for pod in env.states.pods.iter() {
            for c in &pod.containers {
                let dir = env.cgroups.dir_path(Subsystem::PerfEvent, &c.dir);
                let dir = if env.cgroups.version() == Version::V1 {
                    dir
                } else {
                    env.cgroups.dir_path(Subsystem::Cpu, &c.dir)
                };
                let file = crate::os::knob::open_dir(&dir)
                    .map_err(|e| format!("perf_event cgroup {e}"))?;
                let mut o = Open {
                    uid: pod.uid.clone(),
                    container: PodMeta::container_id(c).to_string(),
                    cycles: Vec::new(),
                    instructions: Vec::new(),
                };
                for &cpu in &cpus {
                    for (kind, list) in [
                        (Hardware::CPU_CYCLES, &mut o.cycles),
                        (Hardware::INSTRUCTIONS, &mut o.instructions),
                    ] {
                        let mut counter = Builder::new()
                            .kind(kind)
                            .observe_cgroup(&file)
                            .one_cpu(cpu)
                            .build()
                            .map_err(|e| format!("perf_event_open: {e}"))?;
                        counter
                            .enable()
                            .map_err(|e| format!("enabling a perf counter: {e}"))?;
                        list.push(counter);
                    }
                }
                self.open.push(o);
            }
        }
        Ok(())
    }
}

fn total(counters: &mut [Counter]) -> u64 {
    counters.iter_mut().filter_map(|c| c.read().ok()).sum()
}

impl Collector for Cpi {
    fn name(&self) -> &'static str {
        "cpi"
    }

    /// Ticks at the window granularity; rounds start every `interval`.
    fn interval(&self) -> Duration {
        self.window.min(self.interval)
    }

    fn disabled(&self) -> Option<&str> {
        self.disabled.as_deref()
    }

    fn collect(
        &mut self,
        env: &CollectEnv<'_>,
        _: &mut Shared,
        out: &mut Samples,
    ) -> Result<(), CollectError> {
        if self.disabled.is_some() {
            return Ok(());
        }
        if let Some(t0) = self.opened_at {
            if env.mono_ns.saturating_sub(t0) < self.window.as_nanos() as u64 {
                return Ok(());
            }
            for mut o in std::mem::take(&mut self.open) {
                let labels = |res: &'static str| {
                    [
                        ("pod_uid", o.uid.clone()),
                        ("container_id", o.container.clone()),
                        ("cpi_resource", res.to_string()),
                    ]
                };
                let (cycles, instructions) = (total(&mut o.cycles), total(&mut o.instructions));
                for (res, v) in [("cycle", cycles), ("instruction", instructions)] {
                    let l = labels(res);
                    let refs: Vec<(&'static str, &str)> =
                        l.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    out.push((
                        SeriesKey::new(MetricKind::ContainerCpi, &refs),
                        Point {
                            ts: env.now_ms,
                            value: v as f64,
                        },
                    ));
                }
            }
            self.opened_at = None;
            return Ok(());
        }
        if self
            .last_round
            .is_some_and(|t| env.mono_ns.saturating_sub(t) < self.interval.as_nanos() as u64)
        {
            return Ok(());
        }
        self.last_round = Some(env.mono_ns);
        match self.open_counters(env) {
            Ok(()) => self.opened_at = Some(env.mono_ns),
            Err(reason) => {
                self.open.clear();
                tracing::warn!(%reason, "CPI collector disabled: perf events are not available here");
                self.disabled = Some(reason);
            }
        }
        Ok(())
    }
}
