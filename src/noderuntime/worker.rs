//! One task per pod: sets up its cgroup, runs init containers in order then the
//! containers, restarts them under the restart policy with the kubelet's backoff, reports
//! status, and on deletion terminates (SIGTERM, grace, SIGKILL), cleans up and finalizes.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::Ctx;
use super::checkpoint::{self, ContainerCheckpoint, PodCheckpoint};
use super::container::{LaunchSpec, RUNTIME_SCHEME, apply_values, launch};
use super::resources::pod_values;
use super::status::{ContainerView, PodFacts, State, pod_status};
use crate::api::extension::qos::{KubeQoS, kube_qos};
use crate::apiserver::semantics::now;
use crate::koordlet::os::CgroupDir;
use crate::koordlet::os::process::{SIGKILL, SIGTERM, alive, signal};

pub enum Msg {
    Update(Box<Pod>),
    Deleted,
    Stop(oneshot::Sender<usize>),
    Shutdown { keep: bool },
}

/// A container that ran longer than this resets its restart backoff (kubelet behaviour).
const BACKOFF_RESET: Duration = Duration::from_secs(600);

struct Run {
    id: String,
    dir: CgroupDir,
    pid: i32,
    start_time: Option<u64>,
    started_at: String,
    started: Instant,
    oom_before: u64,
    attempt: u64,
}

struct Slot {
    spec: Container,
    init: bool,
    restart_count: u32,
    attempts: u32,
    state: State,
    last: Option<State>,
    run: Option<Run>,
    next_start: Option<Instant>,
    backoff: Duration,
    last_id: Option<String>,
}

struct Exit {
    slot: usize,
    attempt: u64,
    /// Exit code, 128+signal when killed, `None` when unknown (an adopted process).
    code: Option<i32>,
}

pub struct Worker {
    ctx: Arc<Ctx>,
    pod: Pod,
    uid: String,
    ns: String,
    name: String,
    pod_dir: CgroupDir,
    slots: Vec<Slot>,
    init_failed: bool,
    sandbox_ready: bool,
    deleting: bool,
    start_time: String,
    exits_tx: mpsc::UnboundedSender<Exit>,
    exits_rx: mpsc::UnboundedReceiver<Exit>,
    waiters: JoinSet<()>,
    attempt_seq: u64,
    last_sent: Option<Value>,
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(255)
}

impl Worker {
    pub fn new(ctx: Arc<Ctx>, pod: Pod) -> Worker {
        let qos = kube_qos(&pod);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let initial = ctx.cfg.restart_backoff();
        let slot = |c: &Container, init| Slot {
            spec: c.clone(),
            init,
            restart_count: 0,
            attempts: 0,
            state: State::waiting(
                if init {
                    "PodInitializing"
                } else {
                    "ContainerCreating"
                },
                "",
            ),
            last: None,
            run: None,
            next_start: Some(Instant::now()),
            backoff: initial,
            last_id: None,
        };
        let mut slots: Vec<Slot> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| slot(c, true))
            .collect();
        slots.extend(spec.containers.iter().map(|c| slot(c, false)));
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        Worker {
            pod_dir: ctx.cgroups.pod_dir(qos, &uid),
            ns: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid,
            ctx,
            pod,
            slots,
            init_failed: false,
            sandbox_ready: false,
            deleting: false,
            start_time: now(),
            exits_tx,
            exits_rx,
            waiters: JoinSet::new(),
            attempt_seq: 0,
            last_sent: None,
        }
    }

    fn restart_policy(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            .unwrap_or("Always")
    }

    fn phase_reported(&self) -> Option<String> {
        self.pod.status.as_ref().and_then(|s| s.phase.clone())
    }

    pub async fn run(mut self, mut rx: mpsc::Receiver<Msg>, adopt: Option<PodCheckpoint>) {
        let terminal = matches!(
            self.phase_reported().as_deref(),
            Some("Succeeded" | "Failed")
        );
        match adopt {
            Some(cp) => self.adopt(cp),
            None if terminal => {
                // Finished before koord restarted: nothing runs again.
                for s in &mut self.slots {
                    s.next_start = None;
                }
                self.last_sent = self
                    .pod
                    .status
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s).ok());
            }
            None => self.setup_sandbox(),
        }
        loop {
            if self.pod.metadata.deletion_timestamp.is_some() {
                let grace = self
                    .pod
                    .metadata
                    .deletion_grace_period_seconds
                    .unwrap_or(0)
                    .max(0) as u64;
                self.terminate(Duration::from_secs(grace)).await;
                self.cleanup();
                self.finalize().await;
                return;
            }
            self.start_due();
            self.publish().await;
            let next = self
                .slots
                .iter()
                .filter(|s| s.run.is_none())
                .filter_map(|s| s.next_start)
                .min();
            let wake = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Update(p)) => self.pod = *p,
                    Some(Msg::Stop(reply)) => {
                        let _ = reply.send(self.signal_all(SIGKILL));
                    }
                    Some(Msg::Deleted) => {
                        self.terminate(Duration::ZERO).await;
                        self.cleanup();
                        return;
                    }
                    Some(Msg::Shutdown { keep }) => return self.shutdown(keep).await,
                    None => return self.shutdown(false).await,
                },
                Some(exit) = self.exits_rx.recv() => self.on_exit(exit),
                _ = tokio::time::sleep_until(wake), if next.is_some() => {}
            }
        }
    }

    fn setup_sandbox(&mut self) {
        let qos = kube_qos(&self.pod);
        let result = self.ctx.cgroups.create(&self.pod_dir).and_then(|_| {
            apply_values(
                &self.ctx.cgroups,
                &self.pod_dir,
                &pod_values(&self.pod, qos),
            )
        });
        match result {
            Ok(()) => self.sandbox_ready = true,
            Err(e) => {
                tracing::error!(pod = %self.name, error = %e, "creating the pod cgroup failed");
                for s in &mut self.slots {
                    s.state = State::waiting("CreatePodSandboxError", e.to_string());
                    s.next_start = None;
                }
            }
        }
    }

    fn init_done(&self) -> bool {
        self.slots
            .iter()
            .filter(|s| s.init)
            .all(|s| s.state.exit_code() == Some(0))
    }

    fn start_due(&mut self) {
        if !self.sandbox_ready || self.deleting || self.init_failed {
            return;
        }
        let now_i = Instant::now();
        let due = |s: &Slot| s.run.is_none() && s.next_start.is_some_and(|t| t <= now_i);
        if !self.init_done() {
            if let Some(i) = self
                .slots
                .iter()
                .position(|s| s.init && s.state.exit_code() != Some(0))
                && due(&self.slots[i])
            {
                self.start(i);
            }
            return;
        }
        for i in 0..self.slots.len() {
            if !self.slots[i].init && due(&self.slots[i]) {
                self.start(i);
            }
        }
    }

    fn log_path(&self, slot: &Slot) -> std::path::PathBuf {
        self.ctx
            .dir
            .join("logs")
            .join(format!("{}_{}_{}", self.ns, self.name, self.uid))
            .join(&slot.spec.name)
            .join(format!("{}.log", slot.attempts))
    }

    fn start(&mut self, i: usize) {
        let log = self.log_path(&self.slots[i]);
        let spec = LaunchSpec {
            cgroups: &self.ctx.cgroups,
            proc_root: &self.ctx.proc_root,
            pod: &self.pod,
            pod_dir: &self.pod_dir,
            container: &self.slots[i].spec,
            log: &log,
            node: &self.ctx.node,
            ip: &self.ctx.ip,
        };
        let result = launch(&spec);
        self.attempt_seq += 1;
        let attempt = self.attempt_seq;
        let slot = &mut self.slots[i];
        if slot.attempts > 0 {
            slot.restart_count += 1;
        }
        slot.attempts += 1;
        match result {
            Ok(l) => {
                let started_at = now();
                slot.state = State::Running {
                    started_at: started_at.clone(),
                };
                slot.next_start = None;
                slot.last_id = Some(l.id.clone());
                slot.run = Some(Run {
                    id: l.id,
                    dir: l.dir,
                    pid: l.pid,
                    start_time: l.start_time,
                    started_at,
                    started: Instant::now(),
                    oom_before: l.oom_before,
                    attempt,
                });
                let tx = self.exits_tx.clone();
                let mut child = l.child;
                self.waiters.spawn(async move {
                    let code = child.wait().await.ok().map(exit_code);
                    let _ = tx.send(Exit {
                        slot: i,
                        attempt,
                        code: code.or(Some(255)),
                    });
                });
                tracing::info!(pod = %self.name, container = %slot.spec.name, pid = l.pid, "container started");
            }
            Err(e) => {
                tracing::warn!(pod = %self.name, container = %slot.spec.name, error = %e, "container failed to start");
                slot.state = State::waiting(e.reason(), e.to_string());
                let delay = slot.backoff;
                slot.backoff = (slot.backoff * 2).min(self.ctx.cfg.max_restart_backoff());
                slot.next_start = Some(Instant::now() + delay);
            }
        }
        self.save_checkpoint();
    }

    fn on_exit(&mut self, exit: Exit) {
        let policy = self.restart_policy().to_string();
        let deleting = self.deleting;
        let initial = self.ctx.cfg.restart_backoff();
        let max = self.ctx.cfg.max_restart_backoff();
        let Some(slot) = self.slots.get_mut(exit.slot) else {
            return;
        };
        if slot.run.as_ref().is_none_or(|r| r.attempt != exit.attempt) {
            return;
        }
        let Some(run) = slot.run.take() else { return };
        let oom = self.ctx.cgroups.oom_kills(&run.dir) > run.oom_before;
        reap_cgroup(&self.ctx, &run.dir);
        let (code, reason) = match exit.code {
            _ if oom => (exit.code.unwrap_or(137), "OOMKilled"),
            Some(0) => (0, "Completed"),
            Some(c) => (c, "Error"),
            None => (137, "ContainerStatusUnknown"),
        };
        let terminated = State::Terminated {
            exit_code: code,
            reason: reason.into(),
            message: String::new(),
            started_at: run.started_at.clone(),
            finished_at: now(),
            container_id: format!("{RUNTIME_SCHEME}://{}", run.id),
        };
        tracing::info!(pod = %self.name, container = %slot.spec.name, exit_code = code, reason, "container exited");
        let restart = !deleting
            && if slot.init {
                code != 0 && policy != "Never"
            } else {
                policy == "Always" || (policy == "OnFailure" && code != 0)
            };
        if slot.init && code != 0 && !restart {
            self.init_failed = true;
        }
        if restart {
            if run.started.elapsed() >= BACKOFF_RESET {
                slot.backoff = initial;
            }
            let delay = slot.backoff;
            slot.backoff = (slot.backoff * 2).min(max);
            slot.next_start = Some(Instant::now() + delay);
            slot.last = Some(terminated);
            slot.state = State::waiting(
                "CrashLoopBackOff",
                format!(
                    "back-off {}s restarting failed container={} pod={}_{}({})",
                    delay.as_secs(),
                    slot.spec.name,
                    self.name,
                    self.ns,
                    self.uid
                ),
            );
        } else {
            slot.state = terminated;
            slot.next_start = None;
        }
        self.save_checkpoint();
    }

    /// Signals every process of every running container; returns how many containers.
    fn signal_all(&self, sig: i32) -> usize {
        let mut n = 0;
        for run in self.slots.iter().filter_map(|s| s.run.as_ref()) {
            n += 1;
            let pids = self.ctx.cgroups.procs(&run.dir).unwrap_or_default();
            for pid in if pids.is_empty() { vec![run.pid] } else { pids } {
                let _ = signal(pid, sig);
            }
        }
        n
    }

    async fn wait_exits(&mut self, until: Instant) {
        while self.slots.iter().any(|s| s.run.is_some()) {
            match tokio::time::timeout_at(until, self.exits_rx.recv()).await {
                Ok(Some(exit)) => self.on_exit(exit),
                _ => return,
            }
        }
    }

    /// SIGTERM, up to `grace` for the containers to exit, then SIGKILL.
    async fn terminate(&mut self, grace: Duration) {
        self.deleting = true;
        for s in &mut self.slots {
            s.next_start = None;
        }
        if self.slots.iter().any(|s| s.run.is_some()) {
            self.signal_all(if grace.is_zero() { SIGKILL } else { SIGTERM });
            self.wait_exits(Instant::now() + grace).await;
            if self.slots.iter().any(|s| s.run.is_some()) {
                self.signal_all(SIGKILL);
                self.wait_exits(Instant::now() + Duration::from_secs(10))
                    .await;
            }
        }
        self.waiters.abort_all();
    }

    /// Removes the pod's cgroups (killing anything left in them) and its checkpoint.
    fn cleanup(&mut self) {
        for s in &self.slots {
            if let Some(r) = &s.run {
                reap_cgroup(&self.ctx, &r.dir);
            }
        }
        for child in self.ctx.cgroups.children(&self.pod_dir) {
            reap_cgroup(&self.ctx, &self.pod_dir.join(&child));
        }
        reap_cgroup(&self.ctx, &self.pod_dir);
        checkpoint::remove(&self.ctx.checkpoints(), &self.uid);
        self.ctx.view_remove(&self.uid);
    }

    /// Removes the pod object now that its processes are gone.
    async fn finalize(&self) {
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&self.name, &dp).await {
            Ok(_) => tracing::info!(pod = %self.name, "pod terminated and removed"),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => {
                tracing::warn!(pod = %self.name, error = %e, "removing the terminated pod failed")
            }
        }
    }

    async fn shutdown(mut self, keep: bool) {
        if keep {
            self.save_checkpoint();
            self.waiters.abort_all();
            return;
        }
        self.terminate(self.ctx.cfg.exit_grace()).await;
        self.cleanup();
    }

    fn views(&self, init: bool) -> Vec<ContainerView> {
        self.slots
            .iter()
            .filter(|s| s.init == init)
            .map(|s| ContainerView {
                name: s.spec.name.clone(),
                image: s.spec.image.clone().unwrap_or_default(),
                container_id: s
                    .last_id
                    .as_ref()
                    .map(|id| format!("{RUNTIME_SCHEME}://{id}")),
                restart_count: s.restart_count,
                state: s.state.clone(),
                last_state: s.last.clone(),
                will_restart: s.next_start.is_some() || s.run.is_some(),
            })
            .collect()
    }

    async fn publish(&mut self) {
        if self.deleting {
            return;
        }
        let qos = kube_qos(&self.pod).name();
        let status = match (
            &self.last_sent,
            self.slots
                .iter()
                .all(|s| s.next_start.is_none() && s.run.is_none() && s.attempts == 0),
        ) {
            // A pod adopted as finished keeps the status it had.
            (Some(prev), true) if !self.sandbox_ready => prev.clone(),
            _ => {
                let (init, main, now) = (self.views(true), self.views(false), now());
                pod_status(&PodFacts {
                    init: &init,
                    main: &main,
                    init_failed: self.init_failed,
                    sandbox_ready: self.sandbox_ready,
                    start_time: &self.start_time,
                    ip: &self.ctx.ip,
                    qos_class: qos,
                    now: &now,
                })
            }
        };
        let comparable = |v: &Value| {
            let mut c = v.clone();
            for cond in c["conditions"].as_array_mut().into_iter().flatten() {
                cond["lastTransitionTime"] = Value::Null;
            }
            c
        };
        if self.last_sent.as_ref().map(comparable) == Some(comparable(&status)) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        match api
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
        {
            Ok(p) => {
                self.ctx.view_put(&self.uid, &p);
                self.last_sent = Some(status);
            }
            Err(e) => tracing::warn!(pod = %self.name, error = %e, "status update failed"),
        }
    }

    fn save_checkpoint(&self) {
        let cp = PodCheckpoint {
            uid: self.uid.clone(),
            namespace: self.ns.clone(),
            name: self.name.clone(),
            pod_dir: self.pod_dir.as_str().to_string(),
            init_done: self.init_done(),
            containers: self
                .slots
                .iter()
                .filter_map(|s| {
                    let r = s.run.as_ref()?;
                    Some(ContainerCheckpoint {
                        name: s.spec.name.clone(),
                        init: s.init,
                        id: r.id.clone(),
                        dir: r.dir.as_str().to_string(),
                        pid: r.pid,
                        start_time: r.start_time,
                        restart_count: s.restart_count,
                        started_at: r.started_at.clone(),
                    })
                })
                .collect(),
        };
        if let Err(e) = checkpoint::save(&self.ctx.checkpoints(), &cp) {
            tracing::warn!(pod = %self.name, error = %e, "writing the pod checkpoint failed");
        }
    }

    /// Takes over the processes a previous koord started for this pod.
    fn adopt(&mut self, cp: PodCheckpoint) {
        self.sandbox_ready = self.ctx.cgroups.exists(&self.pod_dir);
        if !self.sandbox_ready {
            self.setup_sandbox();
        }
        let mut keep_dirs = Vec::new();
        for c in &cp.containers {
            let Some(i) = self
                .slots
                .iter()
                .position(|s| s.spec.name == c.name && s.init == c.init)
            else {
                continue;
            };
            self.attempt_seq += 1;
            let attempt = self.attempt_seq;
            let slot = &mut self.slots[i];
            slot.restart_count = c.restart_count;
            slot.attempts = c.restart_count + 1;
            slot.last_id = Some(c.id.clone());
            slot.next_start = None;
            let dir = CgroupDir::new(c.dir.clone());
            if alive(&self.ctx.proc_root, c.pid, c.start_time) {
                keep_dirs.push(dir.clone());
                slot.state = State::Running {
                    started_at: c.started_at.clone(),
                };
                slot.run = Some(Run {
                    id: c.id.clone(),
                    dir,
                    pid: c.pid,
                    start_time: c.start_time,
                    started_at: c.started_at.clone(),
                    started: Instant::now(),
                    oom_before: self.ctx.cgroups.oom_kills(&CgroupDir::new(c.dir.clone())),
                    attempt,
                });
                let (tx, proc_root, pid, st) = (
                    self.exits_tx.clone(),
                    self.ctx.proc_root.clone(),
                    c.pid,
                    c.start_time,
                );
                self.waiters.spawn(async move {
                    while alive(&proc_root, pid, st) {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    let _ = tx.send(Exit {
                        slot: i,
                        attempt,
                        code: None,
                    });
                });
                tracing::info!(pod = %self.name, container = %c.name, pid = c.pid, "re-adopted running container");
            } else {
                slot.state = State::waiting("ContainerCreating", "");
                slot.next_start = Some(Instant::now());
            }
        }
        if cp.init_done {
            for s in self.slots.iter_mut().filter(|s| s.init) {
                s.state = State::Terminated {
                    exit_code: 0,
                    reason: "Completed".into(),
                    message: String::new(),
                    started_at: String::new(),
                    finished_at: String::new(),
                    container_id: String::new(),
                };
                s.next_start = None;
            }
        }
        for child in self.ctx.cgroups.children(&self.pod_dir) {
            let dir = self.pod_dir.join(&child);
            if !keep_dirs.contains(&dir) {
                reap_cgroup(&self.ctx, &dir);
            }
        }
    }
}

/// Kills whatever is left in a cgroup and removes it (children first).
pub fn reap_cgroup(ctx: &Ctx, dir: &CgroupDir) {
    for child in ctx.cgroups.children(dir) {
        reap_cgroup(ctx, &dir.join(&child));
    }
    for _ in 0..50 {
        let pids = ctx.cgroups.procs(dir).unwrap_or_default();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            let _ = signal(pid, SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Err(e) = ctx.cgroups.remove(dir) {
        tracing::warn!(dir = %dir.as_str(), error = %e, "removing a cgroup failed");
    }
}

/// The QoS directory a pod of this class lives in (for orphan scans).
pub fn qos_dirs(ctx: &Ctx) -> Vec<CgroupDir> {
    [KubeQoS::Guaranteed, KubeQoS::Burstable, KubeQoS::BestEffort]
        .into_iter()
        .map(|q| ctx.cgroups.qos_dir(q))
        .collect()
}
