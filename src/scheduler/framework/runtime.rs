//! One profile's plugins per extension point, and one scheduling cycle over them:
//! PreFilter → Filter (parallel, short-circuiting) → PreScore → Score → NormalizeScore →
//! weighted sum → choice. Used by the live scheduler and by `koord explain schedule`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::scratch::{Order, Scratch};

use super::{ClusterState, Code, CycleState, NodeInfo, Plugin, PodInfo, Point, Status};

/// A plugin enabled at a point, with its score weight.
#[derive(Clone)]
pub struct Enabled {
    pub plugin: Arc<dyn Plugin>,
    pub weight: i64,
}

pub struct Framework {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub points: HashMap<Point, Vec<Enabled>>,
    /// Every plugin of the profile by name (queueing hints look rejecting plugins up, for
    /// every unschedulable pod on every cluster event: a fast hash of a fixed name).
    pub by_name: HashMap<&'static str, Arc<dyn Plugin>, foldhash::fast::RandomState>,
    /// The `EnableInlineBatchSchedule` gate (a planned gang group scheduled in one cycle).
    pub inline_batch: bool,
    /// Per-plugin durations of every 10th cycle go here (set once by the live scheduler).
    pub observer: std::sync::OnceLock<super::PluginObserver>,
    pub(crate) cycles: AtomicUsize,
}

/// kube-scheduler's `pluginMetricsSamplePercent`: one cycle in ten.
const SAMPLE_EVERY: usize = 10;

use super::verdicts::Gathered;
pub use super::verdicts::{NodeVerdict, Rejection, Verdicts};

/// The outcome of one cycle for one pod.
pub struct CycleResult {
    pub node: Option<String>,
    /// Every examined node by name.
    pub verdicts: Verdicts,
    pub state: CycleState,
    /// Nodes examined, for the round-robin start of the next cycle.
    pub processed: usize,
    /// A PreFilter plugin's rejection (every node carries it too).
    pub pre_filter_msg: Option<String>,
    /// Seconds spent at PreFilter, Filter and Score (PreScore included), for
    /// `scheduler_framework_extension_point_duration_seconds`.
    pub timings: Vec<(Point, f64)>,
}

/// The Filter plugins on `node`: with the pods nominated there that this pod must respect
/// counted, then (if there were any) without them, as kube-scheduler's
/// `RunFilterPluginsWithNominatedPods` — both must pass.
#[inline]
pub(super) fn run_filters(
    filters: &[&Enabled],
    state: &CycleState,
    pod: &PodInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Result<(), (&'static str, Status)> {
    if !cluster.nominated.is_empty() {
        with_nominated(filters, state, pod, node, cluster, &HashSet::new())?;
    }
    filter_once(filters, state, pod, node, cluster)
}

/// The pass with the nominated pods counted (only while some pod is nominated: the loop
/// over thousands of nodes stays a plain filter pass otherwise).
#[cold]
fn with_nominated(
    filters: &[&Enabled],
    state: &CycleState,
    pod: &PodInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
    except: &HashSet<String>,
) -> Result<(), (&'static str, Status)> {
    let mut nominated = cluster
        .nominated
        .counted_for(&node.name, pod)
        .filter(|p| !except.contains(&p.key))
        .peekable();
    if nominated.peek().is_none() {
        return Ok(());
    }
    let mut with = node.clone();
    nominated.for_each(|p| with.add_pod(p.clone()));
    filter_once(filters, state, pod, &with, cluster)
}

/// `RunFilterPluginsWithNominatedPods` in a job's preemption dry run: the pods nominated
/// to the node are counted except the job's own (`MakeNominatedPodsOfTheSameJob`).
pub(super) fn filters_except(
    filters: &[&Enabled],
    state: &CycleState,
    pod: &PodInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
    job: &HashSet<String>,
) -> Result<(), Status> {
    let reason = |(_, s): (&str, Status)| s;
    with_nominated(filters, state, pod, node, cluster, job).map_err(reason)?;
    filter_once(filters, state, pod, node, cluster).map_err(reason)
}

#[inline(always)]
fn filter_once(
    filters: &[&Enabled],
    state: &CycleState,
    pod: &PodInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Result<(), (&'static str, Status)> {
    for e in filters {
        let run = || e.plugin.filter(state, pod, node, cluster);
        // Unsampled cycles (nine in ten) call the plugin straight: this runs for every
        // node and plugin.
        let s = match state.observer {
            None => run(),
            Some(_) => state.timed(Point::Filter, e.plugin.name(), run, Status::is_success),
        };
        if !s.is_success() {
            return Err((e.plugin.name(), s));
        }
    }
    Ok(())
}

/// How much of the cluster one cycle looks at.
#[derive(Clone, Copy)]
pub enum Scope {
    /// The live scheduler: stop at `numFeasibleNodesToFind`, start at `start`, skip scoring
    /// when only one node is feasible.
    Live { start: usize },
    /// `koord explain`: every node, every feasible node scored.
    Everything,
}

/// kube-scheduler's adaptive `numFeasibleNodesToFind`.
pub fn num_feasible_nodes_to_find(nodes: usize, percentage: Option<i32>) -> usize {
    if nodes < 100 {
        return nodes;
    }
    let mut p = percentage.unwrap_or(0) as i64;
    if p <= 0 {
        p = (50 - nodes as i64 / 125).max(5);
    }
    if p >= 100 {
        return nodes;
    }
    ((nodes as i64 * p / 100).max(100) as usize).min(nodes)
}

impl Framework {
    pub fn enabled(&self, point: Point) -> &[Enabled] {
        self.points.get(&point).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Lets every enabled plugin switch on what it tracks in `cluster` (once per plugin
    /// and point; setup is idempotent).
    pub fn setup(&self, cluster: &mut ClusterState) {
        for e in self.points.values().flatten() {
            e.plugin.setup(cluster);
        }
    }

    /// PreEnqueue: the first rejection keeps the pod out of the active queue.
    pub fn pre_enqueue(
        &self,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> Result<(), (&'static str, Status)> {
        for e in self.enabled(Point::PreEnqueue) {
            let s = e.plugin.pre_enqueue(pod, cluster);
            if !s.is_success() {
                return Err((e.plugin.name(), s));
            }
        }
        Ok(())
    }

    /// QueueSort.
    pub fn less(&self, a: &PodInfo, b: &PodInfo) -> bool {
        self.enabled(Point::QueueSort)
            .first()
            .map(|e| e.plugin.less(a, b))
            .unwrap_or(false)
    }

    /// The queue's order: QueueSort, then the pod's key (as the live queue breaks ties).
    pub fn queue_order(&self, a: &PodInfo, b: &PodInfo) -> std::cmp::Ordering {
        if self.less(a, b) {
            std::cmp::Ordering::Less
        } else if self.less(b, a) {
            std::cmp::Ordering::Greater
        } else {
            a.key.cmp(&b.key)
        }
    }

    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> Result<Option<HashSet<String>>, (&'static str, Status)> {
        let mut allowed: Option<HashSet<String>> = None;
        for e in self.enabled(Point::PreFilter) {
            let run = |st: &mut CycleState| e.plugin.pre_filter(st, pod, cluster);
            let ok = |(s, _): &(Status, _)| matches!(s.code, Code::Success | Code::Skip);
            let (s, result) = state.timed_mut(Point::PreFilter, e.plugin.name(), run, ok);
            match s.code {
                Code::Skip => {
                    state.skip_filter.insert(e.plugin.name());
                }
                Code::Success => {}
                _ => return Err((e.plugin.name(), s)),
            }
            if let Some(set) = result {
                allowed = Some(match allowed {
                    None => set,
                    Some(prev) => prev.intersection(&set).cloned().collect(),
                });
            }
        }
        Ok(allowed)
    }

    /// Filter plugins in order on one node; the first rejection wins.
    pub fn filter_node(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<(), (&'static str, Status)> {
        run_filters(&self.active_filters(state), state, pod, node, cluster)
    }

    /// Filter plugins not disabled for this cycle by a PreFilter Skip.
    pub(super) fn active_filters<'a>(&'a self, state: &CycleState) -> Vec<&'a Enabled> {
        self.enabled(Point::Filter)
            .iter()
            .filter(|e| !state.skip_filter.contains(e.plugin.name()))
            .collect()
    }

    /// One scheduling cycle for `pod`.
    pub fn schedule(&self, pod: &PodInfo, cluster: &ClusterState, scope: Scope) -> CycleResult {
        let mut state = CycleState::default();
        let n = self.cycles.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(SAMPLE_EVERY) {
            state.observer = self.observer.get().cloned();
        }
        let mut verdicts = Gathered::default();
        let clock = std::time::Instant::now();
        let mut timings = Vec::with_capacity(3);
        let pre_filter = self.pre_filter(&mut state, pod, cluster);
        timings.push((Point::PreFilter, clock.elapsed().as_secs_f64()));
        let allowed = match pre_filter {
            Ok(a) => a,
            Err((plugin, s)) => {
                // Every node carries it: gathered by index like Filter's rejections, so
                // no node name is compared.
                for i in 0..cluster.nodes.len() {
                    verdicts.push(i, NodeVerdict::rejected(plugin, &s));
                }
                let verdicts = verdicts.finish(cluster, &mut Vec::new(), &mut Vec::new());
                return CycleResult {
                    node: None,
                    verdicts,
                    state,
                    processed: 0,
                    pre_filter_msg: Some(s.message()),
                    timings,
                };
            }
        };
        let allowed = self.prefer_nodes(&state, pod, cluster, allowed);
        let total = cluster.nodes.len();
        let (start, limit) = match scope {
            Scope::Live { start } => (
                start % total.max(1),
                num_feasible_nodes_to_find(total, self.percentage_of_nodes_to_score),
            ),
            Scope::Everything => (0, total),
        };
        let mut scratch = Scratch::take();
        let order = &mut scratch.order;
        order.clear();
        if let Some(set) = &allowed {
            order.extend((start..total).chain(0..start));
            order.retain(|i| {
                let keep = set.contains(&cluster.nodes[*i].name);
                if !keep {
                    verdicts.push(
                        *i,
                        NodeVerdict::rejected(
                            "PreFilter",
                            &Status::unresolvable(
                                "node(s) didn't satisfy plugin(s) PreFilter result",
                            ),
                        ),
                    );
                }
                keep
            });
        }
        let clock = std::time::Instant::now();
        let order = match allowed {
            Some(_) => Order::List(&scratch.order),
            None => Order::Rotation { start, total },
        };
        let processed = self.find_feasible(
            &state,
            pod,
            cluster,
            order,
            limit,
            (&mut scratch.feasible, &mut scratch.rejected),
        );
        timings.push((Point::Filter, clock.elapsed().as_secs_f64()));
        let clock = std::time::Instant::now();
        let node = self.choose(&mut state, pod, cluster, &mut scratch, scope, &mut verdicts);
        timings.push((Point::Score, clock.elapsed().as_secs_f64()));
        let verdicts = verdicts.finish(cluster, &mut scratch.rejected, &mut scratch.at_rank);
        scratch.give_back();
        CycleResult {
            node,
            verdicts,
            state,
            processed,
            pre_filter_msg: None,
            timings,
        }
    }

    /// Permit: a rejection wins; otherwise the longest Wait (None = allowed now).
    pub fn permit(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
        cluster: &ClusterState,
    ) -> Result<Option<std::time::Duration>, (&'static str, Status)> {
        let mut wait: Option<std::time::Duration> = None;
        for e in self.enabled(Point::Permit) {
            let (s, d) = e.plugin.permit(state, pod, node, cluster);
            match s.code {
                Code::Success | Code::Skip => {}
                Code::Wait => wait = Some(wait.map_or(d, |w| w.max(d))),
                _ => return Err((e.plugin.name(), s)),
            }
        }
        Ok(wait)
    }

    /// PreBind plugins on a copy of the pod; the copy when any plugin changed it.
    pub fn pre_bind(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Result<Option<k8s_openapi::api::core::v1::Pod>, (&'static str, Status)> {
        let mut modified = super::PodDraft::new(&pod.pod);
        for e in self.enabled(Point::PreBind) {
            let run = || e.plugin.pre_bind(state, pod, node, &mut modified);
            let ok = |s: &Status| matches!(s.code, Code::Success | Code::Skip);
            let s = state.timed(Point::PreBind, e.plugin.name(), run, ok);
            if !matches!(s.code, Code::Success | Code::Skip) {
                return Err((e.plugin.name(), s));
            }
        }
        Ok(modified.changed())
    }

    pub fn post_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) {
        for e in self.enabled(Point::PostBind) {
            e.plugin.post_bind(state, pod, node);
        }
    }

    /// PostFilter plugins in order until one succeeds or says nothing can help.
    pub fn post_filter(
        &self,
        result: &CycleResult,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> Option<super::Nomination> {
        self.post_filter_runs(result, pod, cluster).0
    }

    /// [`Framework::post_filter`], with what each plugin that ran said and how long it took.
    pub fn post_filter_runs(
        &self,
        result: &CycleResult,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> (Option<super::Nomination>, Vec<PostFilterRun>) {
        self.trial(result, pod, cluster, |fits, fits_pod| {
            let mut runs = Vec::new();
            // A pending Reservation preempts only through the Reservation plugin.
            let runs_for = |e: &&Enabled| pod.reserve_of.is_none() || e.plugin.name() == "Reservation";
            for e in self.enabled(Point::PostFilter).iter().filter(runs_for) {
                let clock = std::time::Instant::now();
                let (s, nomination) = e.plugin.post_filter(
                    &result.state,
                    pod,
                    cluster,
                    &result.verdicts,
                    fits,
                    fits_pod,
                );
                runs.push(PostFilterRun {
                    plugin: e.plugin.name(),
                    success: s.is_success(),
                    message: s.message(),
                    seconds: clock.elapsed().as_secs_f64(),
                });
                match s.code {
                    Code::Success => return (nomination, runs),
                    Code::UnschedulableAndUnresolvable => return (None, runs),
                    _ => tracing::trace!(pod = %pod.key, plugin = e.plugin.name(), reason = %s.message(), "PostFilter"),
                }
            }
            (None, runs)
        })
    }

    /// Runs `f` with the filters PostFilter tries placements with: this cycle's for `pod`,
    /// and any pod's own (its PreFilter run once) for a preempting job's members.
    pub fn trial<T>(
        &self,
        result: &CycleResult,
        pod: &PodInfo,
        cluster: &ClusterState,
        f: impl FnOnce(&super::Fits<'_>, &super::FitsPod<'_>) -> T,
    ) -> T {
        let filters = self.active_filters(&result.state);
        let fits = |n: &NodeInfo| run_filters(&filters, &result.state, pod, n, cluster).is_ok();
        let others = std::cell::RefCell::new(HashMap::new());
        let fits_pod = |p: &PodInfo, n: &NodeInfo, job: &HashSet<String>| {
            if p.key == pod.key {
                return filters_except(&filters, &result.state, p, n, cluster, job);
            }
            let mut others = others.borrow_mut();
            let own = others
                .entry(p.key.clone())
                .or_insert_with(|| self.own_state(p, cluster));
            let (state, allowed) = own.as_ref().map_err(Status::clone)?;
            if allowed.as_ref().is_some_and(|a| !a.contains(&n.name)) {
                return Err(Status::unschedulable(
                    "node(s) didn't satisfy plugin(s) PreFilter result",
                ));
            }
            filters_except(&self.active_filters(state), state, p, n, cluster, job)
        };
        f(&fits, &fits_pod)
    }

    /// Another pod's own PreFilter pass (a member of a preempting job): its cycle state
    /// and the nodes PreFilter allows, or PreFilter's rejection.
    pub(super) fn own_state(
        &self,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> Result<(CycleState, super::PreFilterResult), Status> {
        let mut state = CycleState {
            as_member: true,
            ..CycleState::default()
        };
        match self.pre_filter(&mut state, pod, cluster) {
            Ok(allowed) => Ok((state, allowed)),
            Err((_, s)) => Err(s),
        }
    }

    /// Koordinator's prefer-nodes step: the first preferred node (within PreFilter's
    /// result) that passes every Filter becomes the only candidate; none: unchanged.
    fn prefer_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        allowed: super::PreFilterResult,
    ) -> super::PreFilterResult {
        let Some(preferred) = state.read::<Vec<String>>(super::PREFERRED_NODES) else {
            return allowed;
        };
        let filters = self.active_filters(state);
        let chosen = preferred
            .iter()
            .filter(|n| allowed.as_ref().is_none_or(|a| a.contains(*n)))
            .filter_map(|n| cluster.node(n))
            .find(|n| run_filters(&filters, state, pod, n, cluster).is_ok());
        match chosen {
            Some(n) => Some([n.name.clone()].into_iter().collect()),
            None => allowed,
        }
    }

    /// Reserve in order; on a failure, Unreserve the ones before in reverse.
    pub fn reserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
        cluster: &ClusterState,
    ) -> Result<(), (&'static str, Status)> {
        let list = self.enabled(Point::Reserve);
        for (k, e) in list.iter().enumerate() {
            let run = |st: &mut CycleState| e.plugin.reserve(st, pod, node, cluster);
            let s = state.timed_mut(Point::Reserve, e.plugin.name(), run, Status::is_success);
            if !s.is_success() {
                for done in list[..k].iter().rev() {
                    done.plugin.unreserve(state, pod, node);
                }
                return Err((e.plugin.name(), s));
            }
        }
        Ok(())
    }

    /// Every enabled plugin's report on this cycle (each plugin once).
    pub fn report(&self, state: &CycleState) -> BTreeMap<&'static str, serde_json::Value> {
        let mut seen = HashSet::new();
        let mut out = BTreeMap::new();
        for e in Point::ALL.iter().flat_map(|p| self.enabled(*p)) {
            if seen.insert(e.plugin.name())
                && let Some((k, v)) = e.plugin.report(state)
            {
                out.insert(k, v);
            }
        }
        out
    }

    pub fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for e in self.enabled(Point::Reserve).iter().rev() {
            e.plugin.unreserve(state, pod, node);
        }
    }
}

/// One PostFilter plugin's run in a cycle.
#[derive(Debug, Clone)]
pub struct PostFilterRun {
    pub plugin: &'static str,
    pub success: bool,
    pub message: String,
    pub seconds: f64,
}
