//! `koord simulate replay`: the roles' own decision code over a recording, in its virtual
//! time. The recording's state when every kind was listed is loaded as `koord explain`
//! loads a snapshot; then each change is applied in order, and whenever time moves on the
//! scheduler's cycle places the pods pending (those of its profiles, in queue order, with
//! the live scheduler's rotating node start and name tie-break). A pod the recording shows
//! bound is kept where the replay put it: the recording's node is kept only to compare.
//! At each sample the manager's NodeResource calculation gives every node's batch
//! resources; at each descheduling interval a descheduling pass runs (dry run).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::Serialize;
use serde_json::Value;

use super::decoded::{Event, Object};
use super::recording::Op;
use super::world::World;
use crate::explain::schedule::{cluster_of, profile_of, resolve_priority};
use crate::scheduler::config::SchedulerConfig;
use crate::scheduler::cycle::{self, Attempt, Outcome};
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::framework::{ClusterState, PodInfo};

/// One configuration set a replay runs under.
pub struct Options {
    pub name: String,
    pub scheduler: SchedulerConfig,
    pub slo: Option<ConfigMap>,
    pub descheduler: Option<PathBuf>,
    /// Virtual milliseconds between batch-resource samples.
    pub sample_every_ms: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Placed {
    pub node: String,
    /// Virtual milliseconds since the recording began.
    pub t: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSample {
    pub requests_cpu: i64,
    pub usage_cpu: i64,
    pub batch_cpu: i64,
    pub batch_memory: i64,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    pub t: u64,
    /// The cluster's batch-cpu (milli-CPUs) and batch-memory (bytes).
    pub batch_cpu: i64,
    pub batch_memory: i64,
    pub nodes: BTreeMap<String, NodeSample>,
}

/// What one replay decided.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub name: String,
    /// The pods the replay scheduled, where and when.
    pub placements: BTreeMap<String, Placed>,
    /// Pods left pending at the end, with the scheduler's reason.
    pub pending: BTreeMap<String, String>,
    /// Where the recording shows those pods bound by the live scheduler.
    pub live: BTreeMap<String, String>,
    /// Evictions the descheduler's passes would make (dry run).
    pub evictions: Vec<Value>,
    pub samples: Vec<Sample>,
    /// Pods of the recording (listed or arriving) and scheduling cycles run.
    pub pods: usize,
    pub cycles: usize,
    pub seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIf>,
    pub warnings: Vec<String>,
}

/// What-if capacity's answer (`--add`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIf {
    pub template: String,
    pub asked: usize,
    pub fit: usize,
    /// Copies placed per node.
    pub nodes: BTreeMap<String, usize>,
    /// Why the next copy does not fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::api::scheduling::explanation::ScheduleExplanationStatus>,
}

pub struct Engine {
    pub fws: Vec<Framework>,
    pub cluster: ClusterState,
    classes: Vec<PriorityClass>,
    pub world: World,
    pending: HashMap<String, Arc<PodInfo>>,
    /// Pods the replay schedules: the node it put each on (None: pending).
    decided: HashMap<String, Option<String>>,
    fresh: Vec<String>,
    dirty: bool,
    next_start: usize,
    pub t0_ms: i64,
    pub now: u64,
    relisting: HashMap<String, HashSet<String>>,
    pub(super) seen_pods: HashSet<String>,
    pub run: Run,
}

impl Engine {
    pub(super) fn load(
        mut world: World,
        now: u64,
        header: &super::recording::Header,
        opts: &Options,
    ) -> Result<Engine, crate::api::field::FieldError> {
        let t0_ms = header
            .started_at
            .parse::<k8s_openapi::jiff::Timestamp>()
            .map(|t| t.as_millisecond())
            .unwrap_or(0);
        let fws = opts
            .scheduler
            .profiles
            .iter()
            .map(crate::scheduler::config::framework)
            .collect::<Result<Vec<_>, _>>()?;
        let classes = priority_classes(&world);
        let seen_pods = world.keys_of("Pod").into_iter().collect();
        let snap = world.snapshot();
        let (cluster, pending) = cluster_of(snap, &classes, t0_ms + now as i64, &fws);
        let mut e = Engine {
            fws,
            cluster,
            classes,
            pending: HashMap::new(),
            decided: HashMap::new(),
            fresh: Vec::new(),
            dirty: false,
            next_start: 0,
            t0_ms,
            now,
            relisting: HashMap::new(),
            seen_pods,
            world,
            run: Run {
                name: opts.name.clone(),
                ..Default::default()
            },
        };
        for p in pending {
            if p.metadata.deletion_timestamp.is_some() || profile_of(&e.fws, &p).is_none() {
                continue;
            }
            let info = PodInfo::new(Arc::new(p));
            e.decided.insert(info.key.clone(), None);
            e.fresh.push(info.key.clone());
            e.pending.insert(info.key.clone(), Arc::new(info));
        }
        Ok(e)
    }

    /// One recorded change, through the same cluster-state calls the live scheduler makes.
    pub(super) fn apply(&mut self, ev: Event) {
        match ev.op {
            Op::Init => {
                self.relisting.insert(ev.kind, HashSet::new());
            }
            Op::Synced => self.end_relist(&ev.kind),
            Op::Sync | Op::Apply | Op::Delete => {
                if ev.op == Op::Sync
                    && let Some(seen) = self.relisting.get_mut(&ev.kind)
                {
                    seen.insert(ev.key.clone());
                }
                self.cluster.now_ms = self.t0_ms + self.now as i64;
                if ev.op == Op::Delete {
                    self.delete(&ev.kind, &ev.key);
                } else {
                    self.upsert(ev);
                }
            }
        }
    }

    /// A re-list ended: what it did not list is gone.
    fn end_relist(&mut self, kind: &str) {
        let Some(seen) = self.relisting.remove(kind) else {
            return;
        };
        for key in self.world.keys_of(kind) {
            if !seen.contains(&key) {
                self.delete(kind, &key);
            }
        }
    }

    fn delete(&mut self, kind: &str, key: &str) {
        self.dirty = true;
        let name = key.rsplit('/').next().unwrap_or("");
        match kind {
            "Pod" => {
                self.seen_pods.insert(key.to_string());
                self.world.remove_pod(key);
                self.cluster.delete_pod(key);
                self.pending.remove(key);
            }
            "Node" => {
                self.world.remove_node(key);
                self.cluster.remove_node(key);
            }
            "NodeMetric" => {
                self.world.remove_metric(key);
                self.cluster.remove_metric(key);
            }
            _ => {
                self.world.remove_other(kind, key);
                match kind {
                    "NodeResourceTopology" => self.cluster.remove_topology(name),
                    "Device" => self.cluster.remove_device(name),
                    _ => {}
                }
            }
        }
    }

    fn upsert(&mut self, ev: Event) {
        match ev.object {
            Object::Absent => {}
            Object::Pod(p) => self.apply_pod(ev.key, p),
            Object::Node(n) => {
                self.dirty = true;
                self.world.put_node(n.clone());
                self.cluster.upsert_node(n);
            }
            Object::NodeMetric(m) => {
                self.dirty = true;
                self.world.put_metric(m.clone());
                self.cluster.upsert_metric(m);
            }
            Object::Other(v) => self.apply_other(&ev.kind, v),
        }
    }

    fn apply_other(&mut self, kind: &str, v: Value) {
        self.dirty = true;
        self.world.put_other(kind, v.clone());
        match kind {
            "NodeResourceTopology" => {
                if let Some(t) = decode::<crate::api::topology::NodeResourceTopology>(v) {
                    self.cluster.upsert_topology(&t);
                }
            }
            "Device" => {
                if let Some(d) = decode::<crate::api::scheduling::device::Device>(v) {
                    self.cluster.upsert_device(&d);
                }
            }
            "PodDisruptionBudget" => {
                if let Some(p) = decode(v) {
                    self.cluster.upsert_pdb(Arc::new(p));
                }
            }
            "PodGroup" => {
                if let Some(g) = decode::<crate::api::quota::PodGroup>(v) {
                    self.cluster.gangs.upsert_pod_group(&g);
                }
            }
            "ElasticQuota" => {
                if let Some(q) = decode::<crate::api::quota::ElasticQuota>(v)
                    && let Err(e) = self.cluster.quotas.upsert(&q)
                {
                    tracing::debug!(error = %e, "ElasticQuota skipped");
                }
            }
            "PriorityClass" => self.classes = priority_classes(&self.world),
            _ => {}
        }
    }

    /// `pod` is the decoder's only copy (changed in place); once applied, the world the
    /// manager and descheduler read and the scheduler's cluster state share it.
    fn apply_pod(&mut self, key: String, mut shared: Arc<Pod>) {
        self.seen_pods.insert(key.clone());
        let pod = Arc::make_mut(&mut shared);
        resolve_priority(pod, &self.classes);
        let live = node_of(pod);
        match self.decided.get(&key).cloned() {
            Some(decision) => {
                if let Some(n) = live {
                    self.run.live.insert(key.clone(), n);
                }
                set_node(pod, decision);
            }
            None if live.is_none() && profile_of(&self.fws, pod).is_some() => {
                self.decided.insert(key.clone(), None);
            }
            None => self.dirty = true,
        }
        let waiting = self.decided.get(&key) == Some(&None)
            && pod.metadata.deletion_timestamp.is_none()
            && !finished(pod);
        self.world.put_pod(shared.clone());
        let info = self.cluster.upsert_pod(shared);
        if waiting {
            if self.pending.insert(key.clone(), info).is_none() {
                self.fresh.push(key);
            }
        } else {
            self.pending.remove(&key);
        }
    }

    /// Places the pods pending, in queue order: all of them after a change that may make
    /// room, otherwise only the ones that arrived.
    pub fn schedule(&mut self) {
        let keys: Vec<String> = if self.dirty {
            self.pending.keys().cloned().collect()
        } else {
            std::mem::take(&mut self.fresh)
        };
        self.dirty = false;
        self.fresh.clear();
        let mut queue: Vec<Arc<PodInfo>> = keys
            .iter()
            .filter_map(|k| self.pending.get(k).cloned())
            .collect();
        if let Some(first) = self.fws.first() {
            queue.sort_by(|a, b| first.queue_order(a, b));
        }
        self.cluster.now_ms = self.t0_ms + self.now as i64;
        for pod in queue {
            if !self.pending.contains_key(&pod.key) {
                continue;
            }
            self.cycle(&pod);
        }
    }

    /// One scheduling cycle, as the live scheduler runs it, and its outcome kept.
    fn cycle(&mut self, pod: &Arc<PodInfo>) {
        let Some(mut attempt) = self.attempt(pod) else {
            return;
        };
        for (member, a) in std::mem::take(&mut attempt.batch) {
            self.settle(&member, &a);
        }
        self.settle(pod, &attempt);
    }

    /// One scheduling cycle (its placement assumed in the cluster state); None for a pod
    /// of no profile.
    pub fn attempt(&mut self, pod: &Arc<PodInfo>) -> Option<Attempt> {
        let name = crate::scheduler::model::transform::scheduler_name(&pod.pod);
        let fi = self.fws.iter().position(|f| f.scheduler_name == name)?;
        let scope = Scope::Live {
            start: self.next_start,
        };
        let attempt = cycle::run(&self.fws[fi], pod, &mut self.cluster, scope);
        self.run.cycles += 1;
        if let Some(r) = &attempt.result {
            let total = self.cluster.nodes.len().max(1);
            self.next_start = (self.next_start + r.processed) % total;
        }
        Some(attempt)
    }

    /// `spec.priority` resolved as the snapshot loader resolves it.
    pub fn resolve_priority(&self, pod: &mut Pod) {
        resolve_priority(pod, &self.classes);
    }

    fn settle(&mut self, pod: &PodInfo, attempt: &Attempt) {
        if let Some(node) = attempt.node() {
            self.place(&pod.key, node.to_string());
        }
        match &attempt.outcome {
            Outcome::Unschedulable {
                message, rejected, ..
            } => {
                self.run.pending.insert(pod.key.clone(), message.clone());
                for r in rejected {
                    for k in &r.keys {
                        self.unplace(k, &r.message);
                    }
                }
            }
            Outcome::PermitRejected {
                rejected, reason, ..
            } => {
                self.run.pending.insert(pod.key.clone(), reason.clone());
                for k in &rejected.keys {
                    self.unplace(k, &rejected.message);
                }
            }
            Outcome::Gated { plugin, reason } | Outcome::Failed { plugin, reason, .. } => {
                let why = format!("{plugin}: {reason}");
                self.run.pending.insert(pod.key.clone(), why);
            }
            _ => {}
        }
    }

    fn place(&mut self, key: &str, node: String) {
        self.decided.insert(key.to_string(), Some(node.clone()));
        self.pending.remove(key);
        self.run.pending.remove(key);
        if let Some(p) = self.world.pod_mut(key) {
            set_node(p, Some(node.clone()));
        }
        let placed = Placed { node, t: self.now };
        self.run.placements.insert(key.to_string(), placed);
    }

    fn unplace(&mut self, key: &str, why: &str) {
        self.run.placements.remove(key);
        self.run.pending.insert(key.to_string(), why.to_string());
        if self.decided.get(key).is_some_and(Option::is_some) {
            self.decided.insert(key.to_string(), None);
        }
        if let Some(p) = self.world.pod_mut(key) {
            set_node(p, None);
            let info = PodInfo::new(Arc::new(p.clone()));
            self.pending.insert(key.to_string(), Arc::new(info));
        }
    }

    /// Gang members still waiting at Permit when the recording ends never complete.
    pub(super) fn finish_gangs(&mut self) {
        for key in std::mem::take(&mut self.cluster.gangs.waiting) {
            let id = self.cluster.gangs.gang_id(&key).unwrap_or_default();
            let min = self.cluster.gangs.spec(id).map(|s| s.min).unwrap_or(0);
            let why = crate::scheduler::framework::gangs::incomplete_message(id, min);
            self.cluster.forget(&key);
            self.unplace(&key, &why);
        }
    }

    /// CPU requested on each node by the pods there that have not finished, as the
    /// scheduler counts them.
    pub(super) fn requests(&self) -> HashMap<String, i64> {
        (self.cluster.nodes.iter())
            .map(|n| (n.name.clone(), n.requested.get("cpu").copied().unwrap_or(0)))
            .collect()
    }
}

/// A change into the world, for the initial load.
pub(super) fn put(world: &mut World, ev: Event) {
    if ev.op == Op::Delete {
        match ev.kind.as_str() {
            "Node" => world.remove_node(&ev.key),
            "Pod" => world.remove_pod(&ev.key),
            "NodeMetric" => world.remove_metric(&ev.key),
            kind => world.remove_other(kind, &ev.key),
        }
        return;
    }
    match ev.object {
        Object::Absent => {}
        Object::Node(n) => world.put_node(n),
        Object::Pod(p) => world.put_pod(p),
        Object::NodeMetric(m) => world.put_metric(m),
        Object::Other(v) => world.put_other(&ev.kind, v),
    }
}

fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Option<T> {
    match crate::api::decode::from_value(v) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(error = %e, "object in the recording skipped");
            None
        }
    }
}

fn priority_classes(world: &World) -> Vec<PriorityClass> {
    world
        .others("PriorityClass")
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect()
}

fn node_of(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
}

fn set_node(pod: &mut Pod, node: Option<String>) {
    if let Some(s) = pod.spec.as_mut() {
        s.node_name = node;
    }
}

fn finished(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
}
