//! The live scheduler: watches feed one loop that owns the cluster state and the queue;
//! the loop schedules one pod at a time (only on the leader), assumes it, and binds in the
//! background. Bind results come back to the loop (forget + backoff on failure).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::binder::{self, BindError};
use super::config::SchedulerConfig;
use super::cycle;
use super::framework::runtime::{Framework, Scope};
use super::framework::{ClusterState, PodInfo};
use super::plugins::coscheduling::status as gang_status;
use super::plugins::elasticquota::status as quota_status;
use super::queue::Queue;
use super::status_writer::Publisher;
use crate::api::scheduling::reservation::Reservation;
use crate::kernel::Shutdown;
use crate::kernel::lease::Leadership;

pub use super::live_watch::{Ev, watch};

struct BindDone {
    pod: Arc<PodInfo>,
    node: String,
    result: Result<(), BindError>,
}

type Waiting = std::sync::Mutex<HashMap<String, tokio::sync::oneshot::Sender<bool>>>;

/// A pod waiting at Permit: how long, and where the verdict arrives.
type PermitWait = (std::time::Duration, tokio::sync::oneshot::Receiver<bool>);

/// What the scheduling cycle hands the binding cycle of a placed pod.
struct Placed {
    state: super::framework::CycleState,
    /// The pod as PreBind changed it (written in one patch before Bind).
    modified: Option<Box<Pod>>,
    permit: Option<PermitWait>,
}

/// Binding cycles in flight at most (pods waiting at Permit not counted: a gang larger
/// than this must still gather). Each holds its pod and an API connection; past this the
/// loop waits for one to finish before the next cycle, so a slow API server bounds the
/// scheduler's memory instead of growing it by one connection and pod per cycle.
pub const MAX_BINDING: usize = 64;

pub struct Scheduler {
    pub client: kube::Client,
    pub frameworks: Arc<Vec<Framework>>,
    /// Pods waiting at Permit, by key: send true to allow, false to reject.
    pub waiting: Arc<std::sync::Mutex<HashMap<String, tokio::sync::oneshot::Sender<bool>>>>,
    pub cluster: ClusterState,
    pub queue: Queue,
    pub leadership: Leadership,
    /// The watches whose first list has not ended yet.
    unsynced: Unsynced,
    pub quota_status: Publisher<quota_status::Figures>,
    pub pod_group_status: Publisher<gang_status::Figures>,
    /// Why gang members were released, for their PodScheduled condition.
    gang_rejections: HashMap<String, String>,
    next_start: usize,
    binds: JoinSet<BindDone>,
    /// Woken when an event may change a reservation's status (the controller's trigger).
    pub reservation_kick: Arc<tokio::sync::Notify>,
    /// ElasticQuota's over-use revoke controller (`monitorAllQuotas`).
    pub revoke: Option<revoke::Revoke>,
    /// The network-topology manager, when `scheduler.networkTopologyManager` is on.
    pub topology: Option<topology::Manager>,
    /// Where DeviceShare's GPU shared-resource templates are read from (a profile enables
    /// DeviceShare).
    pub gpu_templates_source: Option<crate::scheduler::plugins::deviceshare::args::TemplatesConfig>,
    /// CSIDrivers and CSIStorageCapacities are watched (VolumeBinding's capacity check);
    /// off with Koordinator's `DisableCSIStorageCapacityInformer`.
    pub capacity_informer: bool,
    /// Pods in flight, against `scheduler.schedulingTimeoutSeconds`.
    pub monitor: monitor::Monitor,
    /// Devices labelled with secondary devices not well planned, for their series.
    not_well_planned: std::collections::BTreeSet<String>,
    devices_changed: bool,
    /// When the reservation series are next recomputed.
    reservation_series_at: Option<Instant>,
    /// Reservations placed but not yet written Available: name → the object before, and
    /// the pods it pre-allocates as they were.
    assumed_reservations: HashMap<String, (Arc<Reservation>, Vec<Arc<super::framework::PodInfo>>)>,
    pub metrics: Arc<super::metrics::SchedulerMetrics>,
    /// ScheduleExplanations answered (the CRD watched and writable).
    pub explanations: Option<explain::Explanations>,
    /// The queue's unschedulable-set and the quotas' versions last published.
    unschedulable_published: u64,
    quotas_published: Option<u64>,
    /// Pods were scheduled since freed memory was last given back.
    worked: bool,
    trimmed_at: Option<Instant>,
}

use super::live_sync::Unsynced;

const SECONDARY_DEVICE_WELL_PLANNED: &str = "node.koordinator.sh/secondary-device-well-planned";

/// Freed memory goes back to the system at most this often (after a burst ends).
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

fn key_of(meta: &kube::api::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

impl Scheduler {
    pub fn new(
        client: kube::Client,
        cfg: &SchedulerConfig,
        leadership: Leadership,
    ) -> Result<Scheduler, crate::api::field::FieldError> {
        let frameworks = cfg
            .profiles
            .iter()
            .map(super::config::framework)
            .collect::<Result<Vec<_>, _>>()?;
        let mut s = Scheduler::with_frameworks(client, frameworks, cfg.backoff, leadership);
        s.gpu_templates_source = super::gpu_templates_of(&cfg.profiles);
        Ok(s)
    }

    /// A scheduler over frameworks built elsewhere (tests with their own plugins).
    pub fn with_frameworks(
        client: kube::Client,
        frameworks: Vec<Framework>,
        backoff: super::config::Backoff,
        leadership: Leadership,
    ) -> Scheduler {
        let mut cluster = ClusterState::default();
        for fw in &frameworks {
            fw.setup(&mut cluster);
        }
        let quotas = cluster.quotas.enabled();
        Scheduler {
            client,
            frameworks: Arc::new(frameworks),
            waiting: Default::default(),
            cluster,
            queue: Queue::new(backoff),
            leadership,
            unsynced: Unsynced::new(quotas),
            quota_status: Publisher::detached(quota_status::figures, quota_status::version),
            pod_group_status: Publisher::detached(gang_status::figures, gang_status::version),
            gang_rejections: HashMap::new(),
            next_start: 0,
            binds: JoinSet::new(),
            unschedulable_published: 0,
            quotas_published: None,
            worked: false,
            trimmed_at: None,
            assumed_reservations: HashMap::new(),
            reservation_kick: Default::default(),
            revoke: None,
            topology: None,
            gpu_templates_source: None,
            capacity_informer: true,
            monitor: Default::default(),
            not_well_planned: Default::default(),
            devices_changed: false,
            reservation_series_at: None,
            metrics: Default::default(),
            explanations: None,
        }
    }

    /// Whether a profile enables ElasticQuota (then its watch must sync first).
    pub fn uses_quotas(&self) -> bool {
        self.cluster.quotas.enabled()
    }

    /// Whether a profile enables Coscheduling (then PodGroups are watched).
    pub fn uses_gangs(&self) -> bool {
        self.cluster.gangs.enabled()
    }

    pub fn synced(&self) -> bool {
        // With the network-topology manager, gangs are not placed before the tree is.
        let tree = self.topology.as_ref().is_none_or(|m| m.synced);
        tree && self.unsynced.none()
    }

    /// Once a burst is over (nothing to schedule, every binding done), gives the memory it
    /// freed back to the system, at most every `TRIM_EVERY`: without it the scheduler keeps
    /// its high-water mark resident.
    fn trim_after_burst(&mut self) {
        let recently = self.trimmed_at.is_some_and(|t| t.elapsed() < TRIM_EVERY);
        if !self.worked || !self.binds.is_empty() || recently {
            return;
        }
        crate::os::tuning::trim_heap();
        self.worked = false;
        self.trimmed_at = Some(Instant::now());
    }

    /// Fewer than `MAX_BINDING` binding cycles run past Permit.
    pub fn binding_room(&self) -> bool {
        self.binds.len().saturating_sub(self.waiting_count()) < MAX_BINDING
    }

    fn framework_for(&self, pod: &Pod) -> Option<usize> {
        let name = super::model::transform::scheduler_name(pod);
        self.frameworks
            .iter()
            .position(|f| f.scheduler_name == name)
    }

    /// A Reservation from the watch: into the cache (unless this scheduler just placed it
    /// and the watch has not caught up), and into the queue while it is pending.
    fn apply_reservation(&mut self, r: Arc<Reservation>) {
        let name = r.metadata.name.clone().unwrap_or_default();
        let key = crate::scheduler::framework::reservations::reserve_key(&name);
        let pending = super::reservation_live::pending_pod(&r);
        if self.assumed_reservations.contains_key(&name) {
            if pending.is_some() {
                return;
            }
            self.assumed_reservations.remove(&name);
        }
        self.cluster.upsert_reservation(r);
        match pending.filter(|p| self.framework_for(&p.pod).is_some()) {
            Some(p) => self.queue.add(Arc::new(p)),
            None => self.queue.remove(&key),
        }
    }

    /// Whether the Device says its secondary devices are not well planned (Koordinator's
    /// `node.koordinator.sh/secondary-device-well-planned: "false"`).
    fn note_device(&mut self, d: &crate::api::scheduling::device::Device, deleted: bool) {
        let name = d.metadata.name.clone().unwrap_or_default();
        let labels = d.metadata.labels.as_ref();
        let label = labels.and_then(|l| l.get(SECONDARY_DEVICE_WELL_PLANNED));
        let changed = match !deleted && label.is_some_and(|v| v == "false") {
            true => self.not_well_planned.insert(name),
            false => self.not_well_planned.remove(&name),
        };
        self.devices_changed |= changed;
    }

    /// One scheduling cycle for the next active pod; false when none is active.
    pub fn schedule_one(&mut self) -> bool {
        let Some(pod) = self.queue.pop() else {
            return false;
        };
        let Some(fi) = self.framework_for(&pod.pod) else {
            return true;
        };
        self.cluster.now_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
        let started = Instant::now();
        let profile = &self.frameworks[fi].scheduler_name;
        self.monitor.start(&pod.key, profile, started);
        let frameworks = self.frameworks.clone();
        let scope = Scope::Live {
            start: self.next_start,
        };
        let mut attempt = cycle::run(&frameworks[fi], &pod, &mut self.cluster, scope);
        if let Some(r) = &attempt.result {
            let total = self.cluster.nodes.len().max(1);
            self.next_start = (self.next_start + r.processed) % total;
        }
        let batch = std::mem::take(&mut attempt.batch);
        self.act(fi, pod, attempt, started);
        if !batch.is_empty() {
            self.act_batch(fi, batch, started);
        }
        true
    }

    fn bind_done(&mut self, done: BindDone) {
        // A binding cycle (not a status write) ended: the pod's scheduling is over.
        if !done.node.is_empty() {
            self.monitor_complete(&done.pod.key);
        }
        if let (Err(e), Some(name)) = (&done.result, &done.pod.reserve_of) {
            tracing::warn!(reservation = %name, error = %e, "reservation not bound; back to pending");
            if let Some((before, pre_allocated)) = self.assumed_reservations.remove(name) {
                self.cluster.upsert_reservation(before);
                // The pods it was to take over are theirs again.
                for p in pre_allocated {
                    self.cluster.replace_placed(p);
                }
            }
            if !e.is_gone() {
                self.queue.requeue_backoff(done.pod, Instant::now());
            }
            return;
        }
        let Err(e) = done.result else { return };
        tracing::warn!(pod = %done.pod.key, node = %done.node, error = %e, "binding failed; forgetting the pod");
        self.cluster.forget(&done.pod.key);
        let rejected = cycle::gang_failed(&mut self.cluster, &done.pod.key, &e.to_string());
        self.reject_waiting(rejected);
        if let Some(msg) = self.gang_rejections.remove(&done.pod.key) {
            let (client, pod) = (self.client.clone(), done.pod.clone());
            self.binds.spawn(async move {
                binder::unschedulable(&client, &pod, &msg).await;
                BindDone {
                    pod,
                    node: String::new(),
                    result: Ok(()),
                }
            });
        }
        if let Some(fi) = self.framework_for(&done.pod.pod) {
            let mut state = Default::default();
            self.frameworks[fi].unreserve(&mut state, &done.pod, &done.node);
        }
        // Retried after the backoff; a pod someone else bound meanwhile leaves the queue
        // when the watch shows it bound.
        if !e.is_gone() {
            self.queue.requeue_backoff(done.pod, Instant::now());
        }
    }

    /// Waits for every in-flight binding and applies its outcome.
    pub async fn settle(&mut self) {
        while let Some(done) = self.binds.join_next().await {
            if let Ok(d) = done {
                self.bind_done(d);
            }
        }
    }

    /// Runs until `shutdown` drains; in-flight bindings finish first. `wakeups` counts
    /// the loop's iterations: at rest it must stand (nearly) still.
    pub async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Ev>,
        shutdown: Shutdown,
        wakeups: prometheus_client::metrics::counter::Counter,
        ready: impl Fn(),
    ) {
        let mut announced = false;
        // One receiver for the whole run: a fresh clone per iteration inherits the
        // original's stale "seen" version and reports the same change forever.
        let mut leadership = self.leadership.clone();
        loop {
            wakeups.inc();
            while let Ok(ev) = rx.try_recv() {
                self.apply(ev);
            }
            while let Some(done) = self.binds.try_join_next() {
                if let Ok(d) = done {
                    self.bind_done(d);
                }
            }
            if self.synced() && !announced {
                announced = true;
                // The initial lists were decoded and dropped: a burst to give back.
                self.worked = true;
                ready();
            }
            self.queue.flush(Instant::now());
            // Before scheduling: a tree due (the topology just listed or changed) is built.
            let topology_wake = self.topology_tick(Instant::now());
            let can_schedule = self.synced() && self.leadership.is_leader();
            if can_schedule && self.binding_room() && self.schedule_one() {
                self.worked = true;
                tokio::task::yield_now().await;
                continue;
            }
            self.trim_after_burst();
            self.publish();
            let now = Instant::now();
            let wake = [
                self.revoke_tick(now),
                self.queue.next_wakeup(),
                topology_wake,
                self.monitor_tick(now),
                self.publish_koord(now),
                self.explain_tick(now),
                self.quota_status.tick(&self.cluster, now),
                self.pod_group_status.tick(&self.cluster, now),
            ]
            .into_iter()
            .flatten()
            .min()
            .map(tokio::time::Instant::from_std);
            tokio::select! {
                _ = shutdown.draining() => break,
                ev = rx.recv() => match ev {
                    Some(ev) => self.apply(ev),
                    None => break,
                },
                Some(done) = self.binds.join_next(), if !self.binds.is_empty() => {
                    if let Ok(d) = done {
                        self.bind_done(d);
                    }
                }
                _ = async { match wake { Some(w) => tokio::time::sleep_until(w).await, None => std::future::pending().await } } => {}
                _ = leadership.changed() => {}
            }
        }
        // Pods waiting at Permit would hold the drain for their whole timeout.
        for key in self.waiting_pods() {
            self.resolve_waiting(&key, false);
        }
        while self.binds.join_next().await.is_some() {}
    }
}

#[path = "live_act.rs"]
mod act;
#[path = "live_apply.rs"]
mod apply;
#[path = "live_bind.rs"]
mod bind;
#[path = "live_explain.rs"]
pub mod explain;
#[path = "live_gang.rs"]
mod gang;
#[path = "live_events.rs"]
mod hints;
#[path = "live_monitor.rs"]
pub mod monitor;
#[path = "live_metrics.rs"]
mod observe;
#[path = "live_pods.rs"]
mod pods;
#[path = "live_revoke.rs"]
pub mod revoke;
#[path = "live_topology.rs"]
pub mod topology;

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
