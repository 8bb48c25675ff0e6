//! Pod and container CPU (Δcpuacct.usage ÷ Δwall) and memory without page cache
//! (anonymous + unevictable from memory.stat).

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Rates, Samples, Shared};
use crate::koordlet::informer::PodMeta;
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::parse::memory_without_cache;
use crate::os::{CgroupDir, Resource};

pub struct PodResource {
    interval: Duration,
    /// CPU counters by pod uid.
    pods: Rates<String>,
    /// CPU counters by container id.
    containers: Rates<String>,
}

impl PodResource {
    pub fn new(interval: Duration, ttl: Duration) -> Self {
        PodResource {
            interval,
            pods: Rates::new(ttl),
            containers: Rates::new(ttl),
        }
    }

    /// (cpu cores if a rate exists yet, memory bytes) of one cgroup.
    fn usage(
        env: &CollectEnv<'_>,
        rates: &mut Rates<String>,
        key: &str,
        dir: &CgroupDir,
    ) -> Result<(Option<f64>, f64), CollectError> {
        let ns = env.cgroups.read_i64(Resource::CpuacctUsage, dir)? as f64;
        let memory =
            env.cgroups
                .read_with(Resource::MemoryStat, dir, memory_without_cache)?? as f64;
        Ok((
            rates.per_second(key, ns, env.mono_ns).map(|r| r / 1e9),
            memory,
        ))
    }
}

fn active(p: &PodMeta) -> bool {
    matches!(
        p.pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running" | "Pending")
    )
}

impl Collector for PodResource {
    fn name(&self) -> &'static str {
        "podResource"
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
        let (mut cpu_sum, mut mem_sum) = (0.0, 0.0);
        let mut numa: std::collections::BTreeMap<u32, f64> = Default::default();
        let with_cache =
            crate::koordlet::reporter::with_page_cache(env.states.node_metric.as_deref());
        for pod in env.states.pods.iter() {
            let (cpu, mem) = match Self::usage(env, &mut self.pods, &pod.uid, &pod.dir) {
                Ok(u) => u,
                Err(e) => {
                    // A missing cgroup is normal for pods that are not running.
                    if active(pod) {
                        tracing::debug!(pod = %pod.name, error = %e, "pod usage unavailable");
                    }
                    continue;
                }
            };
            let ts = env.now_ms;
            out.push((
                SeriesKey::with(MetricKind::PodMemoryUsage, &pod.series),
                Point { ts, value: mem },
            ));
            if with_cache && let Ok(v) = env.cgroups.read_i64(Resource::MemoryUsage, &pod.dir) {
                out.push((
                    SeriesKey::with(MetricKind::PodMemoryWithPageCache, &pod.series),
                    Point {
                        ts,
                        value: v as f64,
                    },
                ));
            }
            mem_sum += mem;
            // A pod whose numa_stat cannot be read is left out, as Koordinator does.
            if let Ok(per_node) = env.cgroups.numa_memory(&pod.dir) {
                for (n, bytes) in per_node {
                    *numa.entry(n).or_default() += bytes;
                }
            }
            if let Some(c) = cpu {
                out.push((
                    SeriesKey::with(MetricKind::PodCpuUsage, &pod.series),
                    Point { ts, value: c },
                ));
                cpu_sum += c;
            }
            for c in &pod.containers {
                let id = PodMeta::container_id(c);
                let Ok((cpu, mem)) = Self::usage(env, &mut self.containers, id, &c.dir) else {
                    continue;
                };
                out.push((
                    SeriesKey::with(MetricKind::ContainerMemoryUsage, &c.series),
                    Point { ts, value: mem },
                ));
                if with_cache && let Ok(v) = env.cgroups.read_i64(Resource::MemoryUsage, &c.dir) {
                    out.push((
                        SeriesKey::with(MetricKind::ContainerMemoryWithPageCache, &c.series),
                        Point {
                            ts,
                            value: v as f64,
                        },
                    ));
                }
                if let Some(cpu) = cpu {
                    out.push((
                        SeriesKey::with(MetricKind::ContainerCpuUsage, &c.series),
                        Point { ts, value: cpu },
                    ));
                }
            }
        }
        self.pods.expire(env.mono_ns);
        self.containers.expire(env.mono_ns);
        shared.pods_cpu = Some(cpu_sum);
        shared.pods_memory = Some(mem_sum);
        shared.pods_numa_memory = Some(numa);
        Ok(())
    }
}
