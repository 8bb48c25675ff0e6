//! The measuring loops: collection into the metric store, the NodeMetric reporter, store
//! GC and peak prediction, sharing one [`LoopCtx`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::kernel::{ReadyHandle, Shutdown};

use super::advisor::Advisor;
use super::informer::{Informer, States};
use super::metrics::{CollectorLabels, KoordletMetrics, NodeLabels};
use super::prediction::Predictor;
use super::store::{MetricKind, MetricStore, SeriesKey};
use super::usage_series::{LastPass, UsageSeries};
use super::{ReporterConfig, collectors, informer, prediction, qos, reporter};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl LoopCtx {
    pub(super) fn qos(&self) -> qos::context::QosCtx {
        qos::context::QosCtx {
            informer: self.informer.clone(),
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            shutdown: self.shutdown.clone(),
        }
    }
}

#[derive(Clone)]
pub(super) struct LoopCtx {
    pub(super) informer: Informer,
    pub(super) store: Arc<MetricStore>,
    pub(super) metrics: Arc<KoordletMetrics>,
    /// The per-pod and per-container usage series, encoded at scrape from the last pass.
    pub(super) usage: Arc<UsageSeries>,
    pub(super) shutdown: Shutdown,
    pub(super) node: String,
}

pub(super) async fn collect_loop(
    l: LoopCtx,
    mut advisor: Advisor,
    base: Duration,
    synced: ReadyHandle,
    collected: ReadyHandle,
) -> anyhow::Result<()> {
    if !l.informer.wait_synced(&l.shutdown).await {
        return Ok(());
    }
    synced.set(true);
    let start = Instant::now();
    let mut tick = tokio::time::interval_at(super::grid::next(base, Duration::ZERO), base);
    // A late pass does not move the grid the QoS rounds share.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut failing: BTreeMap<&'static str, bool> = BTreeMap::new();
    let mut clock = collectors::pass_clock::PassClock::default();
    // The pod list whose requests and limits the gauges hold: they change only with it.
    let mut specs_of: std::sync::Weak<Vec<informer::PodMeta>> = std::sync::Weak::new();
    loop {
        let at = tokio::select! {
            _ = l.shutdown.draining() => break,
            at = tick.tick() => at.into_std(),
        };
        let states = l.informer.snapshot();
        let now = clock.stamp(at, Instant::now(), now_ms());
        let mono = start.elapsed().as_nanos() as u64;
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
        let ran = |name: &str| outcomes.iter().any(|o| o.collector == name);
        let ran = Ran {
            psi: ran("psi"),
            resctrl: ran("resctrl"),
        };
        publish(&l, &states, &samples, ran);
        if specs_of.as_ptr() != Arc::as_ptr(&states.pods) {
            let (requests, limits) = container_specs(&l.node, &states);
            l.metrics.set_container_specs(requests, limits);
            specs_of = Arc::downgrade(&states.pods);
        }
        l.usage.set(LastPass {
            node: l.node.clone(),
            pods: states.pods.clone(),
            samples,
        });
        collected.set(true);
    }
    l.store.flush().await?;
    Ok(())
}

/// Which gated collectors ran this pass (their series are kept between their passes).
#[derive(Clone, Copy)]
struct Ran {
    psi: bool,
    resctrl: bool,
}

/// Node and host-application usage gauges on `/metrics` (the per-pod ones are encoded at
/// scrape time: `usage_series`), and this pass's CPI and PSI.
fn publish(l: &LoopCtx, states: &States, samples: &collectors::Samples, ran: Ran) {
    let Ran {
        psi: psi_ran,
        resctrl: resctrl_ran,
    } = ran;
    // A linear scan: a few lookups a pass (the key compares its one-byte kind first).
    let get = |k: &SeriesKey| samples.iter().find(|(s, _)| s == k).map(|(_, p)| p.value);
    let (cpu, mem) = (
        get(&SeriesKey::node(MetricKind::NodeCpuUsage)),
        get(&SeriesKey::node(MetricKind::NodeMemoryUsage)),
    );
    let nl = |r: &str| NodeLabels {
        node: l.node.clone(),
        resource: r.into(),
    };
    let node = crate::koordlet::metrics::node_only(&l.node);
    if let Some(c) = cpu {
        l.metrics.node_usage.get_or_create(&nl("cpu")).set(c);
        l.metrics.node_used_cpu.get_or_create(&node).set(c);
    }
    if let Some(m) = mem {
        l.metrics.node_usage.get_or_create(&nl("memory")).set(m);
        l.metrics.node_used_memory.get_or_create(&node).set(m);
    }
    let apps = &states.slo().host_applications;
    let mut usage = Vec::new();
    for app in apps {
        let name = app.name.clone().unwrap_or_default();
        for (kind, res) in [
            (MetricKind::HostAppCpuUsage, "cpu"),
            (MetricKind::HostAppMemoryUsage, "memory"),
        ] {
            if let Some(v) = get(&SeriesKey::host_app(kind, &name)) {
                usage.push((app, res, v));
            }
        }
    }
    l.metrics.set_host_apps(&l.node, usage);
    let gated = |k: MetricKind| {
        matches!(
            k,
            MetricKind::ContainerCpi | MetricKind::PodPsi | MetricKind::ContainerPsi
        )
    };
    if psi_ran || samples.iter().any(|(k, _)| gated(k.kind)) {
        publish_cpi_psi(l, states, samples, psi_ran);
    }
    if resctrl_ran {
        l.metrics.ops.set_resctrl(resctrl_series(&l.node, samples));
    }
}

/// Koordinator's `koordlet_resctrl_llc_occupancy{node,cache_id,qos}` and
/// `koordlet_resctrl_memory_bandwidth{node,cache_id,qos,mb_type}` from the resctrl
/// collector's samples: (LLC, memory bandwidth).
pub(crate) fn resctrl_series(
    node: &str,
    samples: &collectors::Samples,
) -> (super::metrics::Values, super::metrics::Values) {
    let label = |k: &SeriesKey, name: &str| k.label(name).unwrap_or_default().to_string();
    let (mut llc, mut mb) = (Vec::new(), Vec::new());
    for (k, p) in samples {
        let mut l: super::metrics::Pairs = vec![
            ("node", node.to_string()),
            ("cache_id", label(k, "cache_id")),
            ("qos", label(k, "qos")),
        ];
        match k.kind {
            MetricKind::ResctrlLlc => llc.push((l, p.value)),
            MetricKind::ResctrlMb => {
                l.push(("mb_type", label(k, "resctrl_mb_type")));
                mb.push((l, p.value));
            }
            _ => {}
        }
    }
    (llc, mb)
}

type Specs = Vec<(super::metrics::Pairs, f64)>;

/// Koordinator's `koordlet_container_cpi`, `koordlet_pod_psi` and `koordlet_container_psi`
/// from this pass's samples (their collectors are gated; no samples, no series). Each
/// keeps its series between its collector's passes.
fn publish_cpi_psi(l: &LoopCtx, states: &States, samples: &collectors::Samples, psi_ran: bool) {
    let label = |k: &SeriesKey, name: &str| k.label(name).unwrap_or_default().to_string();
    // The pod's and container's identity, as Koordinator's series carry them.
    let who = |k: &SeriesKey, container: bool| -> Option<super::metrics::Pairs> {
        let uid = label(k, "pod_uid");
        let pod = states.pods.iter().find(|p| p.uid == uid)?;
        let mut l: Vec<(&'static str, String)> = vec![("node", l.node.clone())];
        if container {
            let id = label(k, "container_id");
            let c = pod
                .containers
                .iter()
                .find(|c| informer::PodMeta::container_id(c) == id)?;
            l.extend([("container_id", id), ("container_name", c.name.clone())]);
        }
        l.extend([
            ("pod_uid", uid),
            ("pod_name", pod.name.clone()),
            ("pod_namespace", pod.namespace.clone()),
        ]);
        Some(l)
    };
    // Whether a "full" line was read for a (series, resource): cpu's exists from Linux 5.13.
    let full: std::collections::HashSet<(MetricKind, String, String)> = samples
        .iter()
        .filter(|(k, _)| label(k, "psi_degree") == "full")
        .map(|(k, _)| {
            (
                k.kind,
                label(k, "pod_uid") + &label(k, "container_id"),
                label(k, "psi_resource"),
            )
        })
        .collect();
    let (mut cpi, mut pod_psi, mut ctr_psi) = (Vec::new(), Vec::new(), Vec::new());
    for (k, p) in samples {
        match k.kind {
            MetricKind::ContainerCpi => {
                let Some(mut l) = who(k, true) else { continue };
                let field = match label(k, "cpi_resource").as_str() {
                    "cycle" => "cycles",
                    _ => "instructions",
                };
                l.push(("cpi_field", field.to_string()));
                cpi.push((l, p.value));
            }
            MetricKind::PodPsi | MetricKind::ContainerPsi => {
                let container = k.kind == MetricKind::ContainerPsi;
                let Some(mut l) = who(k, container) else {
                    continue;
                };
                let res = label(k, "psi_resource");
                let id = label(k, "pod_uid") + &label(k, "container_id");
                let supported = full.contains(&(k.kind, id, res.clone()));
                l.extend([
                    ("psi_resource_type", res),
                    ("psi_precision", label(k, "psi_precision")),
                    ("psi_degree", label(k, "psi_degree")),
                    ("cpu_full_supported", supported.to_string()),
                ]);
                if container {
                    &mut ctr_psi
                } else {
                    &mut pod_psi
                }
                .push((l, p.value));
            }
            _ => {}
        }
    }
    // CPI comes once per window; keep the last values between windows.
    if !cpi.is_empty() {
        l.metrics.ops.set_cpi(cpi);
    }
    // PSI comes every `psiIntervalSeconds`; its series stay between its passes.
    if psi_ran {
        l.metrics.ops.set_psi(pod_psi, ctr_psi);
    }
}

/// Koordinator's `koordlet_container_resource_{requests,limits}`: cpu in cores, memory and
/// batch memory in bytes, batch CPU in its integer milli-core units.
fn container_specs(node: &str, states: &States) -> (Specs, Specs) {
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for p in states.pods.iter() {
        let spec = p
            .pod
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or(&[]);
        for c in &p.containers {
            let Some(res) = spec
                .iter()
                .find(|s| s.name == c.name)
                .and_then(|s| s.resources.as_ref())
            else {
                continue;
            };
            for (list, out) in [(&res.requests, &mut requests), (&res.limits, &mut limits)] {
                for (name, q) in list.iter().flatten() {
                    let (unit, v) = match name.as_str() {
                        "cpu" => ("core", crate::api::quantity::q_milli(q) as f64 / 1000.0),
                        "memory" | "kubernetes.io/batch-memory" => {
                            ("byte", crate::api::quantity::q_value(q) as f64)
                        }
                        "kubernetes.io/batch-cpu" => {
                            ("integer", crate::api::quantity::q_value(q) as f64)
                        }
                        _ => continue,
                    };
                    let labels = vec![
                        ("node", node.to_string()),
                        ("resource", name.clone()),
                        ("unit", unit.to_string()),
                        ("pod_uid", p.uid.clone()),
                        ("pod_name", p.name.clone()),
                        ("pod_namespace", p.namespace.clone()),
                        ("container_id", c.id.clone()),
                        ("container_name", c.name.clone()),
                    ];
                    out.push((labels, v));
                }
            }
        }
    }
    (requests, limits)
}

/// How soon after start the first NodeMetric report goes out.
const FIRST_REPORT_AFTER: Duration = Duration::from_secs(5);

pub(super) async fn report_loop(
    l: LoopCtx,
    client: kube::Client,
    cfg: ReporterConfig,
    predictor: Arc<Mutex<Predictor>>,
    predict: bool,
) -> anyhow::Result<()> {
    let floors = reporter::Floors {
        min_interval: Duration::from_secs(cfg.min_report_interval_seconds.max(1)),
        min_aggregate: Duration::from_secs(cfg.min_aggregate_duration_seconds.max(1)),
        max_interval: cfg.max_report_interval_seconds.map(Duration::from_secs),
    };
    if !l.informer.wait_synced(&l.shutdown).await {
        return Ok(());
    }
    let mut changes = l.informer.subscribe();
    // The first report comes a few seconds after start (enough samples for a usage), not
    // a whole interval later: the colocation loop should close quickly after a restart.
    let mut first = true;
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
        let wait = if first {
            policy.interval.min(FIRST_REPORT_AFTER)
        } else {
            policy.interval
        };
        first = false;
        if !l.shutdown.sleep(wait).await {
            return Ok(());
        }
        let states = l.informer.snapshot();
        if let Some(node) = states.node.as_deref() {
            l.metrics.set_allocatable(node);
        }
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
        if predict {
            use crate::api::quantity::{q_milli, q_value};
            let prod = prediction.as_ref().map(|(r, _)| {
                let cpu = r.get("cpu").map_or(0.0, |q| q_milli(q) as f64 / 1000.0);
                (cpu, r.get("memory").map_or(0.0, |q| q_value(q) as f64))
            });
            l.metrics.ops.set_prod_reclaimable(&l.node, prod);
        }
        if let Some((reclaimable, peak)) = &prediction {
            let extra = [("predictor", "minPredictor")];
            let family = &l.metrics.predicted_reclaimable;
            KoordletMetrics::set_resources(family, &l.node, &extra, reclaimable);
            let family = &l.metrics.predicted_peak;
            KoordletMetrics::set_resources(family, &l.node, &extra, peak);
        }
        let (store, st, pol) = (l.store.clone(), states.clone(), policy.clone());
        let status = tokio::task::spawn_blocking(move || {
            let status = reporter::build_status(&store, &st, &pol, now, prediction);
            // The report decodes every series' window; give the freed heap back (glibc
            // keeps it otherwise, and the koordlet's RSS would carry the peak).
            crate::os::tuning::trim_heap();
            status
        })
        .await??;
        publish_report(&l, &status);
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

/// What the report says, as Koordinator's `koordlet_node_metric_*_usage` series.
fn publish_report(l: &LoopCtx, status: &crate::api::slo::NodeMetricStatus) {
    let Some(info) = &status.node_metric else {
        return;
    };
    for (family, map) in [
        (&l.metrics.node_metric_node_usage, &info.node_usage),
        (&l.metrics.node_metric_system_usage, &info.system_usage),
    ] {
        if let Some(r) = &map.resources {
            KoordletMetrics::set_resources(family, &l.node, &[], r);
        }
    }
    for numa in info.numa_usages.iter().flatten() {
        let id = numa.numa_node_id.to_string();
        let extra = [("numa_node_id", id.as_str())];
        for (family, map) in [
            (&l.metrics.node_metric_numa_usage, &numa.node_usage),
            (&l.metrics.node_metric_numa_system_usage, &numa.system_usage),
        ] {
            if let Some(r) = &map.resources {
                KoordletMetrics::set_resources(family, &l.node, &extra, r);
            }
        }
    }
}

pub(super) async fn gc_loop(l: LoopCtx, every: Duration) -> anyhow::Result<()> {
    loop {
        if !l.shutdown.sleep(every).await {
            return Ok(());
        }
        let store = l.store.clone();
        let removed = tokio::task::spawn_blocking(move || {
            let removed = store.gc(now_ms());
            crate::os::tuning::trim_heap();
            removed
        })
        .await??;
        l.metrics.store_series.set(l.store.series_count() as i64);
        l.metrics
            .store_disk_bytes
            .set(l.store.size_on_disk() as i64);
        tracing::debug!(removed, "metric store GC");
    }
}

pub(super) async fn prediction_loop(
    l: LoopCtx,
    predictor: Arc<Mutex<Predictor>>,
    checkpoints: Arc<dyn crate::koordlet::prediction::checkpoints::Checkpoints>,
) -> anyhow::Result<()> {
    let restored = predictor
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .restore(checkpoints.as_ref())?;
    if restored > 0 {
        tracing::info!(
            restored,
            "prediction models restored from their checkpoints"
        );
    }
    if !l.informer.wait_synced(&l.shutdown).await {
        return Ok(());
    }
    let every = predictor
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .training_interval();
    loop {
        let keep_going = l.shutdown.sleep(every).await;
        let (p, store, states) = (predictor.clone(), l.store.clone(), l.informer.snapshot());
        let to = checkpoints.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
            let now = now_ms();
            if keep_going {
                p.train(&store, &states, now)?;
            }
            p.checkpoint(to.as_ref(), now, !keep_going)?;
            Ok(())
        })
        .await??;
        if !keep_going {
            return Ok(());
        }
    }
}

#[cfg(test)]
#[path = "measure_tests.rs"]
mod tests;
