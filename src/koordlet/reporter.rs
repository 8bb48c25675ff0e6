//! The NodeMetric reporter: every report interval, the node's usage averaged over the
//! aggregation window, aggregated percentiles per duration, system usage, per-pod usage and
//! the prediction results, written to `NodeMetric.status` (status subresource only).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};

use super::informer::States;
use super::store::{Aggregate, MetricKind, MetricStore, SeriesKey, StoreError};
use crate::api::duration;
use crate::api::extension::priority::pod_priority_class_with_default;
use crate::api::extension::qos::pod_qos_class_with_default;
use crate::api::quantity::{cpu_from_milli, from_int};
use crate::api::slo::{
    AggregatedUsage, HostApplicationMetricInfo, NUMAMetricInfo, NodeMetric, NodeMetricInfo,
    NodeMetricStatus, PodMetricInfo, ReclaimableMetric, ResourceMap,
};

/// The collect policy in force: NodeMetric spec over Koordinator's defaults, with floors.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub aggregate: Duration,
    pub interval: Duration,
    pub durations: Vec<Duration>,
    pub memory_policy: String,
}

/// Floors under the spec values (Koordinator: 30 s report interval, 60 s window).
#[derive(Debug, Clone, Copy)]
pub struct Floors {
    pub min_interval: Duration,
    pub min_aggregate: Duration,
    /// A ceiling over the report interval (embedded mode), above the floor.
    pub max_interval: Option<Duration>,
}

/// Koordinator's `usageWithPageCache`: node and pod memory reported with page cache.
pub const WITH_PAGE_CACHE: &str = "usageWithPageCache";
/// Koordinator's `usageWithHotPageCache`: memory with page cache less kidled's cold pages
/// (the ColdPageCollector's series); while that collector has reported nothing in the
/// window — kidled absent, the gate off — the policy reports `usageWithoutPageCache`, as
/// Koordinator does before its cold-memory collection starts.
pub const WITH_HOT_PAGE_CACHE: &str = "usageWithHotPageCache";

/// The memory series a report takes under `policy`: (node, pod, host application).
fn memory_kinds(
    store: &MetricStore,
    policy: &str,
    (start, now): (i64, i64),
) -> Result<(MetricKind, MetricKind, MetricKind), StoreError> {
    use MetricKind as K;
    let hot = SeriesKey::node(K::NodeMemoryWithHotPage);
    Ok(match policy {
        WITH_PAGE_CACHE => (
            K::NodeMemoryWithPageCache,
            K::PodMemoryWithPageCache,
            K::HostAppMemoryWithPageCache,
        ),
        WITH_HOT_PAGE_CACHE if store.aggregate(&hot, start, now)?.is_some() => (
            K::NodeMemoryWithHotPage,
            K::PodMemoryWithHotPage,
            K::HostAppMemoryWithHotPage,
        ),
        _ => (K::NodeMemoryUsage, K::PodMemoryUsage, K::HostAppMemoryUsage),
    })
}

/// Whether the node's NodeMetric asks for memory with page cache.
pub fn with_page_cache(nm: Option<&NodeMetric>) -> bool {
    nm.and_then(|n| n.spec.metric_collect_policy.as_ref())
        .and_then(|s| s.node_memory_collect_policy.as_deref())
        == Some(WITH_PAGE_CACHE)
}

pub fn policy(nm: Option<&NodeMetric>, floors: Floors) -> Policy {
    let spec = nm.and_then(|n| n.spec.metric_collect_policy.as_ref());
    let secs = |v: Option<i64>, default: u64| {
        Duration::from_secs(v.filter(|v| *v > 0).map_or(default, |v| v as u64))
    };
    let durations = spec
        .and_then(|s| s.node_aggregate_policy.as_ref())
        .and_then(|p| p.durations.as_ref())
        .map(|d| {
            d.iter()
                .filter_map(|s| duration::parse(s).ok())
                .collect::<Vec<_>>()
        })
        .filter(|d: &Vec<Duration>| !d.is_empty())
        .unwrap_or_else(|| {
            vec![
                Duration::from_secs(300),
                Duration::from_secs(600),
                Duration::from_secs(1800),
            ]
        });
    Policy {
        aggregate: secs(spec.and_then(|s| s.aggregate_duration_seconds), 300)
            .max(floors.min_aggregate),
        interval: {
            let i = secs(spec.and_then(|s| s.report_interval_seconds), 60);
            floors
                .max_interval
                .map_or(i, |m| i.min(m))
                .max(floors.min_interval)
        },
        durations,
        memory_policy: spec
            .and_then(|s| s.node_memory_collect_policy.clone())
            .unwrap_or_else(|| "usageWithoutPageCache".into()),
    }
}

fn resources(cpu_cores: f64, memory: f64) -> ResourceMap {
    let mut r = BTreeMap::new();
    r.insert(
        "cpu".to_string(),
        cpu_from_milli((cpu_cores * 1000.0) as i64),
    );
    r.insert("memory".to_string(), from_int(memory as i64));
    ResourceMap::from_resources(r)
}

type Pick = fn(&Aggregate) -> f64;

fn avg_of(
    store: &MetricStore,
    cpu: &SeriesKey,
    mem: &SeriesKey,
    start: i64,
    end: i64,
) -> Result<Option<ResourceMap>, StoreError> {
    match (
        store.aggregate(cpu, start, end)?,
        store.aggregate(mem, start, end)?,
    ) {
        (Some(c), Some(m)) => Ok(Some(resources(c.avg, m.avg))),
        _ => Ok(None),
    }
}

/// avg/p50/p90/p95/p99 over `[now−d, now]`; empty maps when samples span less than half
/// of `d` (Koordinator's cold-start filter).
fn aggregated(
    store: &MetricStore,
    cpu: &SeriesKey,
    mem: &SeriesKey,
    now: i64,
    d: Duration,
) -> Result<AggregatedUsage, StoreError> {
    let start = now - d.as_millis() as i64;
    let (c, m) = (
        store.aggregate(cpu, start, now)?,
        store.aggregate(mem, start, now)?,
    );
    let half = d.as_millis() as i64 / 2;
    let picks: [(&str, Pick); 5] = [
        ("avg", |a| a.avg),
        ("p50", |a| a.p50),
        ("p90", |a| a.p90),
        ("p95", |a| a.p95),
        ("p99", |a| a.p99),
    ];
    let usage = picks
        .iter()
        .map(|(name, pick)| {
            let map = match (&c, &m) {
                (Some(c), Some(m)) if c.span_ms >= half && m.span_ms >= half => {
                    resources(pick(c), pick(m))
                }
                _ => ResourceMap {
                    resources: Some(BTreeMap::new()),
                    devices: None,
                },
            };
            (name.to_string(), map)
        })
        .collect();
    Ok(AggregatedUsage {
        usage: Some(usage),
        duration: Some(duration::format(d)),
    })
}

/// The status for `now` (ms). `reclaimable` and `peak` come from the prediction.
pub fn build_status(
    store: &MetricStore,
    states: &States,
    policy: &Policy,
    now: i64,
    prediction: Option<(BTreeMap<String, Quantity>, BTreeMap<String, Quantity>)>,
) -> Result<NodeMetricStatus, StoreError> {
    let start = now - policy.aggregate.as_millis() as i64;
    let (node_mem, pod_mem, app_mem) = memory_kinds(store, &policy.memory_policy, (start, now))?;
    let (ncpu, nmem) = (
        SeriesKey::node(MetricKind::NodeCpuUsage),
        SeriesKey::node(node_mem),
    );
    let (scpu, smem) = (
        SeriesKey::node(MetricKind::SysCpuUsage),
        SeriesKey::node(MetricKind::SysMemoryUsage),
    );
    let mut node_usage = avg_of(store, &ncpu, &nmem, start, now)?.unwrap_or_default();
    let gpu_list = gpus_of(store);
    let gpus = gpu_usages(store, &gpu_list, None, (start, now))?;
    node_usage.devices = (!gpus.is_empty()).then_some(gpus);
    let system_usage = avg_of(store, &scpu, &smem, start, now)?.unwrap_or_default();
    let mut node_aggs = Vec::new();
    let mut sys_aggs = Vec::new();
    for d in &policy.durations {
        node_aggs.push(aggregated(store, &ncpu, &nmem, now, *d)?);
        sys_aggs.push(aggregated(store, &scpu, &smem, now, *d)?);
    }
    let numa_usages = numa_usages(store, start, now)?;
    let mut pods = Vec::new();
    for p in states.pods.iter() {
        let (c, m) = (
            SeriesKey::pod(MetricKind::PodCpuUsage, &p.uid),
            SeriesKey::pod(pod_mem, &p.uid),
        );
        let Some(mut usage) = avg_of(store, &c, &m, start, now)? else {
            continue;
        };
        let devices = gpu_usages(store, &gpu_list, Some(&p.uid), (start, now))?;
        usage.devices = (!devices.is_empty()).then_some(devices);
        pods.push(PodMetricInfo {
            name: Some(p.name.clone()),
            namespace: Some(p.namespace.clone()),
            pod_usage: usage,
            priority: Some(pod_priority_class_with_default(&p.pod).name().to_string()),
            qos: Some(pod_qos_class_with_default(&p.pod).name().to_string()),
            extensions: None,
        });
    }
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut apps = Vec::new();
    for app in &states.slo().host_applications {
        let Some(name) = app.name.clone() else {
            continue;
        };
        let (c, m) = (
            SeriesKey::host_app(MetricKind::HostAppCpuUsage, &name),
            SeriesKey::host_app(app_mem, &name),
        );
        if let Some(usage) = avg_of(store, &c, &m, start, now)? {
            apps.push(HostApplicationMetricInfo {
                name: Some(name),
                usage,
                priority: app.priority.clone(),
                qos: app.qos.clone(),
            });
        }
    }
    apps.sort_by(|a, b| a.name.cmp(&b.name));
    let (reclaimable, peak) = match prediction {
        Some((r, p)) => (
            Some(ReclaimableMetric {
                resource: ResourceMap::from_resources(r),
            }),
            Some(ReclaimableMetric {
                resource: ResourceMap::from_resources(p),
            }),
        ),
        None => (None, None),
    };
    let ts = k8s_openapi::jiff::Timestamp::from_millisecond(now)
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now());
    Ok(NodeMetricStatus {
        update_time: Some(Time(ts)),
        node_metric: Some(NodeMetricInfo {
            node_usage,
            aggregated_node_usages: Some(node_aggs),
            system_usage,
            aggregated_system_usages: Some(sys_aggs),
            numa_usages: (!numa_usages.is_empty()).then_some(numa_usages),
        }),
        pods_metric: Some(pods),
        host_application_metric: (!apps.is_empty()).then_some(apps),
        prod_reclaimable_metric: reclaimable,
        prod_peak_metric: peak,
    })
}

/// The node's GPUs (minor, uuid) from the GPU collector's series.
fn gpus_of(store: &MetricStore) -> Vec<(u32, String)> {
    let mut out: Vec<(u32, String)> = store
        .labels_of(MetricKind::NodeGpuCoreUsage)
        .into_iter()
        .filter_map(|labels| {
            let get = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            Some((get("gpu_minor")?.parse().ok()?, get("gpu_device_uuid")?))
        })
        .collect();
    out.sort();
    out
}

/// Per GPU: window averages of utilisation, memory used and its share of the GPU's
/// memory — the node's (`nodeUsage.devices`) or, with `pod`, that pod's processes'
/// (`podUsage.devices`, Koordinator's `collectPodGPUMetric`).
fn gpu_usages(
    store: &MetricStore,
    gpus: &[(u32, String)],
    pod: Option<&str>,
    (start, now): (i64, i64),
) -> Result<Vec<crate::api::scheduling::DeviceInfo>, StoreError> {
    use crate::api::extension::resources::{GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO};
    use crate::koordlet::collectors::gpu::{key, owner_key};
    let mut out = Vec::new();
    for (minor, uuid) in gpus {
        let avg = |k: SeriesKey| -> Result<Option<f64>, StoreError> {
            Ok(store.aggregate(&k, start, now)?.map(|a| a.avg))
        };
        let series = |node, of_pod| match pod {
            None => key(node, *minor, uuid),
            Some(uid) => owner_key(of_pod, ("pod_uid", uid), *minor, uuid),
        };
        let (Some(core), Some(used)) = (
            avg(series(
                MetricKind::NodeGpuCoreUsage,
                MetricKind::PodGpuCoreUsage,
            ))?,
            avg(series(
                MetricKind::NodeGpuMemoryUsage,
                MetricKind::PodGpuMemoryUsage,
            ))?,
        ) else {
            continue;
        };
        let total = avg(key(MetricKind::NodeGpuMemoryTotal, *minor, uuid))?.unwrap_or(0.0);
        let ratio = if total > 0.0 {
            used * 100.0 / total
        } else {
            0.0
        };
        let q = |v: f64| Quantity((v.round() as i64).to_string());
        out.push(crate::api::scheduling::DeviceInfo {
            type_: Some("gpu".into()),
            uuid: Some(uuid.to_string()),
            minor: i32::try_from(*minor).ok(),
            health: true,
            resources: Some(BTreeMap::from([
                (GPU_CORE.to_string(), q(core)),
                (GPU_MEMORY.to_string(), q(used)),
                (GPU_MEMORY_RATIO.to_string(), q(ratio)),
            ])),
            ..Default::default()
        });
    }
    Ok(out)
}

/// `numaUsages`: each NUMA node's average node and system usage over the window, by id.
fn numa_usages(
    store: &MetricStore,
    start: i64,
    now: i64,
) -> Result<Vec<NUMAMetricInfo>, StoreError> {
    let mut out = Vec::new();
    for n in 0..1024u32 {
        let (c, m) = (
            SeriesKey::numa(MetricKind::NodeNumaCpuUsage, n),
            SeriesKey::numa(MetricKind::NodeNumaMemoryUsage, n),
        );
        let Some(node_usage) = avg_of(store, &c, &m, start, now)? else {
            break;
        };
        let (sc, sm) = (
            SeriesKey::numa(MetricKind::SysNumaCpuUsage, n),
            SeriesKey::numa(MetricKind::SysNumaMemoryUsage, n),
        );
        // Without system samples for this NUMA node, its node usage alone (Koordinator's).
        let system_usage = avg_of(store, &sc, &sm, start, now)?.unwrap_or_default();
        out.push(NUMAMetricInfo {
            numa_node_id: n as i32,
            node_usage,
            system_usage,
        });
    }
    Ok(out)
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("writing NodeMetric/{node} status: {source}")]
    Api { node: String, source: kube::Error },
}

/// Writes the status, re-reading the object on conflicts. Skipped when the NodeMetric does
/// not exist (the manager creates it).
pub async fn write_status(
    client: &kube::Client,
    node: &str,
    status: NodeMetricStatus,
) -> Result<bool, ReportError> {
    let api: Api<NodeMetric> = Api::all(client.clone());
    let err = |source| ReportError::Api {
        node: node.to_string(),
        source,
    };
    for _ in 0..5 {
        let Some(mut nm) = api.get_opt(node).await.map_err(err)? else {
            return Ok(false);
        };
        nm.status = Some(status.clone());
        match api.replace_status(node, &PostParams::default(), &nm).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(err(e)),
        }
    }
    Ok(false)
}

#[cfg(test)]
#[path = "reporter_tests.rs"]
mod tests;
