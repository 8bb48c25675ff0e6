//! Out-of-band host applications listed in the NodeSLO (`hostApplications`), measured
//! like pods from their cgroup.

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Rates, Samples, Shared};
use crate::api::extension::qos::KubeQoS;
use crate::api::slo::HostApplicationSpec;
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::parse::memory_without_cache;
use crate::os::{CgroupDir, Cgroups, Resource};

pub struct HostApplication {
    interval: Duration,
    rates: Rates<String>,
}

impl HostApplication {
    pub fn new(interval: Duration, ttl: Duration) -> Self {
        HostApplication {
            interval,
            rates: Rates::new(ttl),
        }
    }
}

/// The cgroup of a host application (`cgroupPath.base` + parentDir + relativePath).
pub fn app_dir(cgroups: &Cgroups, app: &HostApplicationSpec) -> Option<CgroupDir> {
    let path = app.cgroup_path.as_ref()?;
    let base = match path.base.as_deref().unwrap_or("CgroupRoot") {
        "CgroupRoot" => CgroupDir::new(""),
        "Kubepods" => cgroups.kubepods(),
        "KubepodsBurstable" => cgroups.qos_dir(KubeQoS::Burstable),
        "KubepodsBesteffort" => cgroups.qos_dir(KubeQoS::BestEffort),
        _ => return None,
    };
    let mut dir = base;
    for part in [&path.parent_dir, &path.relative_path]
        .into_iter()
        .flatten()
    {
        if !part.trim_matches('/').is_empty() {
            dir = dir.join(part);
        }
    }
    Some(dir)
}

impl Collector for HostApplication {
    fn name(&self) -> &'static str {
        "hostApplication"
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
        let apps = &env.states.slo().host_applications;
        let (mut cpu_sum, mut mem_sum) = (0.0, 0.0);
        let policy_with_cache =
            crate::koordlet::reporter::with_page_cache(env.states.node_metric.as_deref());
        for app in apps {
            let (Some(name), Some(dir)) = (app.name.as_deref(), app_dir(env.cgroups, app)) else {
                continue;
            };
            let Ok(ns) = env.cgroups.read_i64(Resource::CpuacctUsage, &dir) else {
                continue;
            };
            let Ok(mem) = env
                .cgroups
                .read(Resource::MemoryStat, &dir)
                .map_err(CollectError::from)
                .and_then(|s| Ok(memory_without_cache(&s)?))
            else {
                continue;
            };
            let ts = env.now_ms;
            out.push((
                SeriesKey::host_app(MetricKind::HostAppMemoryUsage, name),
                Point {
                    ts,
                    value: mem as f64,
                },
            ));
            // With page cache too (Koordinator always records it; the node's memory collect
            // policy decides which one the system usage subtracts).
            let with_cache = env.cgroups.read_i64(Resource::MemoryUsage, &dir).ok();
            if let Some(v) = with_cache {
                out.push((
                    SeriesKey::host_app(MetricKind::HostAppMemoryWithPageCache, name),
                    Point {
                        ts,
                        value: v as f64,
                    },
                ));
            }
            mem_sum += match with_cache.filter(|_| policy_with_cache) {
                Some(v) => v as f64,
                None => mem as f64,
            };
            if let Some(r) = self.rates.per_second(name, ns as f64, env.mono_ns) {
                out.push((
                    SeriesKey::host_app(MetricKind::HostAppCpuUsage, name),
                    Point { ts, value: r / 1e9 },
                ));
                cpu_sum += r / 1e9;
            }
        }
        self.rates.expire(env.mono_ns);
        shared.apps_cpu = cpu_sum;
        shared.apps_memory = mem_sum;
        Ok(())
    }
}
