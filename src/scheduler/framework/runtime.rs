//! One profile's plugins per extension point, and one scheduling cycle over them:
//! PreFilter → Filter (parallel, short-circuiting) → PreScore → Score → NormalizeScore →
//! weighted sum → choice. Used by the live scheduler and by `koord explain schedule`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{ClusterState, Code, CycleState, NodeInfo, Plugin, PodInfo, Point, Status};

/// A node rejected by a plugin: (node index, plugin, status).
pub type Rejection = (usize, &'static str, Status);
/// Per feasible node: plugin → (normalized score, weighted score).
pub type NodeScores = BTreeMap<&'static str, (i64, i64)>;

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
}

/// Why a node was or was not chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeVerdict {
    pub feasible: bool,
    pub plugin: Option<&'static str>,
    pub code: Code,
    pub reason: String,
    pub scores: BTreeMap<&'static str, i64>,
    pub total: i64,
}

impl NodeVerdict {
    fn rejected(plugin: &'static str, s: &Status) -> NodeVerdict {
        NodeVerdict {
            feasible: false,
            plugin: Some(plugin),
            code: s.code,
            reason: s.message(),
            scores: BTreeMap::new(),
            total: 0,
        }
    }
}

/// The outcome of one cycle for one pod.
pub struct CycleResult {
    pub node: Option<String>,
    /// Every examined node by name.
    pub verdicts: BTreeMap<String, NodeVerdict>,
    pub state: CycleState,
    /// Nodes examined, for the round-robin start of the next cycle.
    pub processed: usize,
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

    /// PreEnqueue: the first rejection keeps the pod out of the active queue.
    pub fn pre_enqueue(&self, pod: &PodInfo) -> Result<(), (&'static str, Status)> {
        for e in self.enabled(Point::PreEnqueue) {
            let s = e.plugin.pre_enqueue(pod);
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

    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> Result<Option<HashSet<String>>, (&'static str, Status)> {
        let mut allowed: Option<HashSet<String>> = None;
        for e in self.enabled(Point::PreFilter) {
            let (s, result) = e.plugin.pre_filter(state, pod, cluster);
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
        for e in self.enabled(Point::Filter) {
            let name = e.plugin.name();
            if state.skip_filter.contains(name) {
                continue;
            }
            let s = e.plugin.filter(state, pod, node, cluster);
            if !s.is_success() {
                return Err((name, s));
            }
        }
        Ok(())
    }

    /// Filters nodes in rotating order from `start`, stopping after `limit` feasible ones;
    /// runs on several threads for large clusters.
    fn find_feasible(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        order: &[usize],
        limit: usize,
    ) -> (Vec<usize>, Vec<Rejection>, usize) {
        let found = AtomicUsize::new(0);
        let check = |chunk: &[usize]| {
            let mut ok = Vec::new();
            let mut bad = Vec::new();
            let mut seen = 0;
            for &i in chunk {
                if found.load(Ordering::Relaxed) >= limit {
                    break;
                }
                seen += 1;
                match self.filter_node(state, pod, &cluster.nodes[i], cluster) {
                    Ok(()) => {
                        found.fetch_add(1, Ordering::Relaxed);
                        ok.push(i);
                    }
                    Err((p, s)) => bad.push((i, p, s)),
                }
            }
            (ok, bad, seen)
        };
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        if order.len() < 512 || threads < 2 {
            return check(order);
        }
        let size = order.len().div_ceil(threads);
        let parts: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = order.chunks(size).map(|c| s.spawn(|| check(c))).collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let mut ok = Vec::new();
        let mut bad = Vec::new();
        let mut seen = 0;
        for (o, b, n) in parts {
            ok.extend(o);
            bad.extend(b);
            seen += n;
        }
        ok.truncate(limit.max(1));
        (ok, bad, seen)
    }

    /// Per-plugin normalized, weighted scores of `feasible` nodes.
    fn score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        feasible: &[usize],
    ) -> Result<Vec<NodeScores>, (&'static str, Status)> {
        let nodes: Vec<&NodeInfo> = feasible.iter().map(|i| &cluster.nodes[*i]).collect();
        for e in self.enabled(Point::PreScore) {
            let s = e.plugin.pre_score(state, pod, &nodes, cluster);
            match s.code {
                Code::Success => {}
                Code::Skip => {
                    state.skip_score.insert(e.plugin.name());
                }
                _ => return Err((e.plugin.name(), s)),
            }
        }
        let mut out = vec![BTreeMap::new(); feasible.len()];
        for e in self.enabled(Point::Score) {
            let name = e.plugin.name();
            if state.skip_score.contains(name) {
                continue;
            }
            let mut scores = Vec::with_capacity(nodes.len());
            for n in &nodes {
                scores.push(
                    e.plugin
                        .score(state, pod, n, cluster)
                        .map_err(|m| (name, Status::error(m)))?,
                );
            }
            e.plugin.normalize(state, pod, &mut scores);
            for (slot, s) in out.iter_mut().zip(scores) {
                slot.insert(name, (s, s * e.weight));
            }
        }
        Ok(out)
    }

    /// One scheduling cycle for `pod`.
    pub fn schedule(&self, pod: &PodInfo, cluster: &ClusterState, scope: Scope) -> CycleResult {
        let mut state = CycleState::default();
        let mut verdicts = BTreeMap::new();
        let allowed = match self.pre_filter(&mut state, pod, cluster) {
            Ok(a) => a,
            Err((plugin, s)) => {
                for n in &cluster.nodes {
                    verdicts.insert(n.name.clone(), NodeVerdict::rejected(plugin, &s));
                }
                return CycleResult {
                    node: None,
                    verdicts,
                    state,
                    processed: 0,
                };
            }
        };
        let total = cluster.nodes.len();
        let (start, limit) = match scope {
            Scope::Live { start } => (
                start % total.max(1),
                num_feasible_nodes_to_find(total, self.percentage_of_nodes_to_score),
            ),
            Scope::Everything => (0, total),
        };
        let mut order: Vec<usize> = (0..total).map(|k| (start + k) % total.max(1)).collect();
        if let Some(set) = &allowed {
            order.retain(|i| {
                let name = &cluster.nodes[*i].name;
                let keep = set.contains(name);
                if !keep {
                    verdicts.insert(
                        name.clone(),
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
        let (mut feasible, rejected, processed) =
            self.find_feasible(&state, pod, cluster, &order, limit);
        for (i, plugin, s) in rejected {
            verdicts.insert(
                cluster.nodes[i].name.clone(),
                NodeVerdict::rejected(plugin, &s),
            );
        }
        feasible.sort_by(|a, b| cluster.nodes[*a].name.cmp(&cluster.nodes[*b].name));
        let node = self.choose(&mut state, pod, cluster, &feasible, scope, &mut verdicts);
        CycleResult {
            node,
            verdicts,
            state,
            processed,
        }
    }

    fn choose(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        feasible: &[usize],
        scope: Scope,
        verdicts: &mut BTreeMap<String, NodeVerdict>,
    ) -> Option<String> {
        let name = |i: usize| cluster.nodes[i].name.clone();
        if feasible.is_empty() {
            return None;
        }
        let ok = |scores: BTreeMap<&'static str, i64>, total| NodeVerdict {
            feasible: true,
            plugin: None,
            code: Code::Success,
            reason: String::new(),
            scores,
            total,
        };
        if feasible.len() == 1 && matches!(scope, Scope::Live { .. }) {
            verdicts.insert(name(feasible[0]), ok(BTreeMap::new(), 0));
            return Some(name(feasible[0]));
        }
        let scored = match self.score(state, pod, cluster, feasible) {
            Ok(s) => s,
            Err((plugin, s)) => {
                for &i in feasible {
                    verdicts.insert(name(i), NodeVerdict::rejected(plugin, &s));
                }
                return None;
            }
        };
        let mut best: Option<(i64, usize)> = None;
        for (&i, per_plugin) in feasible.iter().zip(scored) {
            let total: i64 = per_plugin.values().map(|(_, w)| *w).sum();
            // Ties go to the first node by name: decisions stay reproducible and explainable.
            if best.is_none_or(|(b, _)| total > b) {
                best = Some((total, i));
            }
            let mut raw: BTreeMap<&'static str, i64> =
                per_plugin.into_iter().map(|(k, (s, _))| (k, s)).collect();
            // A plugin that skipped this pod (PreScore Skip) reports 0.
            for e in self.enabled(Point::Score) {
                raw.entry(e.plugin.name()).or_insert(0);
            }
            verdicts.insert(name(i), ok(raw, total));
        }
        best.map(|(_, i)| name(i))
    }

    /// Reserve in order; on a failure, Unreserve the ones before in reverse.
    pub fn reserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Result<(), (&'static str, Status)> {
        let list = self.enabled(Point::Reserve);
        for (k, e) in list.iter().enumerate() {
            let s = e.plugin.reserve(state, pod, node);
            if !s.is_success() {
                for done in list[..k].iter().rev() {
                    done.plugin.unreserve(state, pod, node);
                }
                return Err((e.plugin.name(), s));
            }
        }
        Ok(())
    }

    pub fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for e in self.enabled(Point::Reserve).iter().rev() {
            e.plugin.unreserve(state, pod, node);
        }
    }
}

/// kube-scheduler's FitError message: "0/5 nodes are available: 3 node(s) …, 2 Insufficient cpu."
pub fn fit_error(total: usize, verdicts: &BTreeMap<String, NodeVerdict>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in verdicts.values().filter(|v| !v.feasible) {
        for r in v.reason.split(", ").filter(|r| !r.is_empty()) {
            *counts.entry(r).or_insert(0) += 1;
        }
    }
    let mut parts: Vec<String> = counts
        .into_iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    parts.sort();
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}
