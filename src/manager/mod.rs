//! koord-manager: SLO controllers and admission webhooks.
//!
//! Turns measured usage into batch/mid overcommit capacity and the slo-controller-config
//! ConfigMap into per-node NodeSLOs and NodeMetrics. Every replica keeps warm caches; only
//! the holder of the `koordinator-manager` Lease writes.

pub mod access;
pub mod cache;
pub mod controllers;
pub mod features;
pub mod metrics;
pub mod sloconfig_watch;
pub mod webhook;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::api::sloconfig::{DEFAULT_NAME, DEFAULT_NAMESPACE};
use crate::kernel::RoleCtx;
use crate::kernel::lease::{self, LeaseConfig};

/// Settings of the `manager` section.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// Namespace of `slo-controller-config` (Koordinator's `--config-namespace`).
    pub config_namespace: String,
    /// Name of the ConfigMap (Koordinator's `--slo-config-name`).
    pub slo_config_name: String,
    /// Every node is re-examined this often even without events (forced refreshes).
    pub resync_seconds: u64,
    pub leader_election: LeaseConfig,
    /// Koordinator's `--feature-gates` for koord-manager, by name.
    pub feature_gates: BTreeMap<String, bool>,
    /// Koordinator's `--controllers`: `*`, `name`, `-name`, comma-separated.
    pub controllers: String,
    pub webhook: webhook::Config,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            config_namespace: DEFAULT_NAMESPACE.into(),
            slo_config_name: DEFAULT_NAME.into(),
            resync_seconds: 60,
            leader_election: LeaseConfig::named("koordinator-manager"),
            feature_gates: BTreeMap::new(),
            controllers: "*".into(),
            webhook: webhook::Config::default(),
        }
    }
}

/// Problems as (key under `manager`, message).
pub fn validate(cfg: &Config, strict: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if cfg.resync_seconds == 0 {
        out.push(("resyncSeconds".into(), "must be > 0".into()));
    }
    if let Err(e) = cfg.leader_election.validate() {
        out.push(("leaderElection".into(), e));
    }
    if strict {
        let items = features::MANAGER_GATES.unsupported(&cfg.feature_gates);
        for e in crate::kernel::compat::errors(&items) {
            out.push(("featureGates".into(), e));
        }
    }
    for (k, e) in cfg.webhook.validate() {
        out.push((format!("webhook.{k}"), e));
    }
    if let Err(e) = controllers::select::parse(&cfg.controllers) {
        out.push(("controllers".into(), e));
    }
    if strict {
        for n in controllers::select::unsupported(&cfg.controllers) {
            out.push(("controllers".into(), not_yet(n).message));
        }
    }
    out
}

fn not_yet(controller: &str) -> crate::kernel::compat::Unsupported {
    let message =
        format!("controller {controller} is not implemented by koord yet; it does not run");
    crate::kernel::compat::Unsupported::new("controller", controller, message)
}

/// Runs the role until the process drains.
pub async fn run(cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    if let Some((key, msg)) = validate(&cfg, ctx.common.strict).into_iter().next() {
        anyhow::bail!("manager.{key}: {msg}");
    }
    ctx.report_unsupported(&features::MANAGER_GATES.unsupported(&cfg.feature_gates));
    let run = controllers::select::parse(&cfg.controllers).map_err(anyhow::Error::msg)?;
    let not_yet: Vec<_> = controllers::select::unsupported(&cfg.controllers)
        .into_iter()
        .map(not_yet)
        .collect();
    ctx.report_unsupported(&not_yet);
    let cluster = ctx.cluster()?.clone();
    if !crate::kernel::cluster::wait_reachable(&cluster.client, &ctx.shutdown).await {
        return Ok(());
    }
    let client = cluster.client.clone();
    let Some(granted) = crate::kernel::access::settle(
        &client,
        "manager",
        access::NEEDS,
        &cfg.leader_election.namespace,
        &ctx.ready,
        &ctx.shutdown,
    )
    .await
    else {
        return Ok(());
    };
    let metrics = metrics::ManagerMetrics::register(&ctx.metrics);
    let identity = format!("{}_{}", ctx.common.node_name, uuid::Uuid::new_v4());
    let leadership = lease::start(
        client.clone(),
        cfg.leader_election.clone(),
        identity,
        &ctx.tasks,
        &ctx.shutdown,
    );
    let dirty = Arc::new(cache::Dirty::default());
    let caches = cache::Caches::start(&client, &dirty, &ctx.tasks, &ctx.shutdown);
    let config = sloconfig_watch::start(
        sloconfig_watch::Watch {
            client: client.clone(),
            namespace: cfg.config_namespace.clone(),
            name: cfg.slo_config_name.clone(),
            dirty: dirty.clone(),
            leadership: leadership.clone(),
            metrics: metrics.clone(),
        },
        &ctx.tasks,
        &ctx.shutdown,
    );
    if !caches.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    let mut cfg_rx = config.clone();
    tokio::select! {
        _ = cfg_rx.wait_for(|c| c.is_some()) => {}
        _ = ctx.shutdown.draining() => return Ok(()),
    }
    let gates = features::MANAGER_GATES.from_user(&cfg.feature_gates);
    let sync_gpu_shared = gates.on(features::ENABLE_SYNC_GPU_SHARED_RESOURCE);
    let colocation_profiles = gates.on(features::COLOCATION_PROFILE_CONTROLLER);
    if gates.on(features::WEBHOOK_FRAMEWORK) {
        let start = webhook::server::Start {
            client: client.clone(),
            cfg: cfg.webhook.clone(),
            leadership: leadership.clone(),
            gates,
            caches: caches.clone(),
            slo: config.clone(),
            slo_config: (cfg.config_namespace.clone(), cfg.slo_config_name.clone()),
            binding_decisions: metrics.binding_decisions.clone(),
            granted: granted.clone(),
        };
        webhook::start(start, &ctx.tasks, &ctx.shutdown).await?;
    }
    tracing::info!("manager caches synced");
    ctx.ready.set(true);
    metrics.is_leader.set(leadership.is_leader() as i64);
    let p = access::POD_PATCH;
    let may_patch_pods = granted.allows(p.verbs[0], p.group, p.resources[0]);
    if run.colocationprofile && colocation_profiles && may_patch_pods {
        controllers::colocationprofile::spawn(
            client.clone(),
            caches.pods.clone(),
            leadership.clone(),
            &ctx.tasks,
            &ctx.shutdown,
        );
    }
    if run.quotaprofile {
        controllers::quotaprofile::spawn(
            client.clone(),
            caches.nodes.clone(),
            leadership.clone(),
            &ctx.tasks,
            &ctx.shutdown,
        );
    }
    let controllers = controllers::Controllers {
        client,
        caches,
        config,
        leadership,
        metrics,
        dirty,
        resync: Duration::from_secs(cfg.resync_seconds),
        last_sync: Default::default(),
        failures: Default::default(),
        sync_gpu_shared,
        wakeups: ctx.metrics.loop_counter("manager"),
        run,
    };
    controllers.run(&ctx.shutdown).await;
    Ok(())
}
