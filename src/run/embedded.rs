//! `--embedded`: the in-process API server and node runtime, and what the roles change
//! when they run against them instead of a cluster.

use crate::apiserver::ApiServer;
use crate::config::Config;
use crate::kernel::{self, Readiness, Shutdown, Tasks};
use crate::noderuntime::NodeRuntime;

/// The roles' settings for the embedded control plane: the webhooks called over loopback
/// (there is no Service to resolve, and nobody else needs to reach them), free default
/// ports, `default-scheduler` served, usage reported as often as metrics-server would.
pub(super) fn configure(cfg: &mut Config) {
    let webhook = &mut cfg.manager.webhook;
    if webhook.host.is_empty() {
        webhook.host = "127.0.0.1".into();
    }
    if webhook.bind_address.is_unspecified() {
        webhook.bind_address = std::net::Ipv4Addr::LOCALHOST.into();
    }
    // Only the in-process API server calls it, at the address it registers: a free
    // port, so a second embedded koord on the host does not collide on 9876.
    if webhook.port == crate::manager::webhook::Config::default().port {
        webhook.port = 0;
    }
    // No kube-scheduler here: koord-scheduler also takes pods without a schedulerName.
    cfg.scheduler.serve_default_scheduler = true;
    // No metrics-server either: `kubectl top` reads the NodeMetric reports, so they
    // come every 15 s (metrics-server's resolution) rather than every minute.
    let reporter = &mut cfg.koordlet.reporter;
    reporter.max_report_interval_seconds = Some(EMBEDDED_REPORT_SECONDS);
    reporter.min_report_interval_seconds = reporter
        .min_report_interval_seconds
        .min(EMBEDDED_REPORT_SECONDS);
}

/// Where the admin endpoint listens: as configured, except that beside another embedded
/// koord on this machine the default moves to a free port (the start says where).
pub(super) fn admin_addr(cfg: &Config) -> std::net::SocketAddr {
    if !cfg.embedded.enabled {
        return cfg.common.admin_addr;
    }
    let default_admin = crate::kernel::common::CommonConfig::default().admin_addr;
    free_if_default_taken(cfg.common.admin_addr, default_admin)
}

/// `apiserver` readiness follows the store: not ready while the disk refuses writes.
pub(super) fn follow_store_health(
    server: &ApiServer,
    readiness: &Readiness,
    tasks: &Tasks,
    shutdown: &Shutdown,
) {
    let ready = readiness.register("apiserver/storage");
    let mut health = server.store_health();
    let shutdown = shutdown.clone();
    tasks.spawn("apiserver/storage", async move {
        loop {
            let failed = health.borrow_and_update().is_some();
            ready.set(!failed);
            tokio::select! {
                _ = shutdown.draining() => return Ok(()),
                changed = health.changed() => if changed.is_err() { return Ok(()) },
            }
        }
    });
}

/// In embedded mode the koordlet reads pods from the node runtime's `/pods`, and looks for
/// cgroups where the runtime puts them, unless configured otherwise.
pub(super) fn wire_koordlet_to_runtime(cfg: &mut Config, rt: &NodeRuntime) {
    let k = &mut cfg.koordlet;
    if k.kubelet.pods_url.is_none() {
        k.kubelet.pods_url = Some(rt.pods_url());
        k.kubelet.token_file = crate::apiserver::security::token_file(&cfg.common.data_dir);
    }
    // The runtime serves the kubelet's pod-resources socket under a kubelet root of its
    // own, which the koordlet (and its proxy) then reads.
    if k.kubelet.root_dir == crate::koordlet::KubeletConfig::default().root_dir {
        k.kubelet.root_dir = rt.kubelet_root();
    }
    let runtime = &cfg.embedded.node_runtime;
    if k.cgroup_parent.is_empty() {
        k.cgroup_parent = runtime.cgroup_parent.clone();
    }
    if k.cgroup_driver.is_none() {
        k.cgroup_driver = Some(rt.cgroups().driver());
    }
    // The node runtime calls the koordlet's hooks as koord-runtime-proxy would: both meet
    // in the data dir instead of /var/run and /etc.
    let defaults = crate::koordlet::runtimehooks::Config::default();
    let data = &cfg.common.data_dir;
    let hooks = &mut k.runtime_hooks;
    if hooks.socket == defaults.socket {
        hooks.socket = data.join("koordlet").join("koordlet.sock");
    }
    if hooks.hook_server_dir == defaults.hook_server_dir {
        hooks.hook_server_dir = runtime
            .hook_server_dir
            .clone()
            .unwrap_or_else(|| data.join("hookserver.d"));
    }
}

/// `addr`, or a free port on the same interface when `addr` is its `default` and another
/// process holds it (embedded mode: two instances side by side with default flags). An
/// address asked for explicitly is never moved: taken, it is an error where it is bound.
fn free_if_default_taken(
    addr: std::net::SocketAddr,
    default: std::net::SocketAddr,
) -> std::net::SocketAddr {
    if addr != default || addr.port() == 0 {
        return addr;
    }
    match std::net::TcpListener::bind(addr) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let free = std::net::SocketAddr::new(addr.ip(), 0);
            tracing::info!(%addr, "taken by another process; using a free port instead");
            free
        }
        _ => addr,
    }
}

/// How often the embedded koordlet reports usage (what `kubectl top` shows).
const EMBEDDED_REPORT_SECONDS: u64 = 15;

/// The in-process control plane of `--embedded`.
pub(super) type Embedded = (ApiServer, kernel::Cluster, Option<NodeRuntime>);

/// Starts the in-process API server (writing its kubeconfig) and the local node runtime.
pub(super) async fn start_embedded(
    cfg: &Config,
    readiness: &Readiness,
    is_root: bool,
) -> anyhow::Result<Embedded> {
    let ready = readiness.register("apiserver");
    let mut opts = cfg
        .embedded
        .options(&cfg.common.data_dir, &cfg.common.node_name);
    let default_addr = crate::apiserver::Config::default().addr;
    opts.addr = free_if_default_taken(opts.addr, default_addr);
    let server = ApiServer::start(opts)
        .await
        .map_err(|e| anyhow::anyhow!("embedded API server: {e}"))?;
    let path = cfg.common.data_dir.join("kubeconfig");
    server
        .write_kubeconfig(&path)
        .map_err(|e| anyhow::anyhow!("writing the kubeconfig: {e}"))?;
    let client = server
        .client()
        .await
        .map_err(|e| anyhow::anyhow!("client for the embedded API server: {e}"))?;
    eprintln!(
        "koord: embedded API server at {}; kubeconfig: {}",
        server.url(),
        path.display()
    );
    tracing::info!(url = %server.url(), kubeconfig = %path.display(), "embedded API server ready");
    ready.set(true);
    let source = format!("embedded API server at {}", server.url());
    let mut rt_cfg = cfg.embedded.node_runtime.clone();
    // Containers start under this binary's `__shim`, so their exit survives a restart.
    rt_cfg.shim = std::env::current_exe().ok();
    rt_cfg.api_server = Some(server.addr());
    let runtime = if rt_cfg.enabled && cfg.embedded.register_local_node {
        match NodeRuntime::start(
            rt_cfg,
            client.clone(),
            &cfg.common.node_name,
            &cfg.common.data_dir,
            is_root,
            server.auth(),
        )
        .await
        {
            Ok(rt) => {
                eprintln!(
                    "koord: node runtime runs pods bound to {}; kubelet API at {} (the kubeconfig's token)",
                    cfg.common.node_name,
                    rt.pods_url()
                );
                server.attach_exec(rt.exec());
                Some(rt)
            }
            Err(e) => {
                eprintln!("koord: warning: {e}");
                tracing::warn!(error = %e, "embedded node runtime not started");
                None
            }
        }
    } else {
        None
    };
    Ok((server, kernel::Cluster { client, source }, runtime))
}
