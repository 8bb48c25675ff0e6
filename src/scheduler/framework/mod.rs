//! The scheduling framework: extension points, the plugin trait, per-cycle state, the
//! cluster state a cycle reads, and the runtime that runs one profile's plugins.
//! Plugins are pure over (pod, node, cluster state): the live scheduler and
//! `koord explain schedule` run the same code.

pub mod cluster;
pub mod events;
pub mod fit_error;
pub mod gangs;
pub mod memo;
pub mod metric;
pub mod nominated;
pub mod offer;
pub mod quotas;
pub mod res;
pub mod reservations;
pub mod runtime;
mod scratch;
mod select;
mod verdicts;
pub use select::set_parallelism;
pub mod types;

use std::any::Any;
use std::collections::HashSet;

pub use cluster::ClusterState;
pub use types::{NodeInfo, PodDraft, PodInfo};

/// Extension points, named as in `KubeSchedulerConfiguration.profiles[].plugins`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Point {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
}

impl Point {
    pub const ALL: [Point; 12] = [
        Point::PreEnqueue,
        Point::QueueSort,
        Point::PreFilter,
        Point::Filter,
        Point::PostFilter,
        Point::PreScore,
        Point::Score,
        Point::Reserve,
        Point::Permit,
        Point::PreBind,
        Point::Bind,
        Point::PostBind,
    ];

    /// The field name in the configuration.
    pub fn key(self) -> &'static str {
        match self {
            Point::PreEnqueue => "preEnqueue",
            Point::QueueSort => "queueSort",
            Point::PreFilter => "preFilter",
            Point::Filter => "filter",
            Point::PostFilter => "postFilter",
            Point::PreScore => "preScore",
            Point::Score => "score",
            Point::Reserve => "reserve",
            Point::Permit => "permit",
            Point::PreBind => "preBind",
            Point::Bind => "bind",
            Point::PostBind => "postBind",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Success,
    /// Rejected; preemption may help.
    Unschedulable,
    /// Rejected; preemption cannot help.
    UnschedulableAndUnresolvable,
    Error,
    /// The plugin has nothing to do for this pod (PreFilter/PreScore/Bind).
    Skip,
    Wait,
}

/// A plugin's reason: most are fixed texts ("Insufficient cpu"), told by thousands of nodes
/// in one cycle, so they are borrowed, not allocated per node.
pub type Reason = std::borrow::Cow<'static, str>;

/// A status's reasons: nearly always one, held without an allocation.
pub type Reasons = smallvec::SmallVec<[Reason; 1]>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub reasons: Reasons,
}

impl Status {
    pub fn success() -> Status {
        Status {
            code: Code::Success,
            reasons: Reasons::new(),
        }
    }
    pub fn skip() -> Status {
        Status {
            code: Code::Skip,
            reasons: Reasons::new(),
        }
    }
    pub fn unschedulable(reason: impl Into<Reason>) -> Status {
        Status {
            code: Code::Unschedulable,
            reasons: smallvec::smallvec![reason.into()],
        }
    }
    pub fn unresolvable(reason: impl Into<Reason>) -> Status {
        Status {
            code: Code::UnschedulableAndUnresolvable,
            reasons: smallvec::smallvec![reason.into()],
        }
    }
    pub fn error(reason: impl Into<Reason>) -> Status {
        Status {
            code: Code::Error,
            reasons: smallvec::smallvec![reason.into()],
        }
    }
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }
    pub fn is_rejection(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable
        )
    }
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

/// Data plugins keep for one scheduling cycle, keyed by plugin name. A handful of
/// entries read for every node: a short list beats hashing the key each time.
#[derive(Default)]
pub struct CycleState {
    data: Vec<(&'static str, Box<dyn Any + Send + Sync>)>,
    /// PreFilter plugins that returned Skip: their Filter does not run.
    pub skip_filter: HashSet<&'static str>,
    /// PreScore plugins that returned Skip: their Score does not run.
    pub skip_score: HashSet<&'static str>,
    /// Set on the cycles sampled for per-plugin durations (kube-scheduler samples 10 %).
    pub observer: Option<PluginObserver>,
    /// Filter and Score calls timed so far in this cycle (see `NODE_CALLS_TIMED`).
    node_calls_timed: [std::sync::atomic::AtomicU32; 2],
    /// This PreFilter pass is for a member of a job another pod's cycle places (offer
    /// slots, preemption's dry run), not the member's own cycle: a group's placement plan
    /// does not bind it, as Koordinator runs every member on the trigger's cycle state.
    pub as_member: bool,
}

/// Filter and Score run once per node and plugin: timing every call of a sampled cycle
/// (two clock reads and a histogram update each) cost more than the calls at 5,000 nodes.
/// A sampled cycle times the first this many calls of each of the two points; the
/// histogram keeps the same shape with fewer observations.
pub const NODE_CALLS_TIMED: u32 = 256;

/// Records one plugin call: (point, plugin, succeeded, seconds).
pub type PluginObserver = std::sync::Arc<dyn Fn(Point, &'static str, bool, f64) + Send + Sync>;

impl CycleState {
    /// Times `f` as plugin `name` at `point` when this cycle is sampled.
    pub fn timed<T>(
        &self,
        point: Point,
        name: &'static str,
        f: impl FnOnce() -> T,
        ok: impl FnOnce(&T) -> bool,
    ) -> T {
        let Some(obs) = &self.observer else {
            return f();
        };
        let per_node = match point {
            Point::Filter => Some(0),
            Point::Score => Some(1),
            _ => None,
        };
        if let Some(i) = per_node {
            let used = self.node_calls_timed[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if used >= NODE_CALLS_TIMED {
                return f();
            }
        }
        let start = std::time::Instant::now();
        let out = f();
        obs(point, name, ok(&out), start.elapsed().as_secs_f64());
        out
    }

    /// `timed` for calls that change the state (PreFilter, Reserve).
    pub fn timed_mut<T>(
        &mut self,
        point: Point,
        name: &'static str,
        f: impl FnOnce(&mut CycleState) -> T,
        ok: impl FnOnce(&T) -> bool,
    ) -> T {
        let Some(obs) = self.observer.clone() else {
            return f(self);
        };
        let start = std::time::Instant::now();
        let out = f(self);
        obs(point, name, ok(&out), start.elapsed().as_secs_f64());
        out
    }
}

impl CycleState {
    pub fn write<T: Any + Send + Sync>(&mut self, key: &'static str, v: T) {
        self.remove(key);
        self.data.push((key, Box::new(v)));
    }
    pub fn read<T: Any + Send + Sync>(&self, key: &'static str) -> Option<&T> {
        // Called per node by several plugins: keys are constants, so the same address (or
        // a different length) usually settles it before the bytes are compared.
        let same =
            |k: &str| k.len() == key.len() && (std::ptr::eq(k.as_ptr(), key.as_ptr()) || k == key);
        let (_, v) = self.data.iter().find(|(k, _)| same(k))?;
        v.downcast_ref()
    }
    pub fn remove(&mut self, key: &'static str) {
        self.data.retain(|(k, _)| *k != key);
    }
}

/// PreFilter may narrow the candidate nodes.
pub type PreFilterResult = Option<HashSet<String>>;

/// PostFilter's answer: a node the pod may run on once `victims` (on that node, or for a
/// job on several) are gone.
#[derive(Debug, Clone)]
pub struct Nomination {
    pub node: String,
    pub victims: Vec<std::sync::Arc<PodInfo>>,
    /// Coscheduling's job preemption: the rest of the preemptor's job, nominated too.
    pub job: Option<JobNomination>,
}

/// The members of a job that preempted together, besides the pod whose cycle did it.
#[derive(Debug, Clone, Default)]
pub struct JobNomination {
    /// The preemptor: the gang group id, or the pod's key for a pod outside a gang.
    pub preemptor: String,
    /// Koordinator's "preempt success, alreadyWaitingForBound: W/N".
    pub message: String,
    /// Pending members and the node each is nominated to.
    pub pending: Vec<(std::sync::Arc<PodInfo>, String)>,
    /// Members waiting at Permit: sent back to the queue, nominated where they waited.
    pub waiting: Vec<(std::sync::Arc<PodInfo>, String)>,
}

/// Runs the profile's Filter plugins on a (possibly modified) node.
pub type Fits<'a> = dyn Fn(&NodeInfo) -> bool + 'a;

/// Runs the profile's PreFilter (once per pod) and Filter plugins for any pod on a
/// (possibly modified) node, counting the pods nominated there except those in the set
/// (a job's own members); Err: the rejection's reason.
pub type FitsPod<'a> = dyn Fn(&PodInfo, &NodeInfo, &HashSet<String>) -> Result<(), Status> + 'a;

/// A scheduler plugin: implements some extension points, each with a default that does
/// nothing. `points` says which ones, so configuration can refuse a plugin enabled at a
/// point it does not implement.
pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;
    fn points(&self) -> &'static [Point];

    /// Once, when a scheduler (live or explain) is built over `cluster`: a plugin that
    /// keeps state in the cluster switches its tracking on here.
    fn setup(&self, _cluster: &mut ClusterState) {}

    fn pre_enqueue(&self, _pod: &PodInfo, _cluster: &ClusterState) -> Status {
        Status::success()
    }
    /// EventsToRegister: the changes that may let a pod this plugin rejected fit (all,
    /// unless the plugin knows better).
    fn events(&self) -> events::Events {
        events::Events::ALL
    }
    /// QueueingHint: whether `ev` (one of `events`, already applied to `cluster`) may let
    /// `pod`, which this plugin rejected, fit.
    fn hint(&self, _pod: &PodInfo, _ev: &events::ClusterEvent, _cluster: &ClusterState) -> bool {
        true
    }
    /// QueueSort: whether `a` goes before `b`.
    fn less(&self, _a: &PodInfo, _b: &PodInfo) -> bool {
        false
    }
    /// Skip here disables this plugin's Filter for the cycle.
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _cluster: &ClusterState,
    ) -> (Status, PreFilterResult) {
        (Status::success(), None)
    }
    fn filter(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _node: &NodeInfo,
        _cluster: &ClusterState,
    ) -> Status {
        Status::success()
    }
    /// PostFilter, after no node fits; `rejected` holds every node's verdict.
    fn post_filter(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _cluster: &ClusterState,
        _rejected: &runtime::Verdicts,
        _fits: &Fits<'_>,
        _fits_pod: &FitsPod<'_>,
    ) -> (Status, Option<Nomination>) {
        (Status::unschedulable(""), None)
    }
    fn pre_score(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _feasible: &[usize],
        _cluster: &ClusterState,
    ) -> Status {
        Status::success()
    }
    fn score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _node: &NodeInfo,
        _cluster: &ClusterState,
    ) -> Result<i64, Status> {
        Ok(0)
    }
    /// Whether Score gives every node 0 for this pod (its PreFilter found nothing to
    /// score): the framework then records 0 for each node without calling Score per node.
    /// Must agree with `score` and `normalize`; unlike a PreScore Skip it needs no PreScore
    /// entry in the profile (Koordinator's profiles list their plugins at Score only).
    fn scores_nothing(&self, _state: &CycleState, _pod: &PodInfo) -> bool {
        false
    }
    /// NormalizeScore over (node index, score) of the feasible nodes; default: none.
    fn normalize(&self, _state: &CycleState, _pod: &PodInfo, _scores: &mut [i64]) {}
    fn reserve(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _node: &str,
        _cluster: &ClusterState,
    ) -> Status {
        Status::success()
    }
    fn unreserve(&self, _state: &mut CycleState, _pod: &PodInfo, _node: &str) {}
    /// Permit: Success, Wait (with how long), or a rejection.
    fn permit(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _node: &str,
        _cluster: &ClusterState,
    ) -> (Status, std::time::Duration) {
        (Status::success(), std::time::Duration::ZERO)
    }
    /// PreBind: changes to the pod (annotations, labels) through its draft; the binder writes them
    /// in one patch before binding, as Koordinator's DefaultPreBind does.
    fn pre_bind(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _node: &str,
        _modified: &mut PodDraft,
    ) -> Status {
        Status::success()
    }
    /// PostBind: informational, after a successful binding.
    fn post_bind(&self, _state: &CycleState, _pod: &PodInfo, _node: &str) {}
    /// What this cycle's Reserve gave the pod, for `koord explain` to show beside the node
    /// (`cpuset`, `devices`, `reservation`): a key and its value.
    fn report(&self, _state: &CycleState) -> Option<(&'static str, serde_json::Value)> {
        None
    }
}

pub const MAX_NODE_SCORE: i64 = 100;

/// The cycle-state key under which a PreFilter plugin (SchedulingHint) leaves the nodes to
/// try first, in order (`Vec<String>`): the first that passes every Filter becomes the
/// PreFilter result alone (Koordinator's `RunPreferNodesPlugin`).
pub const PREFERRED_NODES: &str = "PreferNodes";
