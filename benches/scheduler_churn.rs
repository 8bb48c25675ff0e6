//! The `Unschedulable` churn case, in process: 5,000 nodes (4 CPU / 32 Gi / 110 pods),
//! 10,000 pods of which 2,000 ask 64 CPUs and can never fit, while the cluster keeps
//! changing — after every 10 pods placed, one node's annotations change (a heartbeat-like
//! update), every 5th time its labels too, and one placed pod is deleted and a new one
//! created in its place. The loop is the live scheduler's: the queue (`scheduler::queue`,
//! backoff and the unschedulable pool), `cycle::run`, a rejected pod noted with the plugins
//! that rejected it, and every change handed to the queue as a cluster event. With
//! queueing hints (the default) a change moves back only the pods a plugin that rejected
//! them says it may help; `BENCH_HINTS=0` moves every unschedulable pod on every change, as
//! before. Printed: pods placed per second, CPU per placed pod, and the cycles the
//! never-fitting pods cost. Budget: ≥ 2,000 pods/s.
//! Run: `cargo bench --bench scheduler_churn`.

use std::sync::Arc;
use std::time::Instant;

use koord::scheduler::config::{self, Backoff};
use koord::scheduler::cycle::{self, Outcome};
use koord::scheduler::framework::events::{ClusterEvent, Events, node_change};
use koord::scheduler::framework::runtime::{Framework, Scope};
use koord::scheduler::framework::{ClusterState, PodInfo};
use koord::scheduler::queue::Queue;
use serde_json::{Value, json};

mod common;

const NODES: usize = 5_000;
const FITTING: usize = 8_000;
const NEVER: usize = 2_000;
const CHURN_EVERY: usize = 10;

fn node(i: usize, generation: usize) -> Value {
    let name = format!("node-{i}");
    let zone = if generation % 5 == 4 { "b" } else { "a" };
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone},
            "annotations": {"heartbeat": generation.to_string()}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}})
}

fn pod(name: &str, cpu: &str) -> Arc<PodInfo> {
    let v = json!({"metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}}}]}});
    Arc::new(PodInfo::new(Arc::new(serde_json::from_value(v).unwrap())))
}

struct Run {
    fw: Framework,
    c: ClusterState,
    q: Queue,
    hints: bool,
    placed: Vec<String>,
    placements: usize,
    never_cycles: usize,
    start: usize,
    churned: usize,
}

impl Run {
    /// A change applied to the cluster, handed to the queue as the live scheduler does.
    fn changed(&mut self, ev: ClusterEvent) {
        let now = Instant::now();
        if !self.hints {
            self.q.on_cluster_event(now);
            return;
        }
        let (fw, c) = (&self.fw, &self.c);
        let ev = ev.resolved(c);
        self.q
            .on_event(now, ev.kind, |p, plugins| fw.may_help(plugins, p, &ev, c));
    }

    fn churn(&mut self) {
        self.churned += 1;
        let i = (self.churned * 7919) % NODES;
        let n: k8s_openapi::api::core::v1::Node =
            serde_json::from_value(node(i, self.churned)).unwrap();
        let name = n.metadata.name.clone().unwrap_or_default();
        let kind = node_change(self.c.node(&name), &n);
        self.c.upsert_node(Arc::new(n));
        self.changed(ClusterEvent::on_node(kind, &name));
        // A placed pod leaves; a new one comes.
        let gone = self
            .placed
            .swap_remove((self.churned * 31) % self.placed.len());
        let on = self.c.placement(&gone).map(str::to_string);
        self.c.delete_pod(&gone);
        if let Some(on) = on {
            self.changed(ClusterEvent::on_node(Events::POD_ASSIGNED_DELETE, &on));
        }
        self.q.add(pod(&format!("new-{}", self.churned), "100m"));
    }

    /// One pod from the queue through the cycle; false when the queue has none active.
    fn step(&mut self) -> bool {
        let now = Instant::now();
        self.q.flush(now);
        let Some(p) = self.q.pop() else { return false };
        let a = cycle::run(&self.fw, &p, &mut self.c, Scope::Live { start: self.start });
        if let Some(r) = &a.result {
            self.start = (self.start + r.processed) % NODES;
        }
        match a.outcome {
            Outcome::Placed { .. } => {
                self.q.remove(&p.key);
                self.placed.push(p.key.clone());
                self.placements += 1;
                // The pods created by the churn make none themselves.
                if self.placements.is_multiple_of(CHURN_EVERY) && !p.name.starts_with("new-") {
                    self.churn();
                }
            }
            _ => {
                if p.name.starts_with("never-") {
                    self.never_cycles += 1;
                }
                let verdicts = a.result.iter().flat_map(|r| r.verdicts.values());
                let mut plugins: Vec<&'static str> = verdicts.filter_map(|v| v.plugin).collect();
                plugins.sort_unstable();
                plugins.dedup();
                self.q.set_hint(&p.key, self.fw.events_of(&plugins));
                self.q
                    .set_unschedulable_by(&p.key, "koord-scheduler", plugins);
                self.q.requeue_unschedulable(p, now);
            }
        }
        true
    }
}

fn main() {
    let hints = std::env::var("BENCH_HINTS").map_or(true, |v| v != "0");
    let cfg = config::default_config().unwrap();
    let fw = config::framework(&cfg.profiles[0]).unwrap();
    let mut c = ClusterState::default();
    c.now_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    fw.setup(&mut c);
    for i in 0..NODES {
        c.upsert_node(Arc::new(serde_json::from_value(node(i, 0)).unwrap()));
    }
    let mut q = Queue::new(Backoff {
        initial_seconds: 1,
        max_seconds: 10,
    });
    for i in 0..FITTING + NEVER {
        // Every fifth pod can never fit: 64 CPUs on 4-CPU nodes.
        let p = match i % 5 {
            4 => pod(&format!("never-{i}"), "64"),
            _ => pod(&format!("pod-{i}"), "100m"),
        };
        q.add(p);
    }
    let mut run = Run {
        fw,
        c,
        q,
        hints,
        placed: Vec::new(),
        placements: 0,
        never_cycles: 0,
        start: 0,
        churned: 0,
    };
    let (t, cpu0) = (Instant::now(), common::cpu_secs(std::process::id()));
    while run.step() {}
    let secs = t.elapsed().as_secs_f64();
    let placed = run.placements;
    println!(
        "Unschedulable churn, hints {}: {:>6.0} pods/s, {:>4.0} µs CPU per placed pod ({placed} placed, {} node and {} pod changes, {} cycles for the {NEVER} never-fitting pods, in {secs:.2} s)",
        if hints { "on " } else { "off" },
        placed as f64 / secs,
        (common::cpu_secs(std::process::id()) - cpu0) * 1e6 / placed as f64,
        run.churned,
        run.churned,
        run.never_cycles,
    );
}
