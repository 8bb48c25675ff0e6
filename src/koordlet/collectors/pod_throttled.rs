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
    /// (nr_periods, nr_throttled, when) by pod uid and by container id.
    pods: HashMap<String, (u64, u64, u64)>,
    containers: HashMap<String, (u64, u64, u64)>,
}

impl PodThrottled {
    pub fn new(interval: Duration, ttl: Duration) -> Self {
        PodThrottled {
            interval,
            ttl_ns: ttl.as_nanos() as u64,
            pods: HashMap::new(),
            containers: HashMap::new(),
        }
    }

    /// The key is copied only the first time it is seen (hundreds of lookups a pass).
    fn ratio(
        env: &CollectEnv<'_>,
        prev: &mut HashMap<String, (u64, u64, u64)>,
        key: &str,
        dir: &CgroupDir,
    ) -> Option<f64> {
        let stat = env
            .cgroups
            .read_with(Resource::CpuStat, dir, cpu_stat)
            .ok()?
            .ok()?;
        let now = (stat.nr_periods, stat.nr_throttled, env.mono_ns);
        let (p0, t0, _) = match prev.get_mut(key) {
            Some(slot) => std::mem::replace(slot, now),
            None => {
                prev.insert(key.to_string(), now);
                return None;
            }
        };
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
            if let Some(r) = Self::ratio(env, &mut self.pods, &pod.uid, &pod.dir) {
                out.push((
                    SeriesKey::with(MetricKind::PodCpuThrottled, &pod.series),
                    Point {
                        ts: env.now_ms,
                        value: r,
                    },
                ));
            }
            for c in &pod.containers {
                let id = PodMeta::container_id(c);
                if let Some(r) = Self::ratio(env, &mut self.containers, id, &c.dir) {
                    out.push((
                        SeriesKey::with(MetricKind::ContainerCpuThrottled, &c.series),
                        Point {
                            ts: env.now_ms,
                            value: r,
                        },
                    ));
                }
            }
        }
        let (now, ttl) = (env.mono_ns, self.ttl_ns);
        for prev in [&mut self.pods, &mut self.containers] {
            prev.retain(|_, (_, _, t)| now.saturating_sub(*t) <= ttl);
        }
        Ok(())
    }
}
