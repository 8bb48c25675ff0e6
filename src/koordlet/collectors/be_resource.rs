//! Best-effort CPU in milli-cores (`node_be`): `usage` of the besteffort QoS cgroup,
//! `request` = Σ batch-cpu requests of BE pods, `real-limit` = the tighter of the
//! smallest BE cpuset and the besteffort CFS quota.

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Rates, Samples, Shared};
use crate::api::extension::qos::{KubeQoS, QoSClass};
use crate::api::extension::resources::BATCH_CPU;
use crate::api::pod::container_requests;
use crate::koordlet::informer::PodMeta;
use crate::koordlet::store::{Point, SeriesKey};
use crate::os::parse::cpuset;
use crate::os::{CgroupDir, Cgroups, Resource};

pub struct BeResource {
    interval: Duration,
    rates: Rates<()>,
}

impl BeResource {
    pub fn new(interval: Duration, ttl: Duration) -> Self {
        BeResource {
            interval,
            rates: Rates::new(ttl),
        }
    }
}

fn is_be(p: &PodMeta) -> bool {
    p.facts.qos == QoSClass::Be
}

/// Σ `kubernetes.io/batch-cpu` requests (already milli-cores) of BE pods.
pub fn be_request_milli(pods: &[PodMeta]) -> i64 {
    pods.iter()
        .filter(|p| is_be(p))
        .flat_map(|p| {
            let spec = p.pod.spec.as_ref();
            let regular = spec.map(|s| s.containers.iter()).into_iter().flatten();
            let sidecars = spec
                .and_then(|s| s.init_containers.as_ref())
                .into_iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            regular
                .chain(sidecars)
                .map(|c| container_requests(c).get(BATCH_CPU).copied().unwrap_or(0))
                .collect::<Vec<_>>()
        })
        .sum()
}

fn cpuset_size(cgroups: &Cgroups, dir: &CgroupDir) -> Option<i64> {
    let cpus = cgroups.read(Resource::CpusetCpus, dir).ok()?;
    cpuset(&cpus)
        .ok()
        .map(|c| c.len() as i64)
        .filter(|n| *n > 0)
}

/// The BE CPU limit actually in force, in milli-cores.
pub fn real_limit_milli(cgroups: &Cgroups, pods: &[PodMeta], node_cpus: i64) -> i64 {
    let be_dir = cgroups.qos_dir(KubeQoS::BestEffort);
    let mut limit = node_cpus * 1000;
    let mut dirs = vec![be_dir.clone()];
    dirs.extend(
        pods.iter()
            .filter(|p| is_be(p))
            .flat_map(|p| p.containers.iter().map(|c| c.dir.clone())),
    );
    if let Some(min) = dirs.iter().filter_map(|d| cpuset_size(cgroups, d)).min() {
        limit = limit.min(min * 1000);
    }
    let quota = cgroups.read_i64(Resource::CfsQuota, &be_dir).unwrap_or(-1);
    let period = cgroups
        .read_i64(Resource::CfsPeriod, &be_dir)
        .unwrap_or(100_000);
    if quota > 0 && period > 0 {
        limit = limit.min(quota * 1000 / period);
    }
    limit
}

impl Collector for BeResource {
    fn name(&self) -> &'static str {
        "beResource"
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
        let be_dir = env.cgroups.qos_dir(KubeQoS::BestEffort);
        let ns = env.cgroups.read_i64(Resource::CpuacctUsage, &be_dir)? as f64;
        let ts = env.now_ms;
        let (_, per_cpu) = env.host.proc_stat()?;
        let node_cpus = per_cpu.len().max(1) as i64;
        out.push((
            SeriesKey::be_cpu("request"),
            Point {
                ts,
                value: be_request_milli(&env.states.pods) as f64,
            },
        ));
        let limit = real_limit_milli(env.cgroups, &env.states.pods, node_cpus);
        out.push((
            SeriesKey::be_cpu("real-limit"),
            Point {
                ts,
                value: limit as f64,
            },
        ));
        if let Some(rate) = self.rates.per_second(&(), ns, env.mono_ns) {
            out.push((
                SeriesKey::be_cpu("usage"),
                Point {
                    ts,
                    value: rate / 1e6,
                },
            ));
        }
        Ok(())
    }
}
