//! The manager's samples and the descheduler's passes over a replay: each on a frozen copy
//! of the state at its instant (pods shared, not copied), on threads of their own while
//! the scheduler goes on, each in the order it was due — so their answers are the ones the
//! state at that instant gives, and the replay's second core does them.
//!
//! Passes (dry run): one at the start, then every `deschedulingInterval` of virtual time (at
//! most [`MAX_PASSES`]), and one at the end, with the same plugins (their anomaly detectors
//! carry over from pass to pass, as live).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::replay::{Engine, NodeSample, Sample};
use crate::descheduler::framework::Plugins;
use crate::descheduler::framework::podview::PodView;
use crate::explain::snapshot::Snapshot;

/// Passes one replay runs at most (a long recording under a short interval).
pub const MAX_PASSES: usize = 1000;

/// Frozen states waiting for each worker at most (each holds the pods' handles, not copies).
const QUEUED: usize = 2;

/// The state at one instant, frozen.
struct Frozen {
    t: u64,
    now_ms: i64,
    snap: Arc<Snapshot>,
}

/// What the workers found, in the order it was due.
#[derive(Default)]
pub struct Observed {
    pub samples: Vec<Sample>,
    pub evictions: Vec<Value>,
    pub warnings: Vec<String>,
}

/// The two workers: the manager's samples and the descheduler's passes (side by side, so
/// the end of a replay waits for the longer of the two, not for both).
pub struct Observer {
    samples: Worker<(Frozen, HashMap<String, i64>)>,
    passes: Worker<Frozen>,
    every_ms: u64,
    next: u64,
    passes_run: usize,
}

struct Worker<J> {
    tx: SyncSender<J>,
    done: Receiver<Observed>,
}

impl<J: Send + 'static> Worker<J> {
    fn spawn(
        name: &str,
        mut run: impl FnMut(&J, &mut Observed) + Send + 'static,
    ) -> std::io::Result<Worker<J>> {
        let (tx, rx) = sync_channel::<J>(QUEUED);
        let (done_tx, done) = sync_channel(1);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut out = Observed::default();
                let mut last = None;
                for job in rx {
                    run(&job, &mut out);
                    last = Some(job);
                }
                // Answered first: the last frozen state and the worker's own are freed
                // after, while the replay hands over its result.
                let _ = done_tx.send(out);
                drop((last, run));
            })?;
        Ok(Worker { tx, done })
    }

    fn send(&self, job: J) {
        // The worker ends only when this sender is dropped.
        let _ = self.tx.send(job);
    }

    fn finish(self) -> Observed {
        drop(self.tx);
        self.done.recv().unwrap_or_else(|_| Observed {
            warnings: vec!["the samples or descheduling passes stopped early".into()],
            ..Default::default()
        })
    }
}

impl Observer {
    pub fn spawn(config: Option<&Path>, e: &Engine) -> anyhow::Result<Observer> {
        let cfg = crate::descheduler::configfile::load(config)?;
        let every_ms = (cfg.interval.as_millis() as u64).max(1);
        let mut plugins = Plugins::build(&cfg, every_ms, crate::descheduler::plugins::registry)?;
        let mut views = Views::default();
        let passes = Worker::spawn("replay-deschedule", move |f: &Frozen, out| {
            pass(&mut plugins, &mut views, f, out)
        })?;
        let samples = Worker::spawn("replay-sample", |(f, requests): &(Frozen, _), out| {
            out.samples.push(sample(f, requests));
        })?;
        Ok(Observer {
            samples,
            passes,
            every_ms,
            next: e.now + every_ms,
            passes_run: 0,
        })
    }

    /// The passes due before virtual time `t`.
    pub fn passes_until(&mut self, e: &mut Engine, t: u64) {
        while self.next <= t && self.passes_run < MAX_PASSES {
            let now = e.now;
            e.now = self.next;
            self.due(e, false, true);
            e.now = now.max(self.next);
            self.next += self.every_ms;
        }
    }

    /// A sample and/or a pass on the replay's state now.
    pub fn due(&mut self, e: &mut Engine, sample: bool, pass: bool) {
        let snap = e.world.snapshot().clone();
        self.send(e, snap, sample, pass);
    }

    /// The sample and pass at the end, given the world's state itself (nothing changes
    /// it after them).
    pub fn last(&mut self, e: &mut Engine) {
        let snap = e.world.take_snapshot();
        self.send(e, snap, true, true);
    }

    fn send(&mut self, e: &Engine, snap: Snapshot, sample: bool, pass: bool) {
        let pass = pass && self.passes_run < MAX_PASSES;
        self.passes_run += usize::from(pass);
        if !sample && !pass {
            return;
        }
        let snap = Arc::new(snap);
        let frozen = || Frozen {
            t: e.now,
            now_ms: e.t0_ms + e.now as i64,
            snap: snap.clone(),
        };
        if sample {
            self.samples.send((frozen(), e.requests()));
        }
        if pass {
            self.passes.send(frozen());
        }
    }

    /// Waits for what is still due and hands it over.
    pub fn finish(self) -> Observed {
        let mut out = self.samples.finish();
        let passes = self.passes.finish();
        out.evictions = passes.evictions;
        out.warnings.extend(passes.warnings);
        out
    }
}

/// The descheduler's view of each pod, kept from pass to pass while the pod is the same
/// object (a pod changes by being replaced), keyed by its address.
#[derive(Default)]
struct Views(HashMap<usize, (Arc<Pod>, Arc<PodView>)>);

impl Views {
    /// Keeps the views of the pods in `snap`, made anew for the pods that changed.
    fn refresh(&mut self, snap: &Snapshot) {
        let mut old = std::mem::take(&mut self.0);
        let mut now = HashMap::with_capacity(snap.pods.len());
        for p in &snap.pods {
            let at = Arc::as_ptr(p) as usize;
            let kept = old.remove(&at);
            let entry = kept.unwrap_or_else(|| (p.clone(), Arc::new(PodView::from(&**p))));
            now.insert(at, entry);
        }
        self.0 = now;
    }
}

/// One descheduling pass (dry run); its evictions recorded with the time.
fn pass(plugins: &mut Plugins, views: &mut Views, f: &Frozen, out: &mut Observed) {
    views.refresh(&f.snap);
    let view = |p: &Arc<Pod>| match views.0.get(&(Arc::as_ptr(p) as usize)) {
        Some((_, v)) => v.clone(),
        None => Arc::new(PodView::from(&**p)),
    };
    let world = match crate::explain::deschedule::world_with(&f.snap, view) {
        Ok(w) => w,
        Err(err) => {
            out.warnings
                .push(format!("descheduling pass skipped: {err}"));
            return;
        }
    };
    let report = plugins.run(&world, f.now_ms);
    let json = report.to_json();
    for mut ev in json["evictions"].as_array().cloned().unwrap_or_default() {
        ev["t"] = serde_json::json!(f.t);
        out.evictions.push(ev);
    }
}

/// Every node's requests, usage and batch resources, by the manager's calculation.
fn sample(f: &Frozen, requests: &HashMap<String, i64>) -> Sample {
    let snap = &f.snap;
    let (plans, _) = crate::explain::noderesource::run(snap, f.now_ms);
    let usage: HashMap<&str, i64> = snap
        .node_metrics
        .iter()
        .filter_map(|m| Some((m.metadata.name.as_deref()?, usage_of(m))))
        .collect();
    let mut s = Sample {
        t: f.t,
        nodes: BTreeMap::new(),
        ..Default::default()
    };
    for plan in plans {
        let node = plan.calc.node.clone();
        let batch = plan.calc.batch.as_ref().map(|b| b.result);
        let (cpu, memory) = batch.map(|r| (r.cpu, r.memory)).unwrap_or_default();
        s.batch_cpu += cpu;
        s.batch_memory += memory;
        let n = NodeSample {
            requests_cpu: requests.get(&node).copied().unwrap_or(0),
            usage_cpu: usage.get(node.as_str()).copied().unwrap_or(0),
            batch_cpu: cpu,
            batch_memory: memory,
        };
        s.nodes.insert(node, n);
    }
    s
}

fn usage_of(m: &crate::api::slo::NodeMetric) -> i64 {
    let usage = (m.status.as_ref())
        .and_then(|s| s.node_metric.as_ref())
        .and_then(|n| n.node_usage.get("cpu"));
    usage.map_or(0, |q| crate::api::pod::amount("cpu", q))
}
