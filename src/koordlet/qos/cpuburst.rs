//! cpuburst (`pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst.go`) for LS pods; LSR/LSE (pinned) and BE pods are left alone.
//! - `cpuBurstOnly`/`auto`: container `cpu.cfs_burst_us` = limit cores × cpuBurstPercent%
//!   of a period, capped at the container's current quota (kernels refuse burst > quota),
//!   pod = Σ containers; `none`/`cfsQuotaBurstOnly` set 0.
//! - `cfsQuotaBurstOnly`/`auto`: [`cfs_updates`] scales a running container's quota with
//!   the decisions of [`super::cfsquotaburst`].

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::Pod;

use super::cfsquotaburst::{
    Limiter, NodeBurstState, base_quota, by_node, ceil_quota, container_op, target_quota,
};
use super::context::{LAST, QosCtx, now_ms, record};
use super::executor::Executor;
use super::executor::{Outcome, Update};
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::keys::ANNOTATION_CPU_BURST;
use crate::api::extension::qos::QoSClass;
use crate::api::slo::nodeslo::{CPUBurstConfig, CPUBurstStrategy};
use crate::api::sloconfig::overlay;
use crate::koordlet::features;
use crate::koordlet::informer::{PodMeta, States};
use crate::koordlet::store::{MetricKind, SeriesKey};
use crate::os::system::Host;
use crate::os::{CgroupDir, Resource};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;

/// The NodeSLO's `cpuBurstStrategy` over Koordinator's defaults.
pub fn node_strategy(states: &States) -> &CPUBurstStrategy {
    &states.slo().cpu_burst
}

/// The node strategy over defaults, with the pod's `koordinator.sh/cpuBurst` on top
/// (borrowed for the pods without one, nearly all, asked every second).
pub fn config_for<'a>(states: &'a States, pod: &Pod) -> Cow<'a, CPUBurstConfig> {
    let base = &node_strategy(states).config;
    let over: Option<CPUBurstConfig> = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_CPU_BURST))
        .and_then(|s| serde_json::from_str(s).ok());
    match over {
        Some(o) => Cow::Owned(overlay(base, &o)),
        None => Cow::Borrowed(base),
    }
}

/// Burst (µs per 100 ms period) for a CPU limit in milli-cores.
pub fn burst_us(limit_milli: i64, percent: i64) -> i64 {
    (limit_milli * percent / 100) * 100_000 / 1000
}

/// Is cpuburst for this pod at all? (not LSR/LSE/BE, and Pending or Running)
pub fn burstable(pod: &PodMeta) -> bool {
    let qos = pod.facts.qos;
    !matches!(qos, QoSClass::Lsr | QoSClass::Lse | QoSClass::Be) && pod.facts.live
}

fn burst_on(cfg: &CPUBurstConfig) -> bool {
    matches!(cfg.policy.as_deref(), Some("cpuBurstOnly") | Some("auto"))
}

fn quota_burst_on(cfg: &CPUBurstConfig) -> bool {
    matches!(
        cfg.policy.as_deref(),
        Some("cfsQuotaBurstOnly") | Some("auto")
    )
}

/// The burst a container should have with the quota `quota` reads (−1: unlimited, no
/// cap); the quota is read only when there is a burst to cap.
fn safe_burst(cfg: &CPUBurstConfig, limit_milli: i64, quota: impl FnOnce() -> Option<i64>) -> i64 {
    if !burst_on(cfg) || limit_milli <= 0 {
        return 0;
    }
    let b = burst_us(limit_milli, cfg.cpu_burst_percent.unwrap_or(1000));
    match quota() {
        Some(q) if q > 0 => b.min(q),
        _ => b,
    }
}

/// Pod-level then container-level `cpu.cfs_burst_us` updates; `quota` reads a cgroup's
/// current CFS quota.
pub fn updates(
    states: &States,
    pod: &PodMeta,
    quota: &dyn Fn(&CgroupDir) -> Option<i64>,
) -> Vec<Vec<Update>> {
    if !burstable(pod) || !pod.facts.has_spec {
        return Vec::new();
    }
    let cfg = config_for(states, &pod.pod);
    let mut total = 0;
    let mut containers = Vec::new();
    for meta in &pod.containers {
        let Some(limit) = meta.cpu_limit_milli else {
            continue;
        };
        let b = safe_burst(&cfg, limit, || quota(&meta.dir));
        total += b;
        containers.push(Update::new(
            Resource::CfsBurst,
            meta.dir.clone(),
            b.to_string(),
        ));
    }
    vec![
        vec![Update::new(
            Resource::CfsBurst,
            pod.dir.clone(),
            total.to_string(),
        )],
        containers,
    ]
}

/// What [`cfs_updates`] reads about the node, the cgroups and the metric store.
pub struct CfsEnv<'a> {
    /// The share pool's state, asked only when a limited container is running.
    pub node: &'a dyn Fn() -> NodeBurstState,
    /// Monotonic seconds (the limiters' clock).
    pub now: f64,
    /// A cgroup's current CFS quota.
    pub quota: &'a dyn Fn(&CgroupDir) -> Option<i64>,
    /// A container's last throttled ratio, by bare container id.
    pub throttled: &'a dyn Fn(&str) -> Option<f64>,
    /// A container's last CPU usage in cores, by bare container id.
    pub usage: &'a dyn Fn(&str) -> Option<f64>,
    /// The random initial fill of a new limiter, in [0, 0.5).
    pub fill: &'a dyn Fn() -> f64,
}

/// May the container keep (or start) bursting? Without a period the limiter is off.
fn allowed(
    cfg: &CPUBurstConfig,
    env: &CfsEnv,
    limiters: &mut HashMap<String, Limiter>,
    id: &str,
    limit_milli: i64,
) -> bool {
    let period = match cfg.cfs_quota_burst_period_seconds {
        Some(p) if p >= 0 => p,
        _ => return true,
    };
    let percent = match cfg.cfs_quota_burst_percent {
        Some(p) if p >= 100 => p,
        _ => return false,
    };
    let limit = limit_milli as f64 / 1000.0;
    let usage = (env.usage)(id).unwrap_or(limit);
    let l = limiters
        .entry(id.to_string())
        .or_insert_with(|| Limiter::new(period, percent, (env.fill)(), env.now));
    if !l.matches(period, percent) {
        *l = Limiter::new(period, percent, (env.fill)(), env.now);
    }
    l.allow(env.now, (usage / limit * 100.0) as i64)
}

/// Ordered writes scaling the CFS quota of the pod's running, CPU-limited containers:
/// growing writes the pod quota first and the burst last, shrinking the reverse, so the
/// kernel's parent ≥ child and burst ≤ quota rules hold at every step.
pub fn cfs_updates(
    states: &States,
    pod: &PodMeta,
    env: &CfsEnv,
    limiters: &mut HashMap<String, Limiter>,
) -> Vec<Update> {
    if !burstable(pod) || !pod.facts.has_spec {
        return Vec::new();
    }
    let cfg = config_for(states, &pod.pod);
    // Read once, and only when a container's quota changes.
    let mut pod_quota: Option<i64> = None;
    let mut out = Vec::new();
    for meta in &pod.containers {
        let Some(limit) = meta.cpu_limit_milli else {
            continue;
        };
        if limit <= 0 || !meta.running {
            continue;
        }
        let Some(cur) = (env.quota)(&meta.dir) else {
            continue;
        };
        let id = PodMeta::container_id(meta);
        let ok = allowed(&cfg, env, limiters, id, limit);
        let op = by_node(
            (env.node)(),
            container_op(quota_burst_on(&cfg), ok, (env.throttled)(id)),
        );
        let base = base_quota(limit);
        let target = target_quota(cur, base, ceil_quota(base, cfg.cfs_quota_burst_percent), op);
        if target == cur {
            continue;
        }
        // An unset container quota (-1) took its limit's share of the pod quota (the
        // kubelet sums the limits): the pod changes by what the container gains over that.
        let delta = target - if cur > 0 { cur } else { base };
        let quota = Update::new(Resource::CfsQuota, meta.dir.clone(), target.to_string());
        let burst = burst_on(&cfg).then(|| {
            let b = safe_burst(&cfg, limit, || Some(target));
            Update::new(Resource::CfsBurst, meta.dir.clone(), b.to_string())
        });
        let pq = pod_quota.get_or_insert_with(|| (env.quota)(&pod.dir).unwrap_or(-1));
        let parent = (*pq > 0).then(|| {
            *pq += delta;
            Update::new(Resource::CfsQuota, pod.dir.clone(), pq.to_string())
        });
        if delta > 0 {
            out.extend(parent.into_iter().chain([quota]).chain(burst));
        } else {
            out.extend(burst.into_iter().chain([quota]).chain(parent));
        }
    }
    out
}

/// The container-level burst and quota values among `updates`, as
/// (container id, container name, pod, resource, value).
pub fn scaled_values<'a>(
    pod: &'a crate::koordlet::informer::PodMeta,
    updates: impl IntoIterator<Item = &'a super::executor::Update>,
) -> Vec<crate::koordlet::metrics::ScaledCfs> {
    use crate::os::Resource;
    let mut out = Vec::new();
    for u in updates {
        let (Resource::CfsBurst | Resource::CfsQuota) = u.resource else {
            continue;
        };
        let Some(c) = pod.containers.iter().find(|c| c.dir == u.dir) else {
            continue;
        };
        let Ok(value) = u.value.trim().parse::<f64>() else {
            continue;
        };
        out.push(crate::koordlet::metrics::ScaledCfs {
            namespace: pod.namespace.clone(),
            pod: pod.name.clone(),
            container_id: crate::koordlet::informer::PodMeta::container_id(c).to_string(),
            container: c.name.clone(),
            burst: u.resource == Resource::CfsBurst,
            value,
        });
    }
    out
}

/// CPUBurst every second (`pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst.go`):
/// `cfs_burst_us` for LS pods, then the cfsQuotaBurst scaling of throttled containers under
/// the node's share-pool state.
pub struct CpuBurst {
    pub ex: Arc<Executor>,
    pub host: Host,
    pub topo_cpus: usize,
    pub clock: std::time::Instant,
    pub limiters: HashMap<String, super::cfsquotaburst::Limiter>,
}

impl CpuBurst {
    pub fn new(ex: Arc<Executor>, host: Host) -> CpuBurst {
        CpuBurst {
            ex,
            host,
            topo_cpus: 0,
            clock: std::time::Instant::now(),
            limiters: HashMap::new(),
        }
    }
}

impl Strategy for CpuBurst {
    fn name(&self) -> &'static str {
        "cpuburst"
    }

    fn prepare(&mut self) -> bool {
        self.topo_cpus = self.host.cpu_topology().map(|t| t.len()).unwrap_or(0);
        true
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        use super::cfsquotaburst::node_state;
        let cg = self.ex.cgroups().clone();
        let quota =
            move |d: &crate::os::CgroupDir| cg.read_i64(crate::os::Resource::CfsQuota, d).ok();
        let cfg = node_strategy(states);
        let cpus = if self.topo_cpus > 0 {
            self.topo_cpus
        } else {
            node_cpus(states)
        };
        // Averages every pod's usage: only worth it when some container can burst.
        let node = std::cell::OnceCell::new();
        let node = || {
            *node.get_or_init(|| {
                let (node_used, pool) = share_pool(ctx, states);
                let threshold = cfg.share_pool_threshold_percent.unwrap_or(50);
                node_state(threshold, cpus, node_used, &pool)
            })
        };
        let now = self.clock.elapsed().as_secs_f64();
        let env = CfsEnv {
            node: &node,
            now,
            quota: &quota,
            throttled: &|id| last_container(ctx, MetricKind::ContainerCpuThrottled, id),
            usage: &|id| last_container(ctx, MetricKind::ContainerCpuUsage, id),
            fill: &random_fill,
        };
        let mut scaled = Vec::new();
        for pod in states.pods.iter() {
            let burst = updates(states, pod, &quota);
            let mut results = self.ex.leveled(&burst);
            // Recorded where the write went through, as Koordinator records it (not where
            // the kernel lacks the knob). `leveled` answers bottom-up.
            let done = burst.iter().rev().flatten().zip(&results);
            let done =
                done.filter(|(_, r)| matches!(r, Ok(Outcome::Written(_) | Outcome::Unchanged)));
            scaled.extend(scaled_values(pod, done.map(|(u, _)| u)));
            for u in cfs_updates(states, pod, &env, &mut self.limiters) {
                let r = self.ex.update(&u);
                let (failed, missing) = (r.is_err(), matches!(r, Ok(Outcome::Missing)));
                results.push(r);
                if failed {
                    break; // later steps rely on this one (parent ≥ child, burst ≤ quota)
                }
                if !missing {
                    scaled.extend(scaled_values(pod, [&u]));
                }
            }
            record(ctx, "cpuburst", &pod.name, results);
        }
        let node = states
            .node
            .as_ref()
            .and_then(|n| n.metadata.name.as_deref());
        // Built only when some container has a scaled series to keep or drop.
        let ids = std::cell::OnceCell::new();
        let live = |id: &str| {
            ids.get_or_init(|| {
                let all = states.pods.iter().flat_map(|p| &p.containers);
                all.map(PodMeta::container_id).collect::<HashSet<&str>>()
            })
            .contains(id)
        };
        ctx.metrics
            .ops
            .set_scaled_cfs(node.unwrap_or_default(), scaled, &live);
        self.limiters.retain(|_, l| !l.expired(now));
        futures::future::ready(Round::DONE).boxed()
    }
}

fn node_cpus(states: &States) -> usize {
    states
        .node
        .as_ref()
        .and_then(|n| n.status.as_ref()?.capacity.as_ref()?.get("cpu"))
        .map_or(0, |q| {
            (crate::api::quantity::q_milli(q) / 1000).max(0) as usize
        })
}

/// Node CPU and per-pod CPU (cores) averaged over min(5 × 1 s, 10 s).
fn share_pool(ctx: &QosCtx, states: &States) -> (Option<f64>, Vec<super::cfsquotaburst::PoolPod>) {
    let now = now_ms();
    let avg = |key: &SeriesKey| {
        let a = ctx.store.aggregate(key, now - 5_000, now).ok().flatten()?;
        Some(a.avg)
    };
    let pods = states
        .pods
        .iter()
        .map(|p| super::cfsquotaburst::PoolPod {
            qos: p.facts.qos,
            request_milli: p.facts.cpu_request_milli,
            usage: avg(&SeriesKey::pod(MetricKind::PodCpuUsage, &p.uid)),
        })
        .collect();
    (avg(&SeriesKey::node(MetricKind::NodeCpuUsage)), pods)
}

fn last_container(ctx: &QosCtx, kind: MetricKind, id: &str) -> Option<f64> {
    let now = now_ms();
    let points = ctx
        .store
        .query(&SeriesKey::container(kind, id), now - LAST, now)
        .ok()?;
    points.last().map(|p| p.value)
}

fn random_fill() -> f64 {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new().hash_one(0u8);
    (r % 1_000_000) as f64 / 2_000_000.0
}

/// CPUBurst.
pub const ENTRY: Entry = Entry {
    gate: features::CPU_BURST,
    build: |d| Box::new(CpuBurst::new(d.executor.clone(), d.host.clone())),
};

#[cfg(test)]
#[path = "cpuburst_tests.rs"]
mod tests;
