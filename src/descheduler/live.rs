//! The live descheduler: the pass loop on the Lease holder, and the migration controller
//! woken by the pass and by PodMigrationJob events.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{EvictParams, Patch, PatchParams, PostParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::Value;
use tokio::sync::Notify;

use super::Config;
use super::cache::Cache;
use super::framework::action::Action;
use super::framework::{Plugins, Report};
use super::migration::controller::Controller;
use super::migration::job::new_job;
use crate::api::scheduling::migration::PodMigrationJob;
use crate::kernel::RoleCtx;
use crate::kernel::lease::{self, Leadership};

type Evicted = Family<Vec<(&'static str, String)>, Counter>;

/// Koordinator's `descheduler_pods_evicted{result,strategy,namespace,node}`, a counter
/// named without `_total`.
pub fn register_pods_evicted(metrics: &crate::kernel::Metrics) -> Evicted {
    let f = Evicted::default();
    metrics.register_bare_counter(
        "descheduler_pods_evicted",
        "Number of evicted pods, by the result, by the strategy, by the namespace, by the node name. 'error' result means a pod could not be evicted",
        f.clone(),
    );
    metrics.describe_labels(
        "descheduler_pods_evicted",
        &["result", "strategy", "namespace", "node"],
    );
    f
}

struct Role {
    client: kube::Client,
    cache: Cache,
    plugins: Plugins,
    instance: String,
    migration: Option<super::migration::args::MigrationArgs>,
    dry_run: bool,
    evicted: Evicted,
}

impl Role {
    async fn pass(&mut self, wake: &Notify) {
        let t = std::time::Instant::now();
        let (world, _) = self.cache.world();
        let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
        let report = self.plugins.run(&world, now);
        tracing::debug!(
            pods = world.pods.len(),
            nodes = world.nodes.len(),
            ms = t.elapsed().as_millis() as u64,
            "descheduling pass"
        );
        drop(world);
        for e in &report.errors {
            tracing::info!(error = %e, "descheduling pass");
        }
        let mig_dry = self.migration.as_ref().is_some_and(|a| a.dry_run);
        if self.dry_run || mig_dry {
            tracing::info!(decisions = %report.to_json_line(), "descheduling pass (dry run: nothing evicted)");
            return;
        }
        tracing::debug!(decisions = %report.to_json_line(), "descheduling pass");
        self.start(&report).await;
        self.apply_actions(&report).await;
        if !report.evictions.is_empty() {
            wake.notify_one();
        }
    }

    /// The changes plugins planned besides evictions: cordons and pod annotations.
    async fn apply_actions(&self, report: &Report) {
        let pp = PatchParams::default();
        for a in &report.actions {
            let r = match &a.action {
                Action::Cordon { node } => {
                    let patch = serde_json::json!({"spec": {"unschedulable": true}});
                    Api::<Node>::all(self.client.clone())
                        .patch(node, &pp, &Patch::Merge(patch))
                        .await
                        .map(|_| ())
                }
                Action::Annotate {
                    namespace,
                    pod,
                    key,
                    value,
                } => {
                    let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
                    Api::<Pod>::namespaced(self.client.clone(), namespace)
                        .patch(pod, &pp, &Patch::Merge(patch))
                        .await
                        .map(|_| ())
                }
            };
            match r {
                Ok(()) => {
                    tracing::debug!(plugin = %a.plugin, action = ?a.action, "descheduler action applied")
                }
                Err(e) => {
                    tracing::warn!(plugin = %a.plugin, action = ?a.action, error = %e, "descheduler action failed")
                }
            }
        }
    }

    async fn start(&self, report: &Report) {
        for e in &report.evictions {
            let pod = &e.pod;
            let who = pod.key();
            let r = match (&self.migration, &e.mode) {
                (Some(a), Some(_)) => {
                    let name = uuid::Uuid::new_v4().to_string();
                    let job = new_job(&name, pod, &e.plugin, &e.reason, a, &self.instance);
                    Api::<PodMigrationJob>::all(self.client.clone())
                        .create(&PostParams::default(), &job)
                        .await
                        .map(|_| ())
                }
                _ => Api::<Pod>::namespaced(self.client.clone(), &pod.namespace)
                    .evict(&pod.name, &EvictParams::default())
                    .await
                    .map(|_| ()),
            };
            let result = if r.is_ok() { "success" } else { "error" };
            let labels = vec![
                ("result", result.to_string()),
                ("strategy", e.plugin.to_string()),
                ("namespace", pod.namespace.clone()),
                ("node", e.node.clone()),
            ];
            self.evicted.get_or_create(&labels).inc();
            match r {
                Ok(()) => {
                    tracing::info!(pod = %who, node = %e.node, plugin = %e.plugin, reason = %e.reason, "migration started")
                }
                Err(err) => tracing::warn!(pod = %who, error = %err, "cannot start the migration"),
            }
        }
    }
}

fn migration_args(
    cfg: &super::config::DeschedulerConfig,
) -> Option<super::migration::args::MigrationArgs> {
    let p = cfg
        .profiles
        .iter()
        .find(|p| p.evict.first().map(String::as_str) == Some("MigrationController"))?;
    super::migration::args::MigrationArgs::parse(
        p.args.get("MigrationController").unwrap_or(&Value::Null),
    )
    .ok()
}

/// Runs the role until the process drains.
pub async fn run(cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    let dcfg = super::load(&cfg).map_err(|e| anyhow::anyhow!("descheduler.configFile: {e}"))?;
    ctx.report_unsupported(&super::unsupported(&dcfg));
    let cluster = ctx.cluster()?.clone();
    if !crate::kernel::cluster::wait_reachable(&cluster.client, &ctx.shutdown).await {
        return Ok(());
    }
    let client = cluster.client.clone();
    let mut lease_cfg = cfg.leader_election.clone();
    if let Some(ns) = &dcfg.lease.0 {
        lease_cfg.namespace = ns.clone();
    }
    if let Some(n) = &dcfg.lease.1 {
        lease_cfg.name = n.clone();
    }
    if dcfg.leader_elect == Some(false) {
        lease_cfg.enabled = false;
    }
    // The lease identity is fresh per process (two replicas on one node must not share
    // it); the jobs' creator is stable per node and lease, so a descheduler restarted
    // after a crash continues the jobs it created instead of leaving them to expire.
    let Some(granted) = crate::kernel::access::settle(
        &client,
        "descheduler",
        super::access::NEEDS,
        &lease_cfg.namespace,
        &ctx.ready,
        &ctx.shutdown,
    )
    .await
    else {
        return Ok(());
    };
    let identity = format!("{}_{}", ctx.common.node_name, uuid::Uuid::new_v4());
    let instance = job_creator(&ctx.common.node_name, &lease_cfg.name);
    let leadership = lease::start(
        client.clone(),
        lease_cfg,
        identity,
        &ctx.tasks,
        &ctx.shutdown,
    );
    let interval = dcfg.interval;
    let plugins = Plugins::build(&dcfg, interval.as_millis() as u64, super::plugins::registry)
        .map_err(|e| anyhow::anyhow!("descheduler: {e}"))?;
    let cache = Cache::start(&client, &granted, &ctx.tasks, &ctx.shutdown);
    let wake = Arc::new(Notify::new());
    let migration = migration_args(&dcfg);
    if let Some(a) = &migration {
        let c = Controller::new(client.clone(), a.clone(), instance.clone());
        spawn_controller(c, cache.clone(), leadership.clone(), wake.clone(), &ctx);
    }
    if !cache.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    // The first lists leave their decoding garbage behind.
    crate::os::memory::trim();
    let mut role = Role {
        client,
        cache,
        plugins,
        instance,
        migration,
        dry_run: dcfg.dry_run,
        evicted: register_pods_evicted(&ctx.metrics),
    };
    ctx.ready.set(true);
    tracing::info!(interval = ?interval, dry_run = dcfg.dry_run, profiles = dcfg.profiles.len(), "descheduler starting");
    pass_loop(&mut role, interval, leadership, wake, &ctx).await;
    Ok(())
}

/// The `koordinator.sh/job-created-by` of this node's descheduler under this lease: a
/// UUID, as Koordinator's, but the same after a restart.
fn job_creator(node: &str, lease: &str) -> String {
    let name = format!("koord-descheduler/{node}/{lease}");
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).to_string()
}

async fn pass_loop(
    role: &mut Role,
    interval: Duration,
    mut leadership: Leadership,
    wake: Arc<Notify>,
    ctx: &RoleCtx,
) {
    let mut ran = false;
    loop {
        while !leadership.is_leader() {
            tokio::select! {
                _ = ctx.shutdown.draining() => return,
                _ = leadership.changed() => {}
            }
        }
        if !ran || !interval.is_zero() {
            role.pass(&wake).await;
            if interval.is_zero() && !ran {
                tracing::info!(
                    "deschedulingInterval is 0: that was the only pass (as Koordinator's descheduler); set it to run passes periodically"
                );
            }
            ran = true;
            // Each pass frees its world; without a trim those holes stay resident.
            crate::os::memory::trim();
            if let Some((used, free)) = crate::os::memory::heap() {
                tracing::debug!(
                    heap_used_mib = used >> 20,
                    heap_free_mib = free >> 20,
                    "descheduler heap after the pass"
                );
            }
        }
        let wait = if interval.is_zero() {
            Duration::from_secs(3600)
        } else {
            interval
        };
        tokio::select! {
            _ = ctx.shutdown.draining() => return,
            _ = leadership.changed() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// The migration controller: a round when woken (a pass started jobs, a job changed) and
/// every 3 s while jobs are active; idle otherwise.
const SCAVENGE_EVERY: Duration = Duration::from_secs(60);

fn spawn_controller(
    mut c: Controller,
    cache: Cache,
    leadership: Leadership,
    wake: Arc<Notify>,
    ctx: &RoleCtx,
) {
    let shutdown = ctx.shutdown.clone();
    ctx.tasks
        .spawn("descheduler/migration-controller", async move {
            if !cache.wait_synced(&shutdown).await {
                return Ok(());
            }
            let mut active = true;
            let mut scavenged: Option<std::time::Instant> = None;
            loop {
                if leadership.is_leader() {
                    let (world, jobs) = cache.world();
                    active = c.round(&world, &jobs).await.unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "migration round failed");
                        true
                    });
                    // Koordinator's scavenger runs every minute.
                    if scavenged.is_none_or(|t| t.elapsed() >= SCAVENGE_EVERY) {
                        scavenged = Some(std::time::Instant::now());
                        let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
                        match c.scavenge(&jobs, now).await {
                            Ok(0) => {}
                            Ok(n) => tracing::info!(jobs = n, "old PodMigrationJobs scavenged"),
                            Err(e) => {
                                tracing::warn!(error = %e, "scavenging PodMigrationJobs failed")
                            }
                        }
                    }
                }
                let tick = if active {
                    Duration::from_secs(3)
                } else {
                    SCAVENGE_EVERY
                };
                tokio::select! {
                    _ = shutdown.draining() => return Ok(()),
                    _ = wake.notified() => {}
                    _ = cache.jobs.changed.notified() => {}
                    _ = tokio::time::sleep(tick) => {}
                }
                // Coalesce a burst of job events into one round, and let the cache catch up
                // with what the last round wrote.
                tokio::time::sleep(c.args.arbitration_interval.max(Duration::from_millis(100)))
                    .await;
            }
        });
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_job_creator_survives_a_restart_and_differs_by_node() {
        let a = super::job_creator("node-1", "koord-descheduler");
        assert_eq!(a, super::job_creator("node-1", "koord-descheduler"));
        assert_ne!(a, super::job_creator("node-2", "koord-descheduler"));
        assert!(
            uuid::Uuid::parse_str(&a).is_ok(),
            "a UUID, as Koordinator's"
        );
    }
}
