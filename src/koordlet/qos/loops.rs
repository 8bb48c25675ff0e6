//! The QoS strategies as periodic loops of the running koordlet, fed by the informer and
//! the metric store.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::kernel::Shutdown;
use crate::koordlet::informer::{Informer, States};
use crate::koordlet::metrics::{KoordletMetrics, QosLabels};
use crate::koordlet::store::{MetricKind, MetricStore, SeriesKey};
use crate::os::system::Host;

use super::executor::Executor;
use super::{cpusuppress, evict, suppress};

pub struct QosCtx {
    pub informer: Informer,
    pub store: Arc<MetricStore>,
    pub metrics: Arc<KoordletMetrics>,
    pub shutdown: Shutdown,
}

/// Samples at most this old count as "last".
pub(super) const LAST: i64 = 2_000;

pub(super) fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

pub(super) async fn pause(shutdown: &Shutdown, d: Duration) -> bool {
    tokio::select! {
        _ = shutdown.draining() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

/// The last node sample and per-pod samples of two kinds, scaled (1000 for cores → milli).
pub(super) fn last_samples(
    ctx: &QosCtx,
    states: &States,
    node: MetricKind,
    pod: MetricKind,
    scale: f64,
) -> (Option<i64>, HashMap<String, i64>) {
    let now = now_ms();
    let last = |key: &SeriesKey| -> Option<i64> {
        let points = ctx.store.query(key, now - LAST, now).ok()?;
        points.last().map(|p| (p.value * scale).round() as i64)
    };
    let pods = states
        .pods
        .iter()
        .filter_map(|p| last(&SeriesKey::pod(pod, &p.uid)).map(|v| (p.uid.clone(), v)))
        .collect();
    (last(&SeriesKey::node(node)), pods)
}

pub(super) fn count(ctx: &QosCtx, strategy: &str, resource: String, n: u64) {
    let labels = QosLabels {
        strategy: strategy.into(),
        resource,
    };
    ctx.metrics.qos_changes.get_or_create(&labels).inc_by(n);
}

/// cpusuppress every second once the informer synced (`pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go`).
pub async fn cpusuppress(
    ctx: QosCtx,
    ex: Arc<Executor>,
    host: Host,
    client: kube::Client,
) -> anyhow::Result<()> {
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    let topo = host.cpu_topology().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "no CPU topology; the cpuset policy cannot pick CPUs");
        Vec::new()
    });
    let mut mem = suppress::Memory::default();
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        let (node, pods) = last_samples(
            &ctx,
            &states,
            MetricKind::NodeCpuUsage,
            MetricKind::PodCpuUsage,
            1000.0,
        );
        let usage = suppress::Usage { node, pods };
        let strategy = suppress::strategy(&states);
        if let Some(i) = suppress::inputs(&states, &usage, strategy) {
            ctx.metrics
                .be_suppress_milli
                .set(cpusuppress::suppress_milli(&i));
        }
        let changes = suppress::pass(&states, &usage, &topo, &ex, &mut mem);
        for c in &changes {
            count(&ctx, "cpusuppress", format!("{:?}", c.resource), 1);
        }
        // One event per round that changed the besteffort QoS level (not per pod/container).
        let qos_dir = ex
            .cgroups()
            .qos_dir(crate::api::extension::qos::KubeQoS::BestEffort);
        if let Some(c) = changes.iter().find(|c| c.dir == qos_dir.as_str())
            && let Some(node) = states.node.as_ref().and_then(|n| n.metadata.name.clone())
        {
            let msg = format!("best-effort {:?} {} -> {}", c.resource, c.old, c.new);
            evict::node_event(&client, &node, "BECPUSuppressed", &msg).await;
        }
    }
    Ok(())
}

/// Every second, writes what `updates` wants for each pod (levels: pod, then containers).
async fn reconcile<F>(
    ctx: QosCtx,
    ex: Arc<Executor>,
    strategy: &'static str,
    updates: F,
) -> anyhow::Result<()>
where
    F: Fn(&States, &crate::koordlet::informer::PodMeta) -> Vec<Vec<super::executor::Update>>,
{
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        for pod in states.pods.iter() {
            record(
                &ctx,
                strategy,
                &pod.name,
                ex.leveled(&updates(&states, pod)),
            );
        }
    }
    Ok(())
}

/// BatchResource: BE pod and container cgroups get shares, quota and memory limits from
/// their batch resources.
pub async fn batchresource(ctx: QosCtx, ex: Arc<Executor>) -> anyhow::Result<()> {
    reconcile(ctx, ex, "batchresource", |states, pod| {
        let s = suppress::strategy(states);
        let by_quota =
            s.enable == Some(true) && s.cpu_suppress_policy.as_deref() == Some("cfsQuota");
        let ratio = super::batchresource::normalization_ratio(states.node.as_deref());
        super::batchresource::updates(pod, by_quota, ratio)
    })
    .await
}

/// CPUBurst every second (`pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst.go`): `cfs_burst_us` for LS pods, then the
/// cfsQuotaBurst scaling of throttled containers under the node's share-pool state.
pub async fn cpuburst(ctx: QosCtx, ex: Arc<Executor>, host: Host) -> anyhow::Result<()> {
    use super::cfsquotaburst::{Limiter, node_state};
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    let topo_cpus = host.cpu_topology().map(|t| t.len()).unwrap_or(0);
    let clock = std::time::Instant::now();
    let mut limiters: HashMap<String, Limiter> = HashMap::new();
    let cg = ex.cgroups().clone();
    let quota = move |d: &crate::os::CgroupDir| cg.read_i64(crate::os::Resource::CfsQuota, d).ok();
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        let cfg = super::cpuburst::node_strategy(&states);
        let cpus = if topo_cpus > 0 {
            topo_cpus
        } else {
            node_cpus(&states)
        };
        let (node_used, pool) = share_pool(&ctx, &states);
        let now = clock.elapsed().as_secs_f64();
        let env = super::cpuburst::CfsEnv {
            node: node_state(
                cfg.share_pool_threshold_percent.unwrap_or(50),
                cpus,
                node_used,
                &pool,
            ),
            now,
            quota: &quota,
            throttled: &|id| last_container(&ctx, MetricKind::ContainerCpuThrottled, id),
            usage: &|id| last_container(&ctx, MetricKind::ContainerCpuUsage, id),
            fill: &random_fill,
        };
        for pod in states.pods.iter() {
            let mut results = ex.leveled(&super::cpuburst::updates(&states, pod, &quota));
            for u in super::cpuburst::cfs_updates(&states, pod, &env, &mut limiters) {
                let r = ex.update(&u);
                let failed = r.is_err();
                results.push(r);
                if failed {
                    break; // later steps rely on this one (parent ≥ child, burst ≤ quota)
                }
            }
            record(&ctx, "cpuburst", &pod.name, results);
        }
        limiters.retain(|_, l| !l.expired(now));
    }
    Ok(())
}

fn record(
    ctx: &QosCtx,
    strategy: &'static str,
    pod: &str,
    results: Vec<Result<super::executor::Outcome, super::executor::ExecError>>,
) {
    for r in results {
        match r {
            Ok(super::executor::Outcome::Written(c)) => {
                count(ctx, strategy, format!("{:?}", c.resource), 1)
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(strategy, pod, error = %e, "cgroup value rejected"),
        }
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
            qos: crate::api::extension::qos::pod_qos_class(&p.pod),
            request_milli: crate::api::pod::pod_requests(&p.pod)
                .get(crate::api::extension::resources::CPU)
                .copied()
                .unwrap_or(0),
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

/// CgroupReconcile (memory QoS) every second: QoS, pod and container levels at once.
pub async fn cgreconcile(ctx: QosCtx, ex: Arc<Executor>) -> anyhow::Result<()> {
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        for r in ex.leveled(&super::cgreconcile::updates(&states, ex.cgroups())) {
            match r {
                Ok(super::executor::Outcome::Written(c)) => {
                    count(&ctx, "cgreconcile", format!("{:?}", c.resource), 1)
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "memory QoS value rejected"),
            }
        }
    }
    Ok(())
}

/// SystemConfig every second: kernel memory knobs from the NodeSLO systemStrategy.
pub async fn sysreconcile(ctx: QosCtx, host: Host) -> anyhow::Result<()> {
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        for (knob, _, _) in super::sysreconcile::pass(&states, &host) {
            count(&ctx, "sysreconcile", format!("{knob:?}"), 1);
        }
    }
    Ok(())
}

/// RdtResctrl every second, when the host supports it (else one warning and done).
pub async fn resctrl(ctx: QosCtx, host: Host, cgroups: crate::os::Cgroups) -> anyhow::Result<()> {
    match super::resctrl::supported(&host) {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(root = %host.resctrl_root().display(), "resctrl unsupported here (no cat_l3/mba or not mounted); LLC/MBA isolation skipped");
            return Ok(());
        }
        Err(e) => {
            tracing::warn!(error = %e, "resctrl support unknown; LLC/MBA isolation skipped");
            return Ok(());
        }
    }
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        match super::resctrl::pass(&states, &host, &cgroups) {
            Ok(written) => {
                for w in written {
                    count(&ctx, "resctrl", w, 1);
                }
            }
            Err(e) => tracing::warn!(error = %e, "resctrl round failed"),
        }
    }
    Ok(())
}

/// BlkIOReconcile every second (cgroup v1): BE block-device throttles and weight.
pub async fn blkio(ctx: QosCtx, host: Host, cgroups: crate::os::Cgroups) -> anyhow::Result<()> {
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        for w in super::blkio::pass(&states, &host, &cgroups) {
            tracing::info!(change = %w, "blkio updated");
            count(
                &ctx,
                "blkio",
                w.split_whitespace().next().unwrap_or("").to_string(),
                1,
            );
        }
    }
    Ok(())
}

/// What the QoS loops share.
pub struct Deps {
    pub executor: Arc<Executor>,
    pub host: Host,
    pub client: kube::Client,
    pub collect_interval: Duration,
    /// Shared by every eviction strategy (one memory of recently evicted pods).
    pub evictor: Arc<super::evict::Evictor>,
}

/// Starts every QoS loop whose koordlet feature gate is on.
pub fn spawn(
    gates: &crate::koordlet::features::Gates,
    ctx: impl Fn() -> QosCtx,
    d: Deps,
    tasks: &crate::kernel::Tasks,
) {
    let ex = || d.executor.clone();
    let cg = || d.executor.cgroups().clone();
    if gates.enabled("BECPUSuppress") {
        tasks.spawn(
            "koordlet/qos/cpusuppress",
            cpusuppress(ctx(), ex(), d.host.clone(), d.client.clone()),
        );
    }
    if gates.enabled("BatchResource") {
        tasks.spawn("koordlet/qos/batchresource", batchresource(ctx(), ex()));
    }
    if gates.enabled("CPUBurst") {
        let f = cpuburst(ctx(), ex(), d.host.clone());
        tasks.spawn("koordlet/qos/cpuburst", f);
    }
    if gates.enabled("CgroupReconcile") {
        tasks.spawn("koordlet/qos/cgreconcile", cgreconcile(ctx(), ex()));
    }
    if gates.enabled("RdtResctrl") {
        tasks.spawn("koordlet/qos/resctrl", resctrl(ctx(), d.host.clone(), cg()));
    }
    if gates.enabled("BlkIOReconcile") {
        tasks.spawn("koordlet/qos/blkio", blkio(ctx(), d.host.clone(), cg()));
    }
    if gates.enabled("SystemConfig") {
        tasks.spawn(
            "koordlet/qos/sysreconcile",
            sysreconcile(ctx(), d.host.clone()),
        );
    }
    use super::evictloops as el;
    let evictor = || d.evictor.clone();
    if gates.enabled("BECPUEvict") {
        let f = el::cpuevict(ctx(), d.client.clone(), evictor(), d.collect_interval);
        tasks.spawn("koordlet/qos/cpuevict", f);
    }
    if gates.enabled("BEMemoryEvict") {
        let f = el::memoryevict(ctx(), d.client.clone(), evictor());
        tasks.spawn("koordlet/qos/memoryevict", f);
    }
    for feature in ["CPUEvict", "MemoryEvict"] {
        if gates.enabled(feature) {
            let f = el::usage_evict(ctx(), d.client.clone(), evictor(), feature);
            tasks.spawn(format!("koordlet/qos/{}", feature.to_lowercase()), f);
        }
    }
    for (feature, cpu) in [
        ("CPUAllocatableEvict", true),
        ("MemoryAllocatableEvict", false),
    ] {
        if gates.enabled(feature) {
            let f = el::allocatable_evict(ctx(), d.client.clone(), evictor(), cpu);
            tasks.spawn(format!("koordlet/qos/{}", feature.to_lowercase()), f);
        }
    }
}
