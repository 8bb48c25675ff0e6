//! koord-scheduler: a complete scheduler with Koordinator's plugins.
//!
//! Schedules pods whose schedulerName is one of its profiles and binds them through
//! pods/binding. Only the holder of the `koord-scheduler` Lease schedules; every replica
//! keeps its caches warm.

pub mod access;
pub mod binder;
pub mod compat;
pub mod config;
pub mod cycle;
pub mod explanation;
pub mod features;
pub mod framework;
pub mod live;
pub mod live_storage;
pub mod live_sync;
pub mod live_watch;
pub mod metrics;
pub mod model;
pub mod plugins;
pub mod queue;
pub mod quota_bootstrap;
pub mod reservation_live;
pub mod status_writer;
pub mod volume_binder;

#[cfg(test)]
mod layering_tests;
#[cfg(test)]
mod test_util;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::api::field::FieldError;
use crate::kernel::RoleCtx;
use crate::kernel::lease::{self, Leadership, LeaseConfig};

/// Settings of the `scheduler` section.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// A KubeSchedulerConfiguration (Koordinator's `koord-scheduler-config` ConfigMap
    /// content); unset: the built-in default profile.
    pub config_file: Option<PathBuf>,
    pub leader_election: LeaseConfig,
    /// Koordinator's scheduler feature gates (`--feature-gates`).
    pub feature_gates: BTreeMap<String, bool>,
    /// Koordinator's `--enable-network-topology-manager`: the scheduler keeps the tree of
    /// the ClusterNetworkTopology `default` over the nodes (and writes its status), which
    /// network-topology-aware gangs are placed in; off, such gangs are unschedulable.
    pub network_topology_manager: bool,
    /// Koordinator's `--scheduling-timeout`: a pod whose scheduling (from its attempt's
    /// start until it is bound or given up) takes longer is logged and counted in
    /// `scheduler_scheduling_timeout`.
    pub scheduling_timeout_seconds: u64,
    /// Koordinator's `--scheduler-monitor-period`: how often pods still in flight are
    /// checked against the timeout.
    pub monitor_period_seconds: u64,
    /// How often at most the scheduler answers one ScheduleExplanation again while the
    /// pods it asks about stay pending (a dry run of the scheduling cycle each time).
    pub explanation_refresh_seconds: u64,
    /// Set by `--embedded` (not a configuration key): there is no kube-scheduler, so the
    /// first profile also serves pods of `default-scheduler` (a pod without a
    /// `schedulerName`), unless a profile of that name is configured.
    #[serde(skip)]
    pub serve_default_scheduler: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            config_file: None,
            leader_election: LeaseConfig::named("koord-scheduler"),
            feature_gates: BTreeMap::new(),
            network_topology_manager: false,
            scheduling_timeout_seconds: 30,
            monitor_period_seconds: 10,
            explanation_refresh_seconds: 5,
            serve_default_scheduler: false,
        }
    }
}

/// Problems as (key under `scheduler`, message).
pub fn validate(cfg: &Config, strict: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Err(e) = cfg.leader_election.validate() {
        out.push(("leaderElection".into(), e));
    }
    for (key, v) in [
        ("schedulingTimeoutSeconds", cfg.scheduling_timeout_seconds),
        ("monitorPeriodSeconds", cfg.monitor_period_seconds),
        ("explanationRefreshSeconds", cfg.explanation_refresh_seconds),
    ] {
        if v == 0 {
            out.push((key.into(), "must be at least 1".into()));
        }
    }
    match load(cfg) {
        Err(e) => out.push(("configFile".into(), e.to_string())),
        Ok(c) if strict => {
            for e in crate::kernel::compat::errors(&c.unsupported) {
                out.push(("configFile".into(), e));
            }
        }
        Ok(_) => {}
    }
    if strict {
        let items = features::SCHEDULER_GATES.unsupported(&cfg.feature_gates);
        for e in crate::kernel::compat::errors(&items) {
            out.push(("featureGates".into(), e));
        }
    }
    out
}

/// The scheduler configuration this role runs with.
pub fn load(cfg: &Config) -> Result<config::SchedulerConfig, FieldError> {
    let mut sched = config::from_file(cfg.config_file.as_deref())?;
    sched.set_gates(&features::SCHEDULER_GATES.from_user(&cfg.feature_gates));
    if cfg.serve_default_scheduler {
        config::serve_default_scheduler(&mut sched);
    }
    Ok(sched)
}

/// The reservation controller, on the leader only: a round soon after the live scheduler
/// sees an event that may change a reservation (`kick`: a reservation, or a pod allocated
/// to one), at the next expiry, and at least every `resyncIntervalSeconds` (Koordinator's
/// default 60 s) — Koordinator's controller is event-driven with the resync as backstop.
fn spawn_reservation_controller(
    client: kube::Client,
    cfg: &config::SchedulerConfig,
    leadership: Leadership,
    kick: std::sync::Arc<tokio::sync::Notify>,
    ctx: &RoleCtx,
) {
    let arg = |key: &str| {
        cfg.profiles
            .iter()
            .find_map(|p| p.args.get("Reservation")?.get(key).cloned())
    };
    let every = arg("resyncIntervalSeconds")
        .and_then(|v| v.as_u64())
        .filter(|s| *s > 0)
        .unwrap_or(60);
    // Koordinator's gcDurationSeconds (24 h unless positive) and disableGarbageCollection.
    let gc_after = arg("gcDurationSeconds")
        .and_then(|v| v.as_i64())
        .filter(|s| *s > 0)
        .unwrap_or(reservation_live::GC_AFTER_SECONDS);
    let gc_off = arg("disableGarbageCollection").is_some_and(|v| v.as_bool() == Some(true));
    let gc = (!gc_off).then_some(gc_after);
    let shutdown = ctx.shutdown.clone();
    ctx.tasks
        .spawn("scheduler/reservation-controller", async move {
            let mut next_expiry: Option<i64> = None;
            loop {
                let wait = controller_wait(every, next_expiry);
                tokio::select! {
                    _ = shutdown.draining() => return Ok(()),
                    _ = kick.notified() => {
                        // Events come in bursts (a binding, then its status): one round.
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    }
                    _ = tokio::time::sleep(wait) => {}
                }
                if !leadership.is_leader() {
                    continue;
                }
                match reservation_live::reconcile(&client, gc).await {
                    Ok(next) => next_expiry = next,
                    Err(e) => tracing::warn!(error = %e, "reservation controller round failed"),
                }
            }
        });
}

/// How long the controller sleeps: until just after the next expiry, at most the resync.
fn controller_wait(every_s: u64, next_expiry_s: Option<i64>) -> std::time::Duration {
    let resync = std::time::Duration::from_secs(every_s);
    let Some(at) = next_expiry_s else {
        return resync;
    };
    let now_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let until = (at * 1000 + 50 - now_ms).max(0) as u64;
    resync.min(std::time::Duration::from_millis(until))
}

/// Runs the role until the process drains.
/// Starts the watches the live loop reads (ElasticQuotas and PodGroups only when a
/// profile uses them); their events arrive on the returned channel.
pub fn watches(
    scheduler: &live::Scheduler,
    client: &kube::Client,
    tasks: &crate::kernel::Tasks,
    shutdown: &crate::kernel::Shutdown,
) -> mpsc::UnboundedReceiver<live::Ev> {
    let (tx, rx) = mpsc::unbounded_channel();
    let c = || client.clone();
    live::watch(c(), "pods", live::Ev::Pod, tx.clone(), tasks, shutdown);
    live::watch(c(), "nodes", live::Ev::Node, tx.clone(), tasks, shutdown);
    let metrics = live::Ev::Metric;
    live::watch(c(), "nodemetrics", metrics, tx.clone(), tasks, shutdown);
    let nrt = live::Ev::Topology;
    live::watch(
        c(),
        "noderesourcetopologies",
        nrt,
        tx.clone(),
        tasks,
        shutdown,
    );
    live::watch(
        c(),
        "devices",
        live::Ev::Device,
        tx.clone(),
        tasks,
        shutdown,
    );
    if scheduler.uses_quotas() {
        let q = live::Ev::Quota;
        live::watch(c(), "elasticquotas", q, tx.clone(), tasks, shutdown);
    }
    if scheduler.uses_gangs() {
        let g = live::Ev::PodGroup;
        live::watch(c(), "podgroups", g, tx.clone(), tasks, shutdown);
    }
    if scheduler.topology.is_some() {
        let t = live::Ev::NetworkTopology;
        live::watch(
            c(),
            "clusternetworktopologies",
            t,
            tx.clone(),
            tasks,
            shutdown,
        );
    }
    storage_watches(client, &tx, tasks, shutdown);
    if scheduler.capacity_informer {
        capacity_watches(client, &tx, tasks, shutdown);
    }
    if let Some(t) = &scheduler.gpu_templates_source {
        // Only the one ConfigMap (Koordinator's informer watches it alone too).
        let cfg = kube::runtime::watcher::Config::default()
            .fields(&format!("metadata.name={}", t.config_map_name));
        let index = crate::kernel::pump::forward({
            let tx = tx.clone();
            move |e| tx.send(live::Ev::GpuTemplates(Box::new(e))).is_ok()
        });
        let ns = Some(t.config_map_namespace.clone());
        let name = "scheduler/watch/gpu-shared-resource-templates";
        crate::kernel::pump::spawn::<k8s_openapi::api::core::v1::ConfigMap, _>(
            tasks,
            name,
            client.clone(),
            ns,
            cfg,
            index,
            shutdown,
        );
    }
    let pdb = |e| live::Ev::Pdb(Box::new(e));
    live::watch(
        c(),
        "poddisruptionbudgets",
        pdb,
        tx.clone(),
        tasks,
        shutdown,
    );
    if scheduler.explanations.is_some() {
        let x = |e| live::Ev::Explanation(Box::new(e));
        live::watch(c(), "scheduleexplanations", x, tx.clone(), tasks, shutdown);
    }
    let r = live::Ev::Reservation;
    live::watch(c(), "reservations", r, tx, tasks, shutdown);
    rx
}

/// What the volume plugins read (PVs, claims, StorageClasses, CSINodes) and what default
/// topology spreading reads (ReplicaSets, StatefulSets, ReplicationControllers, Services).
fn storage_watches(
    client: &kube::Client,
    tx: &mpsc::UnboundedSender<live::Ev>,
    tasks: &crate::kernel::Tasks,
    shutdown: &crate::kernel::Shutdown,
) {
    use live_watch::Storage;
    let c = || client.clone();
    let pv = |e| live::Ev::Storage(Box::new(Storage::Pv(e)));
    live::watch(c(), "persistentvolumes", pv, tx.clone(), tasks, shutdown);
    let pvc = |e| live::Ev::Storage(Box::new(Storage::Pvc(e)));
    live::watch(
        c(),
        "persistentvolumeclaims",
        pvc,
        tx.clone(),
        tasks,
        shutdown,
    );
    let sc = |e| live::Ev::Storage(Box::new(Storage::Class(e)));
    live::watch(c(), "storageclasses", sc, tx.clone(), tasks, shutdown);
    let csi = |e| live::Ev::Storage(Box::new(Storage::CsiNode(e)));
    live::watch(c(), "csinodes", csi, tx.clone(), tasks, shutdown);
    use live_watch::Owner;
    let rs = |e| live::Ev::Owner(Box::new(Owner::ReplicaSet(e)));
    live::watch(c(), "replicasets", rs, tx.clone(), tasks, shutdown);
    let ss = |e| live::Ev::Owner(Box::new(Owner::StatefulSet(e)));
    live::watch(c(), "statefulsets", ss, tx.clone(), tasks, shutdown);
    let rc = |e| live::Ev::Owner(Box::new(Owner::Rc(e)));
    live::watch(
        c(),
        "replicationcontrollers",
        rc,
        tx.clone(),
        tasks,
        shutdown,
    );
    let svc = |e| live::Ev::Owner(Box::new(Owner::Service(e)));
    live::watch(c(), "services", svc, tx.clone(), tasks, shutdown);
}

/// CSIDrivers and CSIStorageCapacities (VolumeBinding's capacity check): without them no
/// driver is known to track capacity, so none is checked.
fn capacity_watches(
    client: &kube::Client,
    tx: &mpsc::UnboundedSender<live::Ev>,
    tasks: &crate::kernel::Tasks,
    shutdown: &crate::kernel::Shutdown,
) {
    use live_watch::Storage;
    let c = || client.clone();
    let drivers = |e| live::Ev::Storage(Box::new(Storage::CsiDriver(e)));
    live::watch(c(), "csidrivers", drivers, tx.clone(), tasks, shutdown);
    let caps = |e| live::Ev::Storage(Box::new(Storage::Capacity(e)));
    live::watch(
        c(),
        "csistoragecapacities",
        caps,
        tx.clone(),
        tasks,
        shutdown,
    );
}

/// The Lease to elect on: `scheduler.leaderElection` when set, else the configuration
/// file's `leaderElection` (Koordinator's chart sets it there), else the default.
fn lease_config(cfg: &Config, sched: &config::SchedulerConfig) -> anyhow::Result<LeaseConfig> {
    let default = Config::default().leader_election;
    match &sched.leader_election {
        Some(file) if cfg.leader_election == default => file
            .apply(&default)
            .map_err(|e| anyhow::anyhow!("scheduler.configFile: {e}")),
        _ => Ok(cfg.leader_election.clone()),
    }
}

pub async fn run(cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    let sched_cfg = load(&cfg).map_err(|e| anyhow::anyhow!("scheduler.configFile: {e}"))?;
    ctx.report_unsupported(&sched_cfg.unsupported);
    ctx.report_unsupported(&features::SCHEDULER_GATES.unsupported(&cfg.feature_gates));
    let cluster = ctx.cluster()?.clone();
    if !crate::kernel::cluster::wait_reachable(&cluster.client, &ctx.shutdown).await {
        return Ok(());
    }
    let client = cluster.client.clone();
    let identity = format!("{}_{}", ctx.common.node_name, uuid::Uuid::new_v4());
    if let Some(n) = sched_cfg.parallelism {
        framework::set_parallelism(n);
    }
    let leader_election = lease_config(&cfg, &sched_cfg)?;
    let ns = leader_election.namespace.clone();
    let Some(granted) = crate::kernel::access::settle(
        &client,
        "scheduler",
        access::NEEDS,
        &ns,
        &ctx.ready,
        &ctx.shutdown,
    )
    .await
    else {
        return Ok(());
    };
    let leadership = lease::start(
        client.clone(),
        leader_election,
        identity,
        &ctx.tasks,
        &ctx.shutdown,
    );
    let controller_lease = leadership.clone();
    let mut scheduler = live::Scheduler::new(client.clone(), &sched_cfg, leadership.clone())
        .map_err(|e| anyhow::anyhow!("scheduler: {e}"))?;
    scheduler.metrics = metrics::SchedulerMetrics::register(&ctx.metrics);
    let secs = std::time::Duration::from_secs;
    scheduler.monitor = live::monitor::Monitor::new(
        secs(cfg.scheduling_timeout_seconds),
        secs(cfg.monitor_period_seconds),
    );
    for fw in scheduler.frameworks.iter() {
        let _ = fw.observer.set(scheduler.metrics.observer());
    }
    let t = access::NETWORK_TOPOLOGY;
    if cfg.network_topology_manager && granted.allows("watch", t.group, t.resources[0]) {
        use live::topology as nt;
        let status = status_writer::spawn(
            "network-topology",
            client.clone(),
            leadership.clone(),
            (&ctx.tasks, &ctx.shutdown),
            (nt::figures, nt::version),
            nt::write,
        );
        scheduler.topology = Some(nt::Manager::new(status));
    }
    let x = access::EXPLANATIONS;
    if granted.allows("watch", x.group, x.resources[0]) {
        let writer = status_writer::spawn(
            "scheduleexplanation",
            client.clone(),
            leadership.clone(),
            (&ctx.tasks, &ctx.shutdown),
            (|_| Default::default(), |_| None),
            live::explain::write,
        );
        let every = secs(cfg.explanation_refresh_seconds);
        scheduler.explanations = Some(live::explain::Explanations::new(every, writer));
    }
    let gates = features::SCHEDULER_GATES.from_user(&cfg.feature_gates);
    scheduler.capacity_informer = !gates.on(features::DISABLE_CSI_STORAGE_CAPACITY_INFORMER);
    if !granted.allows("watch", "", "configmaps") {
        scheduler.gpu_templates_source = None;
    }
    let rx = watches(&scheduler, &client, &ctx.tasks, &ctx.shutdown);
    if scheduler.uses_quotas() {
        let quota_args = quota_args_of(&sched_cfg.profiles);
        if let Some(args) = quota_args {
            let e = access::EVICTION;
            let may_evict = granted.allows(e.verbs[0], e.group, e.resources[0]);
            if args.monitor_all_quotas && args.enable_runtime_quota && may_evict {
                scheduler.revoke = Some(live::revoke::Revoke::new(
                    args.delay_evict_time,
                    args.revoke_pod_interval,
                ));
            }
            let c = client.clone();
            ctx.tasks.spawn("scheduler/builtin-quotas", async move {
                quota_bootstrap::ensure(&c, &args).await;
                Ok(())
            });
        }
        use plugins::elasticquota::status as q;
        scheduler.quota_status = status_writer::spawn(
            "elasticquota",
            client.clone(),
            leadership.clone(),
            (&ctx.tasks, &ctx.shutdown),
            (q::figures, q::version),
            {
                let metrics = scheduler.metrics.clone();
                move |c, name, f| {
                    let metrics = metrics.clone();
                    async move {
                        let started = std::time::Instant::now();
                        let written = status_writer::write_quota(c, name, f).await;
                        let seconds = started.elapsed().as_secs_f64();
                        metrics.pods.quota_status_update.observe(seconds);
                        written
                    }
                }
            },
        );
    }
    if scheduler.uses_gangs() {
        use plugins::coscheduling::status as g;
        scheduler.pod_group_status = status_writer::spawn(
            "podgroup",
            client.clone(),
            leadership,
            (&ctx.tasks, &ctx.shutdown),
            (g::figures, g::version),
            status_writer::write_pod_group,
        );
    }
    let kick = scheduler.reservation_kick.clone();
    spawn_reservation_controller(client, &sched_cfg, controller_lease, kick, &ctx);
    let ready = ctx.ready.clone();
    tracing::info!(profiles = ?sched_cfg.profiles.iter().map(|p| &p.scheduler_name).collect::<Vec<_>>(), "scheduler starting");
    scheduler
        .run(
            rx,
            ctx.shutdown.clone(),
            ctx.metrics.loop_counter("scheduler"),
            move || ready.set(true),
        )
        .await;
    Ok(())
}

/// The ElasticQuota args of the first profile that runs the plugin (one that only
/// configures it does not count), for the controllers outside the cycle (revoke, the
/// built-in quotas).
/// Where the GPU shared-resource templates are read from: the DeviceShare args of the
/// first profile that enables DeviceShare (Koordinator's default when it has none).
pub(crate) fn gpu_templates_of(
    profiles: &[config::Profile],
) -> Option<plugins::deviceshare::args::TemplatesConfig> {
    use plugins::deviceshare::NAME;
    let p = profiles.iter().find(|p| p.enables(NAME))?;
    let args: plugins::deviceshare::args::Args = plugins::plain_args(p.args.get(NAME)).ok()?;
    Some(args.templates())
}

pub(crate) fn quota_args_of(
    profiles: &[config::Profile],
) -> Option<plugins::elasticquota::args::Args> {
    use plugins::elasticquota::NAME;
    use plugins::elasticquota::args::Args;
    let p = profiles.iter().find(|p| p.enables(NAME))?;
    Args::parse(p.args.get(NAME)).ok()
}
