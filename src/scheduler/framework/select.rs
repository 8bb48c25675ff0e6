//! The node-by-node part of a cycle: Filter over the nodes in rotating order (prefetching
//! each node's state a few nodes ahead), Score over the feasible ones, and the choice.
//!
//! The per-cycle lists (node order, feasible nodes, one score per plugin and node) live in
//! buffers kept on the thread between cycles: at 5,000 nodes each is kilobytes, and
//! allocating them afresh every cycle made glibc consolidate its free lists every cycle.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::runtime::{Framework, NodeVerdict, Rejection, Scope, run_filters};
use super::scratch::{Order, Scratch};
use super::verdicts::Gathered;
use super::{ClusterState, Code, CycleState, PodInfo, Point, Status};

/// How many nodes ahead of the one being filtered its state is prefetched: far enough for
/// a memory load to finish in the meantime, near enough to stay in cache.
const PREFETCH_AHEAD: usize = 4;

/// Nodes filtered on the calling thread before deciding whether threads pay off.
const PROBE: usize = 64;
/// Expected remaining filter time above which the rest is split over threads. Threads are
/// started per cycle, which costs ~50 µs of CPU and more on a busy machine: below a few
/// milliseconds one thread is cheaper in CPU and hardly slower.
const PARALLEL_WORTH: std::time::Duration = std::time::Duration::from_millis(2);

/// The configuration's `parallelism` (0: not set).
static PARALLELISM: AtomicUsize = AtomicUsize::new(0);

/// kube-scheduler's `parallelism`: at most this many threads filter nodes in one cycle.
pub fn set_parallelism(n: usize) {
    PARALLELISM.store(n, Ordering::Relaxed);
}

/// CPUs this process may use, read once (`available_parallelism` reads cgroup files),
/// capped by the configuration's `parallelism`.
fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cpus = *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    match PARALLELISM.load(Ordering::Relaxed) {
        0 => cpus,
        n => cpus.min(n),
    }
}

impl Framework {
    /// Filters the nodes in `order` until `limit` are feasible, into the two lists given
    /// (the feasible nodes, the rejections), both emptied first; returns how many nodes were
    /// examined. A first batch runs on this thread; when it shows the rest is worth it, the
    /// rest is split over threads (spawning costs
    /// more than cheap filters on small batches).
    pub(super) fn find_feasible(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        order: Order,
        limit: usize,
        (ok, bad): (&mut Vec<usize>, &mut Vec<Rejection>),
    ) -> usize {
        let filters = self.active_filters(state);
        let found = AtomicUsize::new(0);
        let check = |at: Range<usize>, ok: &mut Vec<usize>, bad: &mut Vec<Rejection>| {
            let mut seen = 0;
            for k in at.clone() {
                if found.load(Ordering::Relaxed) >= limit {
                    break;
                }
                // Two stages: the NodeInfo itself far ahead, then (once it is in cache)
                // what its pointers lead to.
                if k + 2 * PREFETCH_AHEAD < at.end {
                    let far = &cluster.nodes[order.at(k + 2 * PREFETCH_AHEAD)];
                    crate::os::tuning::prefetch_all(far, usize::MAX);
                }
                if k + PREFETCH_AHEAD < at.end {
                    cluster.nodes[order.at(k + PREFETCH_AHEAD)].prefetch();
                }
                seen += 1;
                let i = order.at(k);
                match run_filters(&filters, state, pod, &cluster.nodes[i], cluster) {
                    Ok(()) => {
                        found.fetch_add(1, Ordering::Relaxed);
                        ok.push(i);
                    }
                    Err((p, s)) => bad.push((i, p, s)),
                }
            }
            seen
        };
        ok.clear();
        bad.clear();
        let len = order.len();
        let probe = len.min(PROBE);
        let t = std::time::Instant::now();
        let mut seen = check(0..probe, ok, bad);
        if probe == len || ok.len() >= limit {
            return seen;
        }
        let rest = len - probe;
        let per_node = t.elapsed() / probe.max(1) as u32;
        let threads = threads();
        if threads < 2 || per_node * rest.min(limit) as u32 <= PARALLEL_WORTH {
            return seen + check(probe..len, ok, bad);
        }
        let size = rest.div_ceil(threads);
        let parts: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (probe..len)
                .step_by(size)
                .map(|from| {
                    let check = &check;
                    s.spawn(move || {
                        let (mut ok, mut b) = (Vec::new(), Vec::new());
                        let n = check(from..(from + size).min(len), &mut ok, &mut b);
                        (ok, b, n)
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        for (o, b, n) in parts {
            ok.extend(o);
            bad.extend(b);
            seen += n;
        }
        ok.truncate(limit.max(1));
        seen
    }

    /// PreScore, then every Score plugin over the feasible nodes into `scratch.scores`;
    /// returns each plugin's name and weight in the buffer's order.
    fn score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        scratch: &mut Scratch,
    ) -> Result<Vec<(&'static str, i64)>, (&'static str, Status)> {
        let feasible = &scratch.feasible;
        for e in self.enabled(Point::PreScore) {
            let s = e.plugin.pre_score(state, pod, feasible, cluster);
            match s.code {
                Code::Success => {}
                Code::Skip => {
                    state.skip_score.insert(e.plugin.name());
                }
                _ => return Err((e.plugin.name(), s)),
            }
        }
        let n = feasible.len();
        let scores = &mut scratch.scores;
        scores.clear();
        let mut plugins = Vec::new();
        for e in self.enabled(Point::Score) {
            let name = e.plugin.name();
            plugins.push((name, e.weight));
            if state.skip_score.contains(name) || e.plugin.scores_nothing(state, pod) {
                // A plugin that skipped this pod reports 0.
                scores.resize(scores.len() + n, 0);
                continue;
            }
            let from = scores.len();
            for &i in feasible {
                let node = &cluster.nodes[i];
                let run = || e.plugin.score(state, pod, node, cluster);
                let s = state.timed(Point::Score, name, run, Result::is_ok);
                scores.push(s.map_err(|s| (name, s))?);
            }
            e.plugin.normalize(state, pod, &mut scores[from..]);
        }
        Ok(plugins)
    }

    /// The feasible node with the highest weighted score (every feasible node's verdict
    /// too, for explain).
    pub(super) fn choose(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        scratch: &mut Scratch,
        scope: Scope,
        verdicts: &mut Gathered,
    ) -> Option<String> {
        let name = |i: usize| cluster.nodes[i].name.clone();
        let everything = matches!(scope, Scope::Everything);
        match scratch.feasible[..] {
            [] => return None,
            [only] if !everything => return Some(name(only)),
            _ => {}
        }
        let plugins = match self.score(state, pod, cluster, scratch) {
            Ok(p) => p,
            Err((plugin, s)) => {
                for &i in &scratch.feasible {
                    verdicts.push(i, NodeVerdict::rejected(plugin, &s));
                }
                return None;
            }
        };
        let (feasible, scores) = (&scratch.feasible, &scratch.scores);
        let n = feasible.len();
        let total = |k: usize| -> i64 {
            plugins
                .iter()
                .enumerate()
                .map(|(p, (_, w))| scores[p * n + k] * w)
                .sum()
        };
        // The highest total; ties go to the first node by name, so decisions are
        // reproducible and `koord explain` agrees with the live scheduler.
        let rank = cluster.name_rank();
        let (mut best, mut best_total) = (0, total(0));
        for k in 1..n {
            let t = total(k);
            if t > best_total || (t == best_total && rank[feasible[k]] < rank[feasible[best]]) {
                (best, best_total) = (k, t);
            }
        }
        if everything {
            for (k, &i) in feasible.iter().enumerate() {
                let scores = plugins
                    .iter()
                    .enumerate()
                    .map(|(p, (name, _))| (*name, scores[p * n + k]))
                    .collect();
                let v = NodeVerdict {
                    feasible: true,
                    plugin: None,
                    code: Code::Success,
                    reason: "".into(),
                    scores,
                    total: total(k),
                };
                verdicts.push(i, v);
            }
        }
        Some(name(feasible[best]))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::super::{ClusterState, PodInfo, Point};
    use crate::scheduler::framework::runtime::Scope;

    fn pod(spec: serde_json::Value) -> PodInfo {
        let mut spec = spec;
        spec["schedulerName"] = json!("koord-scheduler");
        spec["containers"] =
            json!([{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]);
        PodInfo::new(Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec}),
            )
            .unwrap(),
        ))
    }

    #[test]
    fn a_plugin_that_scores_nothing_would_have_scored_every_node_0() {
        let cfg = crate::scheduler::config::default_config().unwrap();
        let fw = crate::scheduler::config::framework(&cfg.profiles[0]).unwrap();
        let mut c = ClusterState::default();
        fw.setup(&mut c);
        for (i, zone) in ["a", "a", "b"].iter().enumerate() {
            let node = json!({"metadata": {"name": format!("n{i}"), "labels": {"zone": zone}},
                "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}});
            c.upsert_node(Arc::new(serde_json::from_value(node).unwrap()));
        }
        let preferred = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}});
        let pods = [
            pod(json!({})),
            pod(json!({"nodeSelector": {"zone": "a"}})),
            pod(json!({"affinity": preferred})),
        ];
        let mut skipped = 0;
        for p in &pods {
            let r = fw.schedule(p, &c, Scope::Everything);
            assert!(r.node.is_some(), "{:?}", r.verdicts);
            for e in fw.enabled(Point::Score) {
                if !e.plugin.scores_nothing(&r.state, p) {
                    continue;
                }
                skipped += 1;
                let mut scores: Vec<i64> = c
                    .nodes
                    .iter()
                    .map(|n| e.plugin.score(&r.state, p, n, &c).unwrap())
                    .collect();
                e.plugin.normalize(&r.state, p, &mut scores);
                assert_eq!(
                    scores,
                    [0, 0, 0],
                    "{} for {:?}",
                    e.plugin.name(),
                    p.pod.spec
                );
            }
        }
        assert!(
            skipped >= 6,
            "DeviceShare, Reservation and Coscheduling skip plain pods"
        );
        let r = fw.schedule(&pods[1], &c, Scope::Everything);
        assert_eq!(
            r.node.as_deref(),
            Some("n0"),
            "the nodeSelector still filters"
        );
        assert!(!r.verdicts["n2"].feasible);
        let r = fw.schedule(&pods[2], &c, Scope::Everything);
        assert_eq!(
            r.node.as_deref(),
            Some("n2"),
            "preferred affinity still scores"
        );
        let r = fw.schedule(&pods[0], &c, Scope::Everything);
        assert!(
            r.state.skip_filter.contains("NodeAffinity"),
            "kube's PreFilter Skip"
        );
        assert!(
            r.state.skip_score.contains("NodeAffinity"),
            "kube's PreScore Skip"
        );
    }

    #[test]
    fn buffers_return_to_the_thread_and_a_nested_cycle_gets_its_own() {
        let mut outer = super::Scratch::take();
        outer.order.extend(0..10);
        let inner = super::Scratch::take();
        assert!(inner.order.is_empty(), "held by the outer cycle");
        inner.give_back();
        outer.give_back();
        assert_eq!(
            super::Scratch::take().order.len(),
            10,
            "kept for the next cycle"
        );
    }
}
