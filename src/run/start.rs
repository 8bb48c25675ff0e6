//! What a process starts before its roles, in order: signal handlers, the data dir, the
//! embedded control plane, the admin endpoint, the cluster. Any failure is one error with
//! what it was about (`--data-dir: ...`), printed once by `run_roles`. The configuration is
//! finished in one place, [`finish_config`], once the facts it depends on are known (the
//! embedded node runtime's addresses, the admin port actually bound) and before any role
//! or `/debug/config` sees it.

use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::Signals;
use super::embedded::{self, Embedded};
use crate::config::{self, Config, HostEnv};
use crate::kernel::readiness::ReadyHandle;
use crate::kernel::role::RoleSet;
use crate::kernel::{self, Metrics, Readiness, Shutdown, Tasks, admin, cluster};

/// The process-wide parts every role shares.
pub(super) struct Process {
    pub shutdown: Shutdown,
    pub metrics: Metrics,
    pub readiness: Readiness,
    pub tasks: Tasks,
}

impl Process {
    pub fn new() -> Process {
        let shutdown = Shutdown::new();
        let metrics = Metrics::new();
        Process {
            readiness: Readiness::new(&metrics),
            tasks: Tasks::new(shutdown.clone()),
            shutdown,
            metrics,
        }
    }
}

/// The admin endpoint being served, and how to stop it.
pub(super) struct Admin {
    pub server: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub stop: CancellationToken,
}

/// Everything up once start-up succeeded.
pub(super) struct Started {
    /// The finished configuration the roles run with.
    pub cfg: Config,
    pub signals: Signals,
    /// Held for the process's life.
    pub _data_dir: Option<crate::os::files::DirLock>,
    pub embedded: Option<Embedded>,
    pub cluster: Option<kernel::Cluster>,
    pub admin: Admin,
    /// One per role, in the order of `roles`, registered before `/readyz` is served.
    pub handles: Vec<ReadyHandle>,
}

pub(super) async fn start(
    cfg: Config,
    roles: &RoleSet,
    host: &HostEnv,
    p: &Process,
) -> anyhow::Result<Started> {
    let signals = Signals::install().context("installing signal handlers")?;
    let data_dir = claim_data_dir(&cfg, roles).context("--data-dir")?;
    let embedded = if cfg.embedded.enabled {
        let e = embedded::start_embedded(&cfg, &p.readiness, host.is_root).await?;
        embedded::follow_store_health(&e.0, &p.readiness, &p.tasks, &p.shutdown);
        Some(e)
    } else {
        None
    };
    let listener = admin::bind(embedded::admin_addr(&cfg)).await?;
    let cfg = finish_config(cfg, embedded.as_ref(), &listener);
    // Several watchers in one process (roles, and the embedded workload controllers):
    // one list+watch per kind and selector feeds them all.
    let watchers = roles.0.iter().filter(|r| r.needs_cluster()).count()
        + usize::from(embedded.is_some() && !roles.0.is_empty());
    if watchers > 1 {
        crate::kernel::bus::enable();
    }
    let cluster = cluster_for(&cfg, roles, host, embedded.as_ref(), p).await?;
    // Every role is listed as not ready before /readyz can first be asked.
    let handles = roles
        .0
        .iter()
        .map(|r| p.readiness.register(r.name()))
        .collect();
    let admin = serve_admin(&cfg, roles, p, listener).await?;
    Ok(Started {
        cfg,
        signals,
        _data_dir: data_dir,
        embedded,
        cluster,
        admin,
        handles,
    })
}

/// The merged configuration made what the roles run with: wired to the embedded node
/// runtime and control plane when there is one, and naming the admin port really bound
/// (port 0 or a moved default: said on stderr).
fn finish_config(mut cfg: Config, embedded: Option<&Embedded>, admin: &TcpListener) -> Config {
    if let Some((_, _, runtime)) = embedded {
        if let Some(rt) = runtime {
            embedded::wire_koordlet_to_runtime(&mut cfg, rt);
        }
        embedded::configure(&mut cfg);
    }
    if let Ok(bound) = admin.local_addr()
        && bound != cfg.common.admin_addr
    {
        eprintln!("koord: admin endpoint at http://{bound}");
        cfg.common.admin_addr = bound;
    }
    cfg
}

/// Makes the data dir this process's own when it keeps state there.
fn claim_data_dir(
    cfg: &Config,
    roles: &RoleSet,
) -> anyhow::Result<Option<crate::os::files::DirLock>> {
    if !cfg.embedded.enabled && !roles.0.iter().any(|r| r.uses_data_dir()) {
        return Ok(None);
    }
    Ok(super::claim_data_dir(
        &cfg.common.data_dir,
        cfg.embedded.enabled,
    )?)
}

/// The cluster the roles talk to: the embedded one (with koord's workload controllers, as
/// there is no kube-controller-manager), or the one the kubeconfig names when a role
/// needs one.
async fn cluster_for(
    cfg: &Config,
    roles: &RoleSet,
    host: &HostEnv,
    embedded: Option<&Embedded>,
    p: &Process,
) -> anyhow::Result<Option<kernel::Cluster>> {
    if let Some((server, c, _)) = embedded {
        // Not when only the API server is served, e.g. under a separately run scheduler.
        if !roles.0.is_empty() {
            server.attach_garbage_collector(&crate::controllers::gc::OWNERS);
            crate::controllers::spawn(c.client.clone(), &p.tasks, &p.shutdown);
        }
        return Ok(Some(c.clone()));
    }
    if !roles.0.iter().any(|r| r.needs_cluster()) {
        return Ok(None);
    }
    let c = cluster::resolve(cfg.common.kubeconfig.as_deref(), host)
        .await
        .with_context(|| format!("--role={} needs a Kubernetes cluster", roles.names()))?;
    Ok(Some(c))
}

/// Serves the admin endpoint on `listener` and on the further addresses that ask for it
/// (`common.healthProbeAddr`, the descheduler's `healthzBindAddress`).
async fn serve_admin(
    cfg: &Config,
    roles: &RoleSet,
    p: &Process,
    listener: TcpListener,
) -> anyhow::Result<Admin> {
    let stop = CancellationToken::new();
    let state = admin::AdminState {
        readiness: p.readiness.clone(),
        metrics: p.metrics.clone(),
        config: Arc::new(config::redacted_json(cfg)),
    };
    for (what, addr) in super::more_admin_addrs(cfg, roles) {
        let l = admin::bind(addr).await.context(what)?;
        tokio::spawn(admin::serve(l, state.clone(), stop.clone()));
    }
    let server = tokio::spawn(admin::serve(listener, state, stop.clone()));
    Ok(Admin { server, stop })
}
