//! What every QoS strategy shares: the context it runs in (informer, metric store,
//! metrics, shutdown), the last samples it decides from, and how it counts what it changed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::kernel::Shutdown;
use crate::koordlet::informer::{Informer, States};
use crate::koordlet::metrics::{KoordletMetrics, QosLabels};
use crate::koordlet::store::{MetricKind, MetricStore, SeriesKey};

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

/// The last node sample and per-pod samples of two kinds, scaled (1000 for cores → milli).
pub(super) fn last_samples(
    ctx: &QosCtx,
    states: &States,
    node: MetricKind,
    pod: MetricKind,
    scale: f64,
) -> (Option<i64>, HashMap<String, i64>) {
    let now = now_ms();
    let last = |key: &SeriesKey| last_scaled(ctx, key, now, scale);
    let pods = states
        .pods
        .iter()
        .filter_map(|p| last(&SeriesKey::pod(pod, &p.uid)).map(|v| (p.uid.clone(), v)))
        .collect();
    (last(&SeriesKey::node(node)), pods)
}

/// A series' last sample (within [`LAST`] of `now`) times `scale`, rounded.
fn last_scaled(ctx: &QosCtx, key: &SeriesKey, now: i64, scale: f64) -> Option<i64> {
    let points = ctx.store.query(key, now - LAST, now).ok()?;
    points.last().map(|p| (p.value * scale).round() as i64)
}

/// The last CPU sample of each NodeSLO host application, in milli-cores, by name
/// (Koordinator's `CollectAllHostAppMetricsLast`); one without a recent sample is absent.
pub(super) fn last_host_app_cpu(ctx: &QosCtx, states: &States) -> HashMap<String, i64> {
    let now = now_ms();
    let apps = &states.slo().host_applications;
    apps.iter()
        .filter_map(|a| a.name.as_deref())
        .filter_map(|name| {
            let key = SeriesKey::host_app(MetricKind::HostAppCpuUsage, name);
            Some((name.to_string(), last_scaled(ctx, &key, now, 1000.0)?))
        })
        .collect()
}

/// The last node and per-pod CPU samples, in milli-cores.
pub(super) fn last_cpu(ctx: &QosCtx, states: &States) -> (Option<i64>, HashMap<String, i64>) {
    last_samples(
        ctx,
        states,
        MetricKind::NodeCpuUsage,
        MetricKind::PodCpuUsage,
        1000.0,
    )
}

/// The last node and per-pod memory samples, in bytes.
pub(super) fn last_memory(ctx: &QosCtx, states: &States) -> (Option<i64>, HashMap<String, i64>) {
    last_samples(
        ctx,
        states,
        MetricKind::NodeMemoryUsage,
        MetricKind::PodMemoryUsage,
        1.0,
    )
}

pub(super) fn count(ctx: &QosCtx, strategy: &str, resource: String, n: u64) {
    let labels = QosLabels {
        strategy: strategy.into(),
        resource,
    };
    ctx.metrics.qos_changes.get_or_create(&labels).inc_by(n);
}

pub(super) fn record(
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

/// What the QoS strategies share.
pub struct Deps {
    pub executor: Arc<super::executor::Executor>,
    pub host: crate::os::system::Host,
    pub client: kube::Client,
    pub collect_interval: Duration,
    /// CPUSetAllocator lifts pinned pods' CFS quota (not with `--disable-unset-cpu-quota`).
    pub unset_cpu_quota: bool,
    /// `koordlet.kubelet.cpuManagerStateFile`.
    pub kubelet_state: std::path::PathBuf,
    /// `koordlet.kubelet.rootDir`: where pods' volumes are mounted.
    pub kubelet_root: std::path::PathBuf,
    /// The BECPUManager gate: the cpuset hook owns NUMA-bound BE pods' cpusets.
    pub be_cpu_manager: bool,
    /// The CoreSched gate: cpusuppress's `cpuIdle` policy shares besteffort's `cpu.idle`.
    pub core_sched: bool,
    /// Shared by every eviction strategy (one memory of recently evicted pods).
    pub evictor: Arc<super::evictor::Evictor>,
    /// NodeStorageInfoCollector's interval (blkio's disk maps).
    pub storage_info_interval: Duration,
}
