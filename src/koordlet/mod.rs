//! koordlet: the node agent. This part measures: host metrics through the rooted host
//! layer, a sled time-series store, the NodeMetric reporter and peak prediction.

pub mod advisor;
pub mod collectors;
pub mod features;
pub mod informer;
pub mod metrics;
pub mod prediction;
pub mod qos;
pub mod reporter;
pub mod store;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::bus::NodeUsageUpdate;
use crate::kernel::{ReadyHandle, RoleCtx, Shutdown};
use crate::os::system::Host;
use crate::os::{Cgroups, Driver};
use advisor::Advisor;
use informer::{Informer, PodSource, States};
use metrics::{CollectorLabels, ContainerLabels, KoordletMetrics, NodeLabels, PodLabels};
use prediction::Predictor;
use store::{MetricKind, MetricStore, SeriesKey, StoreOptions};

/// The `koordlet` configuration section.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// Host /proc (the DaemonSet runs with hostPID, so `/proc`).
    pub proc_root: PathBuf,
    /// Host /sys (DaemonSet: `/host-sys`).
    pub sys_root: PathBuf,
    /// Host cgroup mount (DaemonSet: `/host-cgroup`).
    pub cgroup_root: PathBuf,
    /// `cgroupfs` or `systemd`; unset: detect (kubepods.slice → systemd, kubepods → cgroupfs).
    pub cgroup_driver: Option<Driver>,
    /// The kubelet's `--cgroup-root` ('' = the root).
    pub cgroup_parent: String,
    pub kubelet: KubeletConfig,
    /// Koordinator's koordlet feature gates (`CPICollector`, `PSICollector`, ...).
    pub feature_gates: BTreeMap<String, bool>,
    pub collectors: collectors::Config,
    pub store: StoreConfig,
    pub reporter: ReporterConfig,
    pub prediction: prediction::Config,
    pub eviction: EvictionConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            proc_root: "/proc".into(),
            sys_root: "/sys".into(),
            cgroup_root: "/sys/fs/cgroup".into(),
            cgroup_driver: None,
            cgroup_parent: String::new(),
            kubelet: KubeletConfig::default(),
            feature_gates: BTreeMap::new(),
            collectors: collectors::Config::default(),
            store: StoreConfig::default(),
            reporter: ReporterConfig::default(),
            prediction: prediction::Config::default(),
            eviction: EvictionConfig::default(),
        }
    }
}

/// How the QoS strategies evict (`pkg/koordlet/qosmanager/plugins/util/evictor.go`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct EvictionConfig {
    /// Koordinator's `--only-evict-by-api`: never stop containers through the runtime.
    #[serde(rename = "onlyEvictByAPI")]
    pub only_evict_by_api: bool,
    /// The CRI socket for every container (`unix:///run/containerd/containerd.sock`).
    /// Unset: discovered by the container id's scheme under `varRunRoot`.
    pub runtime_endpoint: Option<String>,
    /// The host's /var/run as mounted for the koordlet (DaemonSet: `/host-var-run`).
    pub var_run_root: PathBuf,
}

impl Default for EvictionConfig {
    fn default() -> Self {
        Self {
            only_evict_by_api: false,
            runtime_endpoint: None,
            var_run_root: "/var/run".into(),
        }
    }
}

/// Where the node's pods come from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct KubeletConfig {
    /// The kubelet's pod list (`https://<node>:10250/pods` or `http://127.0.0.1:10255/pods`).
    /// Unset: watch the API server with `spec.nodeName=<node>`.
    pub pods_url: Option<String>,
    /// Service account token for HTTPS.
    pub token_file: PathBuf,
    pub sync_interval_seconds: u64,
    pub timeout_seconds: u64,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            pods_url: None,
            token_file: "/var/run/secrets/kubernetes.io/serviceaccount/token".into(),
            sync_interval_seconds: 10,
            timeout_seconds: 3,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct StoreConfig {
    pub retention_hours: u64,
    /// Hard cap; the oldest points go first when it is exceeded.
    pub max_disk_mib: u64,
    /// sled page cache.
    pub cache_mib: u64,
    pub gc_interval_seconds: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            retention_hours: 12,
            max_disk_mib: 100,
            cache_mib: 1,
            gc_interval_seconds: 300,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ReporterConfig {
    pub enable_node_metric_report: bool,
    /// Floor under `NodeMetric.spec.metricCollectPolicy.reportIntervalSeconds`.
    pub min_report_interval_seconds: u64,
    /// Floor under `aggregateDurationSeconds`.
    pub min_aggregate_duration_seconds: u64,
}

impl Default for ReporterConfig {
    fn default() -> Self {
        Self {
            enable_node_metric_report: true,
            min_report_interval_seconds: 30,
            min_aggregate_duration_seconds: 60,
        }
    }
}

/// Problems with the section, as (key, message).
pub fn validate(cfg: &Config) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in features::KOORDLET_GATES.problems(&cfg.feature_gates) {
        out.push(("featureGates".into(), e));
    }
    if let Some(url) = &cfg.kubelet.pods_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        out.push((
            "kubelet.podsUrl".into(),
            format!("{url:?} must be an http:// or https:// URL"),
        ));
    }
    out
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Runs the koordlet until the process drains.
pub async fn run(cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    let cluster = ctx.cluster()?.clone();
    if !crate::kernel::cluster::wait_reachable(&cluster.client, &ctx.shutdown).await {
        return Ok(());
    }
    let node = ctx.common.node_name.clone();
    let mut cgroups = Cgroups::detect(
        &cfg.cgroup_root,
        &cfg.cgroup_parent,
        cfg.cgroup_driver.unwrap_or_default(),
    )
    .with_context(|| format!("koordlet.cgroupRoot {}", cfg.cgroup_root.display()))?;
    if let Some(d) = cfg.cgroup_driver {
        cgroups = Cgroups::new(&cfg.cgroup_root, cgroups.version(), d, &cfg.cgroup_parent);
    }
    let host = Host::new(&cfg.proc_root, &cfg.sys_root);
    let store_dir = ctx.common.data_dir.join("koordlet").join("metrics");
    std::fs::create_dir_all(&store_dir)
        .with_context(|| format!("creating {}", store_dir.display()))?;
    let opts = StoreOptions {
        retention: Duration::from_secs(cfg.store.retention_hours * 3600),
        max_disk_bytes: cfg.store.max_disk_mib << 20,
        cache_bytes: cfg.store.cache_mib << 20,
    };
    let store = Arc::new(
        MetricStore::open(&store_dir, opts)
            .with_context(|| format!("opening the metric store at {}", store_dir.display()))?,
    );
    let source = match &cfg.kubelet.pods_url {
        Some(url) => PodSource::Kubelet(informer::pods::KubeletPods {
            url: url.clone(),
            token_file: Some(cfg.kubelet.token_file.clone()),
            sync_interval: Duration::from_secs(cfg.kubelet.sync_interval_seconds.max(1)),
            timeout: Duration::from_secs(cfg.kubelet.timeout_seconds.max(1)),
        }),
        None => PodSource::Api,
    };
    tracing::info!(%node, version = ?cgroups.version(), driver = ?cgroups.driver(), pods = ?cfg.kubelet.pods_url, "koordlet starting");
    let informer = informer::start(
        cluster.client.clone(),
        &node,
        cgroups.clone(),
        source,
        &ctx.tasks,
        &ctx.shutdown,
    );
    let metrics = KoordletMetrics::register(&ctx.metrics);
    let gates = features::KOORDLET_GATES
        .from_user(&cfg.feature_gates)
        .map_err(|e| anyhow::anyhow!("koordlet.featureGates: {e}"))?;
    for g in features::KOORDLET_GATES.switched_on_unimplemented(&cfg.feature_gates) {
        tracing::warn!(gate = %g, "koordlet feature gate switched on but not implemented by koord yet; ignored");
    }
    let collectors = collectors::registry(
        &cfg.collectors,
        gates.enabled("PSICollector"),
        gates.enabled("CPICollector"),
    );
    let qos_host = host.clone();
    let executor = Arc::new(qos::executor::Executor::new(
        cgroups.clone(),
        Duration::from_secs(60),
    ));
    let advisor = Advisor::new(collectors, host, cgroups);
    let predictor = Arc::new(Mutex::new(Predictor::new(cfg.prediction.clone())));
    let synced = ctx.ready.child("informer");
    let collected = ctx.ready.child("first-collection");

    let loop_ctx = LoopCtx {
        informer: informer.clone(),
        store: store.clone(),
        metrics: metrics.clone(),
        shutdown: ctx.shutdown.clone(),
        node: node.clone(),
    };
    let base = Duration::from_secs(cfg.collectors.collect_res_used_interval_seconds.max(1));
    let bus = ctx.bus.clone();
    let l = loop_ctx.clone();
    ctx.tasks.spawn("koordlet/collect", async move {
        collect_loop(l, advisor, base, bus, synced, collected).await
    });
    let (l, client, rc, p) = (
        loop_ctx.clone(),
        cluster.client.clone(),
        cfg.reporter.clone(),
        predictor.clone(),
    );
    ctx.tasks.spawn("koordlet/report", async move {
        report_loop(l, client, rc, p, cfg.prediction.enabled).await
    });
    let (l, every) = (
        loop_ctx.clone(),
        Duration::from_secs(cfg.store.gc_interval_seconds.max(1)),
    );
    ctx.tasks
        .spawn("koordlet/store-gc", async move { gc_loop(l, every).await });
    let deps = qos::loops::Deps {
        executor,
        host: qos_host,
        client: cluster.client.clone(),
        collect_interval: base,
        evictor: Arc::new(qos::evict::Evictor::new(
            cfg.eviction.only_evict_by_api,
            qos::evictor::Runtimes {
                endpoint: cfg.eviction.runtime_endpoint.clone(),
                var_run: cfg.eviction.var_run_root.clone(),
            },
        )),
    };
    let l = loop_ctx.clone();
    qos::loops::spawn(&gates, move || l.qos(), deps, &ctx.tasks);
    if cfg.prediction.enabled {
        let l = loop_ctx.clone();
        ctx.tasks.spawn("koordlet/prediction", async move {
            prediction_loop(l, predictor).await
        });
    }
    ctx.ready.set(true);
    ctx.shutdown.draining().await;
    Ok(())
}

impl LoopCtx {
    fn qos(&self) -> qos::loops::QosCtx {
        qos::loops::QosCtx {
            informer: self.informer.clone(),
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            shutdown: self.shutdown.clone(),
        }
    }
}

#[derive(Clone)]
struct LoopCtx {
    informer: Informer,
    store: Arc<MetricStore>,
    metrics: Arc<KoordletMetrics>,
    shutdown: Shutdown,
    node: String,
}

/// Sleeps `d`; false when the process starts draining.
async fn pause(shutdown: &Shutdown, d: Duration) -> bool {
    tokio::select! {
        _ = shutdown.draining() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

async fn collect_loop(
    l: LoopCtx,
    mut advisor: Advisor,
    base: Duration,
    bus: crate::bus::Bus,
    synced: ReadyHandle,
    collected: ReadyHandle,
) -> anyhow::Result<()> {
    if !l.informer.wait_synced(&l.shutdown).await {
        return Ok(());
    }
    synced.set(true);
    let start = Instant::now();
    let mut tick = tokio::time::interval(base);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing: BTreeMap<&'static str, bool> = BTreeMap::new();
    loop {
        tokio::select! {
            _ = l.shutdown.draining() => break,
            _ = tick.tick() => {}
        }
        let states = l.informer.snapshot();
        let (now, mono) = (now_ms(), start.elapsed().as_nanos() as u64);
        let store = l.store.clone();
        let st = states.clone();
        let (back, samples, outcomes, stored) = tokio::task::spawn_blocking(move || {
            let (samples, outcomes) = advisor.pass(&st, now, mono);
            let stored = store.insert(&samples);
            (advisor, samples, outcomes, stored)
        })
        .await?;
        advisor = back;
        if let Err(e) = stored {
            tracing::error!(error = %e, "storing samples failed");
        }
        for o in &outcomes {
            let label = CollectorLabels {
                collector: o.collector.to_string(),
            };
            l.metrics
                .collector_disabled
                .get_or_create(&label)
                .set(i64::from(o.disabled.is_some()));
            let was_failing = failing
                .insert(o.collector, o.error.is_some())
                .unwrap_or(false);
            if let Some(e) = &o.error {
                l.metrics.collector_errors.get_or_create(&label).inc();
                if !was_failing {
                    tracing::warn!(collector = o.collector, error = %e, "collector failed");
                }
            }
        }
        publish(&l, &states, &samples, &bus);
        collected.set(true);
    }
    l.store.flush().await?;
    Ok(())
}

/// Usage gauges and the bus update for the local scheduler.
fn publish(l: &LoopCtx, states: &States, samples: &collectors::Samples, bus: &crate::bus::Bus) {
    let get = |k: &SeriesKey| samples.iter().find(|(s, _)| s == k).map(|(_, p)| p.value);
    let (cpu, mem) = (
        get(&SeriesKey::node(MetricKind::NodeCpuUsage)),
        get(&SeriesKey::node(MetricKind::NodeMemoryUsage)),
    );
    let nl = |r: &str| NodeLabels {
        node: l.node.clone(),
        resource: r.into(),
    };
    if let Some(c) = cpu {
        l.metrics.node_usage.get_or_create(&nl("cpu")).set(c);
    }
    if let Some(m) = mem {
        l.metrics.node_usage.get_or_create(&nl("memory")).set(m);
    }
    if let (Some(c), Some(m)) = (cpu, mem) {
        bus.node_usage.publish(NodeUsageUpdate {
            node: l.node.clone(),
            cpu_milli: (c * 1000.0) as i64,
            memory_bytes: m as i64,
            at: SystemTime::now(),
        });
    }
    let mut pods = Vec::new();
    let mut ctrs = Vec::new();
    for p in states.pods.iter() {
        for (kind, res) in [
            (MetricKind::PodCpuUsage, "cpu"),
            (MetricKind::PodMemoryUsage, "memory"),
        ] {
            if let Some(v) = get(&SeriesKey::pod(kind, &p.uid)) {
                pods.push((
                    PodLabels {
                        node: l.node.clone(),
                        namespace: p.namespace.clone(),
                        pod: p.name.clone(),
                        resource: res.into(),
                    },
                    v,
                ));
            }
        }
        for c in &p.containers {
            let id = informer::PodMeta::container_id(c);
            for (kind, res) in [
                (MetricKind::ContainerCpuUsage, "cpu"),
                (MetricKind::ContainerMemoryUsage, "memory"),
            ] {
                if let Some(v) = get(&SeriesKey::container(kind, id)) {
                    let labels = ContainerLabels {
                        node: l.node.clone(),
                        namespace: p.namespace.clone(),
                        pod: p.name.clone(),
                        container: c.name.clone(),
                        resource: res.into(),
                    };
                    ctrs.push((labels, v));
                }
            }
        }
    }
    l.metrics.set_pods(pods, ctrs);
}

async fn report_loop(
    l: LoopCtx,
    client: kube::Client,
    cfg: ReporterConfig,
    predictor: Arc<Mutex<Predictor>>,
    predict: bool,
) -> anyhow::Result<()> {
    let floors = reporter::Floors {
        min_interval: Duration::from_secs(cfg.min_report_interval_seconds.max(1)),
        min_aggregate: Duration::from_secs(cfg.min_aggregate_duration_seconds.max(1)),
    };
    if !l.informer.wait_synced(&l.shutdown).await {
        return Ok(());
    }
    let mut changes = l.informer.subscribe();
    loop {
        if l.informer.snapshot().node_metric.is_none() {
            // The manager creates NodeMetrics; report as soon as ours appears.
            tokio::select! {
                _ = l.shutdown.draining() => return Ok(()),
                r = changes.changed() => if r.is_err() { return Ok(()) },
            }
            continue;
        }
        let policy = reporter::policy(l.informer.snapshot().node_metric.as_deref(), floors);
        if !pause(&l.shutdown, policy.interval).await {
            return Ok(());
        }
        let states = l.informer.snapshot();
        if !cfg.enable_node_metric_report || states.node_metric.is_none() {
            continue;
        }
        let now = now_ms();
        let prediction = if predict {
            let p = predictor.lock().unwrap_or_else(|e| e.into_inner());
            prediction::peak::prod_reclaimable(&p, &states, now / 1000)
        } else {
            None
        };
        let (store, st, pol) = (l.store.clone(), states.clone(), policy.clone());
        let status = tokio::task::spawn_blocking(move || {
            reporter::build_status(&store, &st, &pol, now, prediction)
        })
        .await??;
        match reporter::write_status(&client, &l.node, status).await {
            Ok(true) => {
                l.metrics.reports.inc();
            }
            Ok(false) => {}
            Err(e) => {
                l.metrics.report_errors.inc();
                tracing::warn!(error = %e, "NodeMetric report failed");
            }
        };
    }
}

async fn gc_loop(l: LoopCtx, every: Duration) -> anyhow::Result<()> {
    loop {
        if !pause(&l.shutdown, every).await {
            return Ok(());
        }
        let store = l.store.clone();
        let removed = tokio::task::spawn_blocking(move || store.gc(now_ms())).await??;
        l.metrics.store_series.set(l.store.series_count() as i64);
        l.metrics
            .store_disk_bytes
            .set(l.store.size_on_disk() as i64);
        tracing::debug!(removed, "metric store GC");
    }
}

async fn prediction_loop(l: LoopCtx, predictor: Arc<Mutex<Predictor>>) -> anyhow::Result<()> {
    let restored = predictor
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .restore(&l.store)?;
    tracing::debug!(restored, "prediction models restored");
    if !l.informer.wait_synced(&l.shutdown).await {
        return Ok(());
    }
    let every = predictor
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .training_interval();
    loop {
        let keep_going = pause(&l.shutdown, every).await;
        let (p, store, states) = (predictor.clone(), l.store.clone(), l.informer.snapshot());
        tokio::task::spawn_blocking(move || -> Result<(), store::StoreError> {
            let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
            let now = now_ms();
            if keep_going {
                p.train(&store, &states, now)?;
            }
            p.checkpoint(&store, now, !keep_going)?;
            Ok(())
        })
        .await??;
        if !keep_going {
            return Ok(());
        }
    }
}
