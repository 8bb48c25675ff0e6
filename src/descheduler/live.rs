//! The live descheduler: the pass loop on the Lease holder, and the migration controller
//! woken by the pass and by PodMigrationJob events.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{EvictParams, ListParams, PostParams};
use serde_json::Value;
use tokio::sync::Notify;

use super::Config;
use super::framework::world::World;
use super::framework::{Plugins, Report};
use super::migration::controller::Controller;
use super::migration::job::new_job;
use crate::api::scheduling::migration::PodMigrationJob;
use crate::api::slo::NodeMetric;
use crate::kernel::RoleCtx;
use crate::kernel::lease::{self, Leadership};

/// Everything one pass reads, listed from the API server.
pub async fn list_world(
    client: &kube::Client,
) -> Result<(World, Vec<PodMigrationJob>), kube::Error> {
    let lp = ListParams::default();
    let nodes: Vec<Node> = Api::<Node>::all(client.clone()).list(&lp).await?.items;
    let pods: Vec<Pod> = Api::<Pod>::all(client.clone()).list(&lp).await?.items;
    let metrics: Vec<NodeMetric> = match Api::<NodeMetric>::all(client.clone()).list(&lp).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => return Err(e),
    };
    let jobs: Vec<PodMigrationJob> =
        match Api::<PodMigrationJob>::all(client.clone()).list(&lp).await {
            Ok(l) => l.items,
            Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
            Err(e) => return Err(e),
        };
    let mut others: Vec<Value> = Vec::new();
    for (group, version, plural) in [
        ("apps", "v1", "replicasets"),
        ("apps", "v1", "statefulsets"),
        ("", "v1", "replicationcontrollers"),
        ("batch", "v1", "jobs"),
        ("scheduling.k8s.io", "v1", "priorityclasses"),
    ] {
        others.extend(list_raw(client, group, version, plural).await);
    }
    let world = World::build(nodes, pods, metrics, &jobs, &others);
    Ok((world, jobs))
}

/// A kind listed as raw JSON; one the server lacks is empty.
async fn list_raw(client: &kube::Client, group: &str, version: &str, plural: &str) -> Vec<Value> {
    let gvk = kube::api::GroupVersionKind::gvk(group, version, "");
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &ar);
    let kind = match plural {
        "replicasets" => "ReplicaSet",
        "statefulsets" => "StatefulSet",
        "replicationcontrollers" => "ReplicationController",
        "jobs" => "Job",
        _ => "PriorityClass",
    };
    match api.list(&ListParams::default()).await {
        Ok(l) => l
            .items
            .into_iter()
            .filter_map(|o| {
                let mut v = serde_json::to_value(o).ok()?;
                v["kind"] = Value::from(kind);
                Some(v)
            })
            .collect(),
        Err(e) => {
            tracing::debug!(%plural, error = %e, "cannot list; ignored");
            Vec::new()
        }
    }
}

struct Role {
    client: kube::Client,
    plugins: Plugins,
    instance: String,
    migration: Option<super::migration::args::MigrationArgs>,
    dry_run: bool,
}

impl Role {
    async fn pass(&mut self, wake: &Notify) {
        let (world, _) = match list_world(&self.client).await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "descheduling pass skipped: cannot list the cluster");
                return;
            }
        };
        let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
        let report = self.plugins.run(&world, now);
        for e in &report.errors {
            tracing::info!(error = %e, "descheduling pass");
        }
        let mig_dry = self.migration.as_ref().is_some_and(|a| a.dry_run);
        if self.dry_run || mig_dry {
            tracing::info!(decisions = %report.to_json(), "descheduling pass (dry run: nothing evicted)");
            return;
        }
        tracing::debug!(decisions = %report.to_json(), "descheduling pass");
        self.start(&report).await;
        if !report.evictions.is_empty() {
            wake.notify_one();
        }
    }

    async fn start(&self, report: &Report) {
        for e in &report.evictions {
            let pod = &e.pod;
            let who = super::framework::world::key(pod);
            let r = match (&self.migration, &e.mode) {
                (Some(a), Some(_)) => {
                    let name = uuid::Uuid::new_v4().to_string();
                    let job = new_job(&name, pod, &e.plugin, &e.reason, a, &self.instance);
                    Api::<PodMigrationJob>::all(self.client.clone())
                        .create(&PostParams::default(), &job)
                        .await
                        .map(|_| ())
                }
                _ => {
                    let ns = pod.metadata.namespace.clone().unwrap_or_default();
                    Api::<Pod>::namespaced(self.client.clone(), &ns)
                        .evict(
                            pod.metadata.name.as_deref().unwrap_or(""),
                            &EvictParams::default(),
                        )
                        .await
                        .map(|_| ())
                }
            };
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
    for p in &dcfg.unsupported {
        tracing::warn!(plugin = %p, "descheduler plugin not implemented by koord yet: ignored");
    }
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
    let instance = uuid::Uuid::new_v4().to_string();
    let identity = format!("{}_{}", ctx.common.node_name, instance);
    let leadership = lease::start(
        client.clone(),
        lease_cfg,
        identity,
        &ctx.tasks,
        &ctx.shutdown,
    );
    let interval = dcfg.interval;
    let plugins = Plugins::build(&dcfg, interval.as_millis() as u64)
        .map_err(|e| anyhow::anyhow!("descheduler: {e}"))?;
    let wake = Arc::new(Notify::new());
    let migration = migration_args(&dcfg);
    if let Some(a) = &migration {
        let c = Controller::new(client.clone(), a.clone(), instance.clone());
        spawn_controller(c, client.clone(), leadership.clone(), wake.clone(), &ctx);
    }
    let mut role = Role {
        client,
        plugins,
        instance,
        migration,
        dry_run: dcfg.dry_run,
    };
    ctx.ready.set(true);
    tracing::info!(interval = ?interval, dry_run = dcfg.dry_run, profiles = dcfg.profiles.len(), "descheduler starting");
    pass_loop(&mut role, interval, leadership, wake, &ctx).await;
    Ok(())
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
            ran = true;
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
fn spawn_controller(
    mut c: Controller,
    client: kube::Client,
    leadership: Leadership,
    wake: Arc<Notify>,
    ctx: &RoleCtx,
) {
    let shutdown = ctx.shutdown.clone();
    let errors = crate::kernel::watch::DecodeErrors::default();
    let events = crate::kernel::watch::watch::<PodMigrationJob>(
        client.clone(),
        None,
        Default::default(),
        errors,
    );
    let waker = wake.clone();
    let s2 = shutdown.clone();
    ctx.tasks.spawn("descheduler/pmj-watch", async move {
        let mut events = std::pin::pin!(events);
        loop {
            tokio::select! {
                _ = s2.draining() => return Ok(()),
                ev = events.next() => match ev {
                    None => return Ok(()),
                    Some(_) => waker.notify_one(),
                },
            }
        }
    });
    ctx.tasks.spawn("descheduler/migration-controller", async move {
        let mut active = false;
        loop {
            let tick = if active { Duration::from_secs(3) } else { Duration::from_secs(3600) };
            tokio::select! {
                _ = shutdown.draining() => return Ok(()),
                _ = wake.notified() => {}
                _ = tokio::time::sleep(tick) => {}
            }
            if !leadership.is_leader() {
                active = false;
                continue;
            }
            // Coalesce a burst of job events into one round.
            tokio::time::sleep(c.args.arbitration_interval.max(Duration::from_millis(100))).await;
            active = match list_world(&client).await {
                Ok((world, jobs)) => c.round(&world, &jobs).await.unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "migration round failed");
                    true
                }),
                Err(e) => {
                    tracing::warn!(error = %e, "migration round skipped: cannot list the cluster");
                    true
                }
            };
        }
    });
}
