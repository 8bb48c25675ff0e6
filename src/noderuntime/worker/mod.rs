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
use super::container::{LaunchError, LaunchSpec, RUNTIME_SCHEME, apply_values, launch};
use super::logstamp::{STAMP_EVERY, Stamper};
use super::resources::pod_values;
use super::status::{ContainerView, PodFacts, State, pod_status};
use super::volumes::PodVolumes;
use crate::api::extension::qos::kube_qos;
use crate::api::time::now;
use crate::os::CgroupDir;
use crate::os::process::{SIGKILL, SIGTERM, alive, signal};

mod cgroups;
mod report;

pub use cgroups::reap_cgroup;

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
    stamper: Stamper,
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
    volumes: PodVolumes,
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
        let volumes = PodVolumes::new(ctx.volumes_of(&uid));
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
            volumes,
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
            Some(cp) => {
                self.adopt(cp);
                // Its tokens are new ones: the old ones' refresh times died with koord.
                self.sync_volumes().await;
            }
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
        let mut stamp_tick = tokio::time::interval(STAMP_EVERY);
        stamp_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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
            self.start_due().await;
            self.publish().await;
            let next = self
                .slots
                .iter()
                .filter(|s| s.run.is_none())
                .filter_map(|s| s.next_start)
                .min();
            let wake = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            let running = self.slots.iter().any(|s| s.run.is_some());
            let resync = self.volumes.next_sync(&self.pod).map(Instant::from_std);
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
                _ = stamp_tick.tick(), if running => self.stamp_logs(),
                _ = tokio::time::sleep_until(resync.unwrap_or(wake)), if resync.is_some() => {
                    self.sync_volumes().await
                }
            }
        }
    }

    fn setup_sandbox(&mut self) {
        let qos = kube_qos(&self.pod);
        // The checkpoint comes first: it is what makes the cgroup this runtime's own, so a
        // crash right after the mkdir still leaves a record to clean up from, and a second
        // koord on the host never mistakes this pod for one of its orphans.
        self.save_checkpoint();
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

    async fn start_due(&mut self) {
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
                self.start(i).await;
            }
            return;
        }
        for i in 0..self.slots.len() {
            if !self.slots[i].init && due(&self.slots[i]) {
                self.start(i).await;
            }
        }
    }

    fn stamp_logs(&mut self) {
        for run in self.slots.iter_mut().filter_map(|s| s.run.as_mut()) {
            run.stamper.tick();
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

    /// The runtime hooks' answer for container `i` (nothing when no hook server is
    /// registered; an error only under `failure-policy: Fail`).
    async fn hook(&self, i: usize) -> Result<super::hooks::Hooked, LaunchError> {
        let c = &self.slots[i].spec;
        let values = super::resources::container_values(c);
        let api = self.ctx.cfg.api_server;
        let env = super::container::env_of(c, &self.pod, &self.ctx.node, &self.ctx.ip, api);
        super::hooks::pre_create(
            &self.ctx.hooks,
            &self.pod,
            c,
            &values,
            &env,
            self.pod_dir.as_str(),
        )
        .await
        .map_err(|e| LaunchError::Hook(e.0))
    }

    /// Brings the projected volumes up to date (tokens near their end requested anew).
    async fn sync_volumes(&mut self) {
        if let Err(e) = self.volumes.sync(&self.ctx.client, &self.pod).await {
            tracing::warn!(pod = %self.name, error = %e, "projected volumes not brought up to date");
        }
    }

    /// What container `i` starts with: its volumes filled (once per pod), its mounts and
    /// the runtime hooks' answer.
    async fn prepare(
        &mut self,
        i: usize,
    ) -> Result<(super::hooks::Hooked, Vec<crate::os::mount::BindMount>), LaunchError> {
        if !self.volumes.synced() {
            let synced = self.volumes.sync(&self.ctx.client, &self.pod).await;
            synced.map_err(LaunchError::Volume)?;
        }
        let mounts = self.volumes.mounts(&self.pod, &self.slots[i].spec);
        let mounts = mounts.map_err(LaunchError::Volume)?;
        Ok((self.hook(i).await?, mounts))
    }

    async fn start(&mut self, i: usize) {
        let log = self.log_path(&self.slots[i]);
        let result = match self.prepare(i).await {
            Ok((hooked, mounts)) => launch(&LaunchSpec {
                cgroups: &self.ctx.cgroups,
                proc_root: &self.ctx.proc_root,
                pod: &self.pod,
                pod_dir: &self.pod_dir,
                container: &self.slots[i].spec,
                log: &log,
                node: &self.ctx.node,
                ip: &self.ctx.ip,
                api: self.ctx.cfg.api_server,
                mounts,
                hooked: &hooked,
                shim: self
                    .ctx
                    .cfg
                    .shim
                    .as_deref()
                    .map(|b| (b, self.ctx.dir.as_path())),
            }),
            Err(e) => Err(e),
        };
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
                    stamper: Stamper::new(log),
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
        let Some(mut run) = slot.run.take() else {
            return;
        };
        run.stamper.tick();
        let oom = self.ctx.cgroups.oom_kills(&run.dir) > run.oom_before;
        reap_cgroup(&self.ctx, &run.dir);
        let _ = std::fs::remove_file(super::shim::exit_file(&self.ctx.dir, &run.id));
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
                let _ = std::fs::remove_file(super::shim::exit_file(&self.ctx.dir, &r.id));
            }
        }
        for child in self.ctx.cgroups.children(&self.pod_dir) {
            reap_cgroup(&self.ctx, &self.pod_dir.join(&child));
        }
        reap_cgroup(&self.ctx, &self.pod_dir);
        checkpoint::remove(&self.ctx.checkpoints(), &self.uid);
        self.volumes.remove();
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
}
