//! CPU throttling ratios: Δnr_throttled ÷ Δnr_periods of pods and containers.

use std::collections::HashMap;
use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Samples, Shared};
use crate::koordlet::informer::PodMeta;
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::parse::cpu_stat;
use crate::os::{CgroupDir, Resource};

pub struct PodThrottled {
    interval: Duration,
    ttl_ns: u64,
    prev: HashMap<String, (u64, u64, u64)>,
}

impl PodThrottled {
    pub fn new(interval: Duration, ttl: Duration) -> Self {
        PodThrottled {
            interval,
            ttl_ns: ttl.as_nanos() as u64,
            prev: HashMap::new(),
        }
    }

    fn ratio(&mut self, env: &CollectEnv<'_>, key: String, dir: &CgroupDir) -> Option<f64> {
        let stat = env
            .cgroups
            .read_with(Resource::CpuStat, dir, cpu_stat)
            .ok()?
            .ok()?;
        let (p0, t0, _) = self
            .prev
            .insert(key, (stat.nr_periods, stat.nr_throttled, env.mono_ns))?;
        let periods = stat.nr_periods.checked_sub(p0)?;
        let throttled = stat.nr_throttled.checked_sub(t0)?;
        Some(if periods == 0 {
            0.0
        } else {
            throttled as f64 / periods as f64
        })
    }
}

impl Collector for PodThrottled {
    fn name(&self) -> &'static str {
        "podThrottled"
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
        for pod in env.states.pods.iter() {
            if let Some(r) = self.ratio(env, format!("pod/{}", pod.uid), &pod.dir) {
                out.push((
                    SeriesKey::pod(MetricKind::PodCpuThrottled, &pod.uid),
                    Point {
                        ts: env.now_ms,
                        value: r,
                    },
                ));
            }
            for c in &pod.containers {
                let id = PodMeta::container_id(c);
                if let Some(r) = self.ratio(env, format!("ctr/{id}"), &c.dir) {
                    out.push((
                        SeriesKey::container(MetricKind::ContainerCpuThrottled, id),
                        Point {
                            ts: env.now_ms,
                            value: r,
                        },
                    ));
                }
            }
        }
        let (now, ttl) = (env.mono_ns, self.ttl_ns);
        self.prev
            .retain(|_, (_, _, t)| now.saturating_sub(*t) <= ttl);
        Ok(())
    }
}
