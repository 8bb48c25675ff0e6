//! The embedded node runtime (a "mini-kubelet") for `--embedded`: pods bound to the local
//! Node run as host processes in kubelet-style cgroups, so a single machine runs the whole
//! colocation loop for real. For trying koord, demos and end-to-end tests — not a kubelet
//! replacement: the image is ignored (containers are `command` + `args` on the host), there
//! is no network or filesystem isolation, and no probes.

pub mod checkpoint;
pub mod container;
pub mod exec;
pub mod hooks;
pub mod logstamp;
pub mod podresources;
pub mod qos;
pub mod resources;
pub mod security;
pub mod server;
pub mod shim;
pub mod status;
pub mod volumes;
pub mod worker;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::os::{Cgroups, Driver, Resource};
use worker::{Msg, Worker, reap_cgroup};

/// The `embedded.nodeRuntime` configuration section.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// Run pods bound to the local node (needs root and writable cgroups).
    pub enabled: bool,
    pub cgroup_root: PathBuf,
    pub proc_root: PathBuf,
    /// `cgroupfs` or `systemd`; unset: detect from an existing kubepods, else cgroupfs.
    pub cgroup_driver: Option<Driver>,
    /// The kubelet's `--cgroup-root`: kubepods is created under it.
    pub cgroup_parent: String,
    /// The kubelet API (`/pods`) address: loopback, a free port by default; it takes the
    /// embedded API server's certificate and token.
    pub pods_addr: SocketAddr,
    /// First restart delay of a crashing container; doubles up to the maximum.
    pub restart_backoff_seconds: u64,
    pub max_restart_backoff_seconds: u64,
    /// Leave pod processes running when koord exits (they are re-adopted on the next start).
    pub keep_pods_on_exit: bool,
    /// Grace given to pod processes when koord exits and does not keep them.
    pub exit_grace_seconds: u64,
    /// The koord binary whose `__shim` mode starts each container (so its exit status
    /// survives a koord restart); set by the koord process itself, `None` in tests that
    /// run the runtime in their own process (containers are then direct children).
    #[serde(skip)]
    pub shim: Option<PathBuf>,
    /// The API server containers are told of (`KUBERNETES_SERVICE_HOST`/`_PORT`, as the
    /// kubelet sets them), so a client in a pod finds it with its projected token; set by
    /// the koord process from the embedded API server.
    #[serde(skip)]
    pub api_server: Option<SocketAddr>,
    /// Runtime hook servers to call at container creation, registered as for
    /// koord-runtime-proxy (`*.json`); unset: `<data-dir>/hookserver.d`, where the embedded
    /// koordlet registers.
    pub hook_server_dir: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            enabled: true,
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            proc_root: PathBuf::from("/proc"),
            cgroup_driver: None,
            cgroup_parent: String::new(),
            pods_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            hook_server_dir: None,
            shim: None,
            api_server: None,
            restart_backoff_seconds: 10,
            max_restart_backoff_seconds: 300,
            keep_pods_on_exit: false,
            exit_grace_seconds: 5,
        }
    }
}

impl Config {
    pub fn restart_backoff(&self) -> Duration {
        Duration::from_secs(self.restart_backoff_seconds.max(1))
    }
    pub fn max_restart_backoff(&self) -> Duration {
        Duration::from_secs(
            self.max_restart_backoff_seconds
                .max(self.restart_backoff_seconds)
                .max(1),
        )
    }
    pub fn exit_grace(&self) -> Duration {
        Duration::from_secs(self.exit_grace_seconds)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "the embedded node runtime needs root (pods run in cgroups); the API server and simulated nodes still work"
    )]
    NotRoot,
    #[error(
        "the embedded node runtime cannot use the cgroup hierarchy at {root}: {reason}; the API server and simulated nodes still work"
    )]
    Cgroups { root: PathBuf, reason: String },
    #[error("listening on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
}

/// Shared by the manager, the workers and the `/pods` server.
pub struct Ctx {
    pub client: kube::Client,
    pub cgroups: Cgroups,
    pub proc_root: PathBuf,
    pub node: String,
    pub ip: String,
    /// `<data-dir>/noderuntime`.
    pub dir: PathBuf,
    pub cfg: Config,
    /// The hook servers called before a container starts.
    pub hooks: Arc<crate::runtime_proxy::hooks::Hooks>,
    view: Mutex<BTreeMap<String, Value>>,
}

impl Ctx {
    pub fn checkpoints(&self) -> PathBuf {
        self.dir.join("pods")
    }

    /// Where pod `uid`'s projected volumes are filled.
    pub fn volumes_of(&self, uid: &str) -> PathBuf {
        self.dir.join("volumes").join(uid)
    }

    pub fn view_put(&self, uid: &str, pod: &Pod) {
        if let Ok(v) = serde_json::to_value(pod) {
            self.view
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(uid.to_string(), v);
        }
    }

    pub fn view_remove(&self, uid: &str) {
        self.view
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uid);
    }

    pub fn view_items(&self) -> Vec<Value> {
        self.view
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

/// A running node runtime.
pub struct NodeRuntime {
    ctx: Arc<Ctx>,
    stop: CancellationToken,
    tasks: JoinSet<()>,
    addr: SocketAddr,
    tls: bool,
}

/// `<data-dir>/kubelet`, beside the runtime's own `<data-dir>/noderuntime`.
fn kubelet_root(ctx: &Ctx) -> PathBuf {
    ctx.dir.with_file_name("kubelet")
}

/// The node's allocatable CPU as the runtime registers it: every CPU.
fn allocatable_milli() -> i64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus as i64 * 1000
}

/// Checks that this process may manage cgroups and prepares the QoS directories.
fn prepare_cgroups(cfg: &Config, is_root: bool) -> Result<Cgroups, StartError> {
    if !is_root {
        return Err(StartError::NotRoot);
    }
    let err = |reason: String| StartError::Cgroups {
        root: cfg.cgroup_root.clone(),
        reason,
    };
    let hint = cfg.cgroup_driver.unwrap_or_default();
    let mut cgroups = Cgroups::detect(&cfg.cgroup_root, &cfg.cgroup_parent, hint)
        .map_err(|e| err(e.to_string()))?;
    if let Some(d) = cfg.cgroup_driver {
        cgroups = Cgroups::new(&cfg.cgroup_root, cgroups.version(), d, &cfg.cgroup_parent);
    }
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1) as i64;
    let root = cgroups.kubepods();
    for dir in [
        root.clone(),
        cgroups.qos_dir(crate::api::extension::qos::KubeQoS::Burstable),
        cgroups.qos_dir(crate::api::extension::qos::KubeQoS::BestEffort),
    ] {
        cgroups
            .create(&dir)
            .map_err(|e| err(format!("creating {}: {e}", dir.as_str())))?;
    }
    cgroups
        .write(Resource::CpuShares, &root, &(cpus * 1024).to_string())
        .map_err(|e| err(e.to_string()))?;
    qos::update(&cgroups, allocatable_milli(), std::iter::empty());
    Ok(cgroups)
}

impl NodeRuntime {
    pub async fn start(
        cfg: Config,
        client: kube::Client,
        node: &str,
        data_dir: &Path,
        is_root: bool,
        auth: crate::kernel::http::ServerAuth,
    ) -> Result<NodeRuntime, StartError> {
        let cgroups = prepare_cgroups(&cfg, is_root)?;
        let listener = tokio::net::TcpListener::bind(cfg.pods_addr)
            .await
            .map_err(|e| StartError::Listen(cfg.pods_addr, e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| StartError::Listen(cfg.pods_addr, e))?;
        let hook_dir = cfg
            .hook_server_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("hookserver.d"));
        if let Err(e) = crate::os::files::private_dir(&hook_dir) {
            tracing::warn!(dir = %hook_dir.display(), error = %e, "runtime hook directory unavailable");
        }
        let ctx = Arc::new(Ctx {
            hooks: Arc::new(crate::runtime_proxy::hooks::Hooks::new(hook_dir)),
            client,
            proc_root: cfg.proc_root.clone(),
            cgroups,
            node: node.to_string(),
            ip: "127.0.0.1".into(),
            dir: data_dir.join("noderuntime"),
            cfg,
            view: Mutex::new(BTreeMap::new()),
        });
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let (stop_tx, stop_rx) = mpsc::channel(16);
        let handler_ctx = ctx.clone();
        let tls = auth.tls.clone();
        let has_tls = tls.is_some();
        let auth = Arc::new(auth);
        let handler =
            move |req| server::handle(handler_ctx.clone(), auth.clone(), stop_tx.clone(), req);
        let server_stop = stop.clone();
        tasks.spawn(async move {
            let limits = crate::kernel::http::Limits::default();
            let served =
                crate::kernel::http::serve_limited(listener, tls, limits, handler, server_stop);
            if let Err(e) = served.await {
                tracing::error!(error = %e, "node runtime API stopped");
            }
        });
        tasks.spawn(manage(ctx.clone(), stop_rx, stop.clone()));
        let socket = podresources::socket(&kubelet_root(&ctx));
        tasks.spawn(podresources::serve(ctx.clone(), socket, stop.clone()));
        tracing::info!(%addr, driver = ?ctx.cgroups.driver(), "embedded node runtime started");
        Ok(NodeRuntime {
            ctx,
            stop,
            tasks,
            addr,
            tls: has_tls,
        })
    }

    /// Where this runtime keeps what a kubelet keeps under `/var/lib/kubelet` (the
    /// pod-resources socket).
    pub fn kubelet_root(&self) -> PathBuf {
        kubelet_root(&self.ctx)
    }

    /// The address of the kubelet API.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The kubelet API's pod list, as the koordlet reads it.
    pub fn pods_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/pods", self.addr)
    }

    pub fn cgroups(&self) -> &Cgroups {
        &self.ctx.cgroups
    }

    /// What the API server's `pods/exec` runs commands through.
    pub fn exec(&self) -> exec::Exec {
        exec::Exec {
            ctx: self.ctx.clone(),
        }
    }

    /// Stops every pod (or leaves them for re-adoption with `keepPodsOnExit`). When no pod
    /// is kept, the runtime's own kubepods tree is removed too: nothing is left behind.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
        if !self.ctx.cfg.keep_pods_on_exit {
            remove_tree(&self.ctx.cgroups);
        }
    }
}

struct Handle {
    tx: mpsc::Sender<Msg>,
    namespace: String,
    name: String,
}

/// Watches the node's pods and keeps one worker per pod.
async fn manage(
    ctx: Arc<Ctx>,
    mut stops: mpsc::Receiver<server::StopRequest>,
    stop: CancellationToken,
) {
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", ctx.node));
    let (tx, mut events) = mpsc::unbounded_channel();
    let (client, done) = (ctx.client.clone(), stop.clone());
    tokio::spawn(async move {
        let mut index =
            crate::kernel::pump::forward(move |e: watcher::Event<Pod>| tx.send(e).is_ok());
        crate::kernel::pump::pump::<Pod, _>(client, None, cfg, &mut index, done.cancelled_owned())
            .await;
    });
    let mut checkpoints: HashMap<String, checkpoint::PodCheckpoint> =
        checkpoint::load_all(&ctx.checkpoints())
            .into_iter()
            .map(|c| (c.uid.clone(), c))
            .collect();
    let mut workers: HashMap<String, Handle> = HashMap::new();
    let mut running: JoinSet<String> = JoinSet::new();
    let mut listed: HashSet<String> = HashSet::new();
    // The node's pods as last seen, for the QoS levels' shares (the kubelet's active pods).
    let mut pods: HashMap<String, Pod> = HashMap::new();
    let mut qos_tick = tokio::time::interval(qos::PERIOD);
    qos_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let allocatable = allocatable_milli();
    loop {
        let before = pods.len();
        let mut changed = false;
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = qos_tick.tick() => changed = true,
            Some(done) = running.join_next(), if !running.is_empty() => {
                if let Ok(uid) = done {
                    workers.remove(&uid);
                }
            }
            Some(req) = stops.recv() => {
                let target = workers.values().find(|h| h.namespace == req.namespace && h.name == req.name);
                match target {
                    Some(h) => {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        let _ = h.tx.send(Msg::Stop(tx)).await;
                        let _ = req.reply.send(rx.await.ok());
                    }
                    None => { let _ = req.reply.send(None); }
                }
            }
            ev = events.recv() => match ev {
                Some(watcher::Event::Init) => listed.clear(),
                Some(watcher::Event::InitApply(p)) => {
                    listed.insert(p.metadata.uid.clone().unwrap_or_default());
                    changed = remember(&mut pods, &p);
                    dispatch(&ctx, &mut workers, &mut running, &mut checkpoints, p).await;
                }
                Some(watcher::Event::Apply(p)) => {
                    changed = remember(&mut pods, &p);
                    dispatch(&ctx, &mut workers, &mut running, &mut checkpoints, p).await
                }
                Some(watcher::Event::InitDone) => {
                    pods.retain(|uid, _| listed.contains(uid));
                    changed = true;
                    for (uid, h) in &workers {
                        if !listed.contains(uid) {
                            let _ = h.tx.send(Msg::Deleted).await;
                        }
                    }
                    clean_orphans(&ctx, &listed, &mut checkpoints);
                }
                Some(watcher::Event::Delete(p)) => {
                    if let Some(uid) = p.metadata.uid.as_ref() {
                        pods.remove(uid);
                    }
                    if let Some(h) = p.metadata.uid.as_ref().and_then(|u| workers.get(u)) {
                        let _ = h.tx.send(Msg::Deleted).await;
                    }
                }
                None => break,
            },
        }
        if changed || pods.len() != before {
            qos::update(&ctx.cgroups, allocatable, pods.values());
        }
    }
    let keep = ctx.cfg.keep_pods_on_exit;
    for h in workers.values() {
        let _ = h.tx.send(Msg::Shutdown { keep }).await;
    }
    let deadline = ctx.cfg.exit_grace() + Duration::from_secs(15);
    if tokio::time::timeout(deadline, async {
        while running.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        running.abort_all();
    }
}

/// Keeps the pod's latest copy; true when what the QoS levels count changed (a new pod,
/// its requests or its phase).
fn remember(pods: &mut HashMap<String, Pod>, p: &Pod) -> bool {
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    let changed = pods.get(&uid).is_none_or(|old| {
        phase(old) != phase(p)
            || old.spec.as_ref().map(|s| &s.containers) != p.spec.as_ref().map(|s| &s.containers)
    });
    pods.insert(uid, p.clone());
    changed
}

async fn dispatch(
    ctx: &Arc<Ctx>,
    workers: &mut HashMap<String, Handle>,
    running: &mut JoinSet<String>,
    checkpoints: &mut HashMap<String, checkpoint::PodCheckpoint>,
    pod: Pod,
) {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if let Some(h) = workers.get(&uid) {
        let _ = h.tx.send(Msg::Update(Box::new(pod))).await;
        return;
    }
    let (tx, rx) = mpsc::channel(16);
    let handle = Handle {
        tx,
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
    };
    let adopt = checkpoints.remove(&uid);
    let worker = Worker::new(ctx.clone(), pod);
    let id = uid.clone();
    running.spawn(async move {
        worker.run(rx, adopt).await;
        id
    });
    workers.insert(uid, handle);
}

/// Removes the QoS directories, kubepods and the configured parent, where empty.
fn remove_tree(cgroups: &Cgroups) {
    use crate::api::extension::qos::KubeQoS;
    let root = cgroups.kubepods();
    let mut dirs = vec![
        cgroups.qos_dir(KubeQoS::BestEffort),
        cgroups.qos_dir(KubeQoS::Burstable),
        root.clone(),
    ];
    let mut parent = root.parent();
    while let Some(p) = parent {
        parent = p.parent();
        dirs.push(p);
    }
    for d in dirs {
        if !cgroups.children(&d).is_empty() || cgroups.remove(&d).is_err() {
            return;
        }
    }
}

/// Pods this runtime checkpointed whose pod no longer exists: kill what is left and remove
/// their cgroups. Only checkpointed pods are ours: the kubepods tree may be shared with
/// another koord (or a kubelet) on the same host, whose pods are none of our business.
fn clean_orphans(
    ctx: &Ctx,
    live: &HashSet<String>,
    checkpoints: &mut HashMap<String, checkpoint::PodCheckpoint>,
) {
    checkpoints.retain(|uid, cp| {
        if live.contains(uid) {
            return true;
        }
        tracing::info!(pod = %cp.name, "cleaning up a pod that disappeared while koord was down");
        reap_cgroup(ctx, &crate::os::CgroupDir::new(cp.pod_dir.clone()));
        checkpoint::remove(&ctx.checkpoints(), uid);
        volumes::PodVolumes::new(ctx.volumes_of(uid)).remove();
        false
    });
}
