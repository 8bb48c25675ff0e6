//! The embedded Kubernetes-compatible API server: `koord --embedded`, the integration
//! tests and simulations run real clients (kube-rs, kubectl) against it over loopback.
//! Storage is sled under the data dir; it serves what kube-rs, client-go informers and kubectl rely on.

pub mod admission;
pub mod aggregation;
pub mod auth;
pub mod bootstrap;
pub mod cause;
pub mod crd_cleanup;
pub mod crd_lifecycle;
mod defaults;
pub mod endpoints;
pub mod error;
pub mod fieldmanager;
pub mod http;
mod humanize;
pub mod kinds;
pub mod label_keys;
#[cfg(test)]
mod layering_tests;
pub mod limits;
pub mod namespaces;
pub mod node;
pub mod objectmeta;
pub mod openapi;
pub mod podgc;
pub mod podspec;
#[cfg(test)]
mod props_tests;
pub mod protection;
pub mod proto;
pub mod pvbinder;
pub mod sa_admission;
pub mod sa_controller;
mod table_core;
mod table_storage;
mod table_workloads;
pub use crate::api::patch;
pub mod registry;
pub mod schema;
pub mod schemas;
pub mod security;
pub mod semantics;
pub mod sim;
pub mod store;
pub mod table;
pub mod validate;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use http::ServerState;
use store::{Store, StoreOptions};

/// The `embedded` configuration section.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// Run the in-process API server and point every role at it (`--embedded`).
    pub enabled: bool,
    /// Listen address (`--embedded-addr`). Loopback by default; every address is served
    /// over HTTPS and needs the token.
    pub addr: SocketAddr,
    /// Token required as `Authorization: Bearer` on every request. Unset: one is generated
    /// once and kept under `<dataDir>/pki/token` (the written kubeconfig carries it).
    pub bearer_token: Option<String>,
    /// Events kept per resource for watches resuming from older resourceVersions.
    pub watch_history: usize,
    /// Bytes of objects kept in that history per resource; the older events go first.
    pub watch_history_bytes: u64,
    /// Events buffered per watcher before a slow watcher is closed.
    pub watcher_buffer: usize,
    /// Bytes of objects buffered per watcher before a slow watcher is closed.
    pub watcher_buffer_bytes: u64,
    /// Bytes of objects buffered for all watchers together.
    pub watch_buffer_bytes: u64,
    /// Seconds between watch bookmarks.
    pub bookmark_interval_seconds: u64,
    /// Reads served at once (kube-apiserver's `--max-requests-inflight`).
    pub max_requests_inflight: usize,
    /// Writes served at once (`--max-mutating-requests-inflight`).
    pub max_mutating_requests_inflight: usize,
    /// Simulated nodes to register (`--sim-nodes`).
    pub sim_nodes: u32,
    /// CPU of each simulated node (`--sim-node-cpu`).
    pub sim_node_cpu: String,
    /// Memory of each simulated node (`--sim-node-memory`).
    pub sim_node_memory: String,
    /// Register this machine as a Node named `common.nodeName`.
    pub register_local_node: bool,
    /// Run pods bound to that Node as host processes (the embedded node runtime).
    pub node_runtime: crate::noderuntime::Config,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            enabled: false,
            addr: SocketAddr::from(([127, 0, 0, 1], 6443)),
            bearer_token: None,
            watch_history: 10_000,
            watch_history_bytes: 16 << 20,
            watcher_buffer: 4096,
            watcher_buffer_bytes: store::WATCHER_BUFFER_BYTES,
            watch_buffer_bytes: store::WATCH_BUFFER_BYTES,
            bookmark_interval_seconds: 60,
            max_requests_inflight: http::MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: http::MAX_MUTATING_REQUESTS_INFLIGHT,
            sim_nodes: 0,
            sim_node_cpu: "32".into(),
            sim_node_memory: "256Gi".into(),
            register_local_node: true,
            node_runtime: crate::noderuntime::Config::default(),
        }
    }
}

impl Config {
    /// Server options for this configuration.
    pub fn options(&self, data_dir: &Path, node_name: &str) -> Options {
        Options {
            addr: self.addr,
            data_dir: Some(data_dir.to_path_buf()),
            tls: true,
            bearer_token: self.bearer_token.clone(),
            store: StoreOptions {
                history: self.watch_history,
                history_bytes: self.watch_history_bytes,
                watcher_buffer: self.watcher_buffer,
                watcher_buffer_bytes: self.watcher_buffer_bytes,
                watch_buffer_bytes: self.watch_buffer_bytes,
                ..Default::default()
            },
            bookmark_interval: Duration::from_secs(self.bookmark_interval_seconds.max(1)),
            sim: (self.sim_nodes > 0).then(|| sim::SimNodes {
                count: self.sim_nodes,
                cpu: self.sim_node_cpu.clone(),
                memory: self.sim_node_memory.clone(),
                pods: 110,
            }),
            local_node: self
                .register_local_node
                .then(|| node::LocalNode::detect(node_name)),
            limits: Default::default(),
            inflight: http::InFlight::new(
                self.max_requests_inflight,
                self.max_mutating_requests_inflight,
            ),
            compaction_interval: Duration::from_secs(10),
            pod_gc_grace: Duration::from_secs(40),
            pod_logs: Some(data_dir.join("noderuntime").join("logs")),
        }
    }

    /// Problems with this section, as (key, message).
    pub fn validate(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (key, q) in [
            ("simNodeCpu", &self.sim_node_cpu),
            ("simNodeMemory", &self.sim_node_memory),
        ] {
            if let Err(e) = crate::api::quantity::parse(q) {
                out.push((key, e.to_string()));
            }
        }
        out
    }
}

/// Everything needed to start a server; tests build this directly.
#[derive(Debug, Clone)]
pub struct Options {
    pub addr: SocketAddr,
    /// `None`: a temporary store that disappears with the server.
    pub data_dir: Option<PathBuf>,
    /// Serve HTTPS with a CA of the server's own, and require a token (generated when
    /// `bearer_token` is unset). Off only for in-process test harnesses.
    pub tls: bool,
    pub bearer_token: Option<String>,
    pub store: StoreOptions,
    pub bookmark_interval: Duration,
    pub sim: Option<sim::SimNodes>,
    pub local_node: Option<node::LocalNode>,
    /// Connection cap and timeouts of the listener.
    pub limits: crate::kernel::http::Limits,
    /// Requests served at once, reads and writes apart.
    pub inflight: http::InFlight,
    /// How often the store's size on disk is compared with its live data.
    pub compaction_interval: Duration,
    /// How long a pod bound to a node that does not exist stays before it is deleted.
    pub pod_gc_grace: Duration,
    /// Container logs of the embedded node runtime, served as `pods/log`.
    pub pod_logs: Option<PathBuf>,
}

impl Options {
    /// Loopback, any free port, temporary storage, nothing registered.
    pub fn for_tests() -> Options {
        Options {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: None,
            tls: false,
            bearer_token: None,
            store: StoreOptions::default(),
            bookmark_interval: Duration::from_secs(60),
            sim: None,
            local_node: None,
            limits: Default::default(),
            inflight: Default::default(),
            compaction_interval: Duration::from_secs(10),
            pod_gc_grace: Duration::from_secs(40),
            pod_logs: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "refusing to serve the embedded API server on non-loopback {0} without embedded.bearerToken"
    )]
    Insecure(SocketAddr),
    #[error("listening on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
    #[error("opening the store at {0}: {1}")]
    Store(PathBuf, store::StoreError),
    #[error("creating {0}: {1}")]
    DataDir(PathBuf, std::io::Error),
    #[error("{0}")]
    Security(#[from] security::SecurityError),
}

/// A running server. Stop it with [`ApiServer::shutdown`], which also flushes storage.
pub struct ApiServer {
    state: Arc<ServerState>,
    addr: SocketAddr,
    ca_pem: Option<String>,
    stop: CancellationToken,
    tasks: JoinSet<()>,
}

const EVENT_TTL: Duration = Duration::from_secs(3600);

impl ApiServer {
    pub async fn start(opts: Options) -> Result<ApiServer, StartError> {
        if let Some(dir) = &opts.data_dir {
            crate::os::files::private_dir(dir).map_err(security::SecurityError::from)?;
        }
        let creds = security::prepare(
            opts.data_dir.as_deref(),
            opts.addr,
            opts.tls,
            opts.bearer_token.clone(),
        )?;
        if !opts.addr.ip().is_loopback() && creds.token.is_none() {
            return Err(StartError::Insecure(opts.addr));
        }
        let store = match &opts.data_dir {
            Some(dir) => {
                let path = dir.join("apiserver");
                crate::os::files::private_dir(&path).map_err(security::SecurityError::from)?;
                let store = Store::open(&path, opts.store.clone())
                    .map_err(|e| StartError::Store(path.clone(), e))?;
                crate::os::files::restrict_tree(&path).map_err(security::SecurityError::from)?;
                store
            }
            None => Store::temporary(opts.store.clone())
                .map_err(|e| StartError::Store(PathBuf::from("<temporary>"), e))?,
        };
        let store = Arc::new(store);
        let registry = registry::Registry::with_builtins();
        let store_err = |e| StartError::Store(opts.data_dir.clone().unwrap_or_default(), e);
        bootstrap::run(&store, &registry).map_err(store_err)?;
        let signer = auth::token::Signer::load_or_create(
            opts.data_dir.as_ref().map(|d| d.join("pki")).as_deref(),
        )?;
        if let Some(s) = &opts.sim {
            sim::register(&store, &registry, s).map_err(store_err)?;
        }
        if let Some(n) = &opts.local_node {
            node::register(&store, &registry, n).map_err(store_err)?;
        }
        store.settle().map_err(store_err)?;
        let listener = TcpListener::bind(opts.addr)
            .await
            .map_err(|e| StartError::Listen(opts.addr, e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| StartError::Listen(opts.addr, e))?;
        let tls = creds
            .server_config()?
            .map(|cfg| Arc::new(std::sync::RwLock::new(cfg)));
        let state = Arc::new(ServerState {
            admission: admission::Admission::new(store.clone()),
            store: store.clone(),
            registry,
            auth: crate::kernel::http::ServerAuth {
                tls: tls.clone(),
                token: creds.token.clone(),
            },
            authn: auth::Authenticator {
                admin_token: creds.token.clone(),
                signer,
            },
            authz: auth::rbac::Authorizer::new(&store),
            server_addr: addr.to_string(),
            continues: Default::default(),
            bookmark_interval: opts.bookmark_interval,
            pod_logs: opts.pod_logs.clone(),
            exec: Default::default(),
            collected: Default::default(),
            inflight: opts.inflight.clone(),
        });
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let handler_state = state.clone();
        let handler = move |req| http::handle(handler_state.clone(), req);
        let serve_stop = stop.clone();
        let limits = opts.limits;
        let serve_tls = tls.clone();
        tasks.spawn(async move {
            let served = crate::kernel::http::serve_limited(
                listener, serve_tls, limits, handler, serve_stop,
            )
            .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "embedded API server stopped");
            }
        });
        if let Some(s) = &opts.sim {
            let names: HashSet<String> = (0..s.count).map(sim::node_name).collect();
            tasks.spawn(sim::run(store.clone(), names, stop.clone()));
        }
        if let (Some(dir), Some(source), Some(bundle)) = (&opts.data_dir, &tls, &creds.tls) {
            let rotation = rotate_certificate(
                dir.join("pki"),
                opts.addr,
                source.clone(),
                bundle.clone(),
                stop.clone(),
            );
            tasks.spawn(rotation);
        }
        tasks.spawn(gc_events(store.clone(), stop.clone()));
        tasks.spawn(namespaces::run(state.clone(), stop.clone()));
        tasks.spawn(crd_cleanup::run(state.clone(), stop.clone()));
        // The bootstrap namespaces have theirs before the first request.
        let ca_pem = creds.tls.as_ref().map(|b| b.ca_pem.clone());
        sa_controller::pass(&state, ca_pem.as_deref().unwrap_or_default());
        store.settle().map_err(store_err)?;
        tasks.spawn(sa_controller::run(state.clone(), ca_pem, stop.clone()));
        aggregation::pass(&state);
        tasks.spawn(aggregation::run(state.clone(), stop.clone()));
        tasks.spawn(podgc::run(store.clone(), opts.pod_gc_grace, stop.clone()));
        tasks.spawn(pvbinder::run(store.clone(), stop.clone()));
        tasks.spawn(maintain(
            store.clone(),
            opts.compaction_interval,
            stop.clone(),
        ));
        tracing::info!(%addr, "embedded API server listening");
        Ok(ApiServer {
            state,
            addr,
            ca_pem: creds.tls.map(|b| b.ca_pem),
            stop,
            tasks,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `None` while the store takes writes; the failure while it does not.
    pub fn store_health(&self) -> tokio::sync::watch::Receiver<Option<store::Failure>> {
        self.state.store.health()
    }

    /// How this server authenticates clients (the node runtime's kubelet API takes the
    /// same credentials).
    pub fn auth(&self) -> crate::kernel::http::ServerAuth {
        self.state.auth.clone()
    }

    /// Where clients reach the server: loopback when it listens on every address.
    pub fn url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{addr}")
    }

    /// Serves `pods/exec` through this node runtime (set once, when the runtime starts).
    pub fn attach_exec(&self, exec: crate::noderuntime::exec::Exec) {
        let _ = self.state.exec.set(exec);
    }

    /// A garbage collector in this process looks after dependents of these
    /// `(group, resource)`s: DELETE honours `Orphan` / `Foreground` propagation for them.
    pub fn attach_garbage_collector(&self, kinds: &[(&str, &str)]) {
        let kinds = kinds.iter().map(|(g, r)| (g.to_string(), r.to_string()));
        let _ = self.state.collected.set(kinds.collect());
    }

    /// The storage, for in-process use (simulation, tests, benchmarks).
    pub fn store(&self) -> &Arc<Store> {
        &self.state.store
    }

    /// A kubeconfig for kubectl and kube-rs. It carries the token: keep it private.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine;
        let user = match &self.state.auth.token {
            Some(t) => format!("{{token: {t}}}"),
            None => "{}".to_string(),
        };
        let ca = self.ca_pem.as_ref().map_or(String::new(), |pem| {
            let data = base64::engine::general_purpose::STANDARD.encode(pem);
            format!("    certificate-authority-data: {data}\n")
        });
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: koord-embedded\n  cluster:\n{ca}    server: {}\n\
             contexts:\n- name: koord-embedded\n  context:\n    cluster: koord-embedded\n    user: koord-embedded\n    namespace: default\n\
             current-context: koord-embedded\nusers:\n- name: koord-embedded\n  user: {user}\n",
            self.url()
        )
    }

    /// Writes the kubeconfig (mode 0600, replacing any older file atomically).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), security::SecurityError> {
        security::write_private(path, &self.kubeconfig())
    }

    /// A kube-rs client for this server.
    pub async fn client(&self) -> Result<kube::Client, kube::Error> {
        let kc = kube::config::Kubeconfig::from_yaml(&self.kubeconfig())
            .map_err(kube::Error::InferKubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(kube::Error::InferKubeconfig)?;
        crate::kernel::cluster::client_for(config)
    }

    /// Stops serving, closes every connection and flushes storage.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
        let store = &self.state.store;
        if store.failure().is_none()
            && let Err(e) = store.durable(store.rev()).await
        {
            tracing::error!(error = %e, "flushing the embedded API server's store");
        }
    }
}

/// Keeps the store's files in proportion to its live data (sled alone never shrinks),
/// and brings a failed store back once the disk takes writes again (tried every second).
async fn maintain(store: Arc<Store>, every: Duration, stop: CancellationToken) {
    let every = every.max(Duration::from_secs(1));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if store.failure().is_some() {
            store.recover().await;
            continue;
        }
        if last.elapsed() < every {
            continue;
        }
        last = tokio::time::Instant::now();
        let s = store.clone();
        match tokio::task::spawn_blocking(move || s.compact_if_needed()).await {
            Ok(Err(e)) => tracing::error!(error = %e, "compacting the API server's store"),
            Err(e) => tracing::error!(error = %e, "compaction task failed"),
            Ok(Ok(_)) => {}
        }
    }
}

/// Replaces the serving certificate before it ends (checked twice a day), under the same
/// CA: connected clients and every kubeconfig keep working.
async fn rotate_certificate(
    pki: PathBuf,
    addr: SocketAddr,
    source: crate::kernel::http::TlsSource,
    mut current: crate::kernel::tls::CertBundle,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(12 * 3600));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let next = match security::load_or_generate_tls(&pki, addr) {
            Ok(b) if b != current => b,
            Ok(_) => continue,
            Err(e) => {
                tracing::error!(error = %e, "renewing the embedded API server's certificate");
                continue;
            }
        };
        if next.ca_pem != current.ca_pem {
            tracing::error!(
                "the embedded API server's CA was replaced: restart koord so that its clients trust the new one"
            );
        }
        match crate::kernel::tls::server_config(next.cert_pem.as_bytes(), next.key_pem.as_bytes()) {
            Ok(cfg) => {
                *source.write().unwrap_or_else(|p| p.into_inner()) = cfg;
                tracing::info!("the embedded API server serves a renewed certificate");
                current = next;
            }
            Err(e) => tracing::error!(error = %e, "the renewed certificate does not load"),
        }
    }
}

/// Events expire after an hour, as in Kubernetes.
async fn gc_events(store: Arc<Store>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let cutoff = k8s_openapi::jiff::Timestamp::now()
            - k8s_openapi::jiff::SignedDuration::from_secs(EVENT_TTL.as_secs() as i64);
        for key in [
            (String::new(), "events".to_string()),
            ("events.k8s.io".to_string(), "events".to_string()),
        ] {
            let (_, items) = store.list(&key, &Default::default());
            for ev in items {
                let created = ev
                    .value()
                    .pointer("/metadata/creationTimestamp")
                    .and_then(|v| v.as_str())
                    .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok());
                if created.is_some_and(|c| c < cutoff) {
                    let _ = store.commit(&key, &ev.namespace, &ev.name, |c| {
                        if c.is_some() {
                            Ok(store::Change::Delete)
                        } else {
                            Err(store::Skippable::Skip)
                        }
                    });
                }
            }
        }
    }
}
