//! `koord explain schedule`: the scheduler's framework and plugins over a snapshot. Pending
//! pods are scheduled one at a time in queue order, each placement assumed before the
//! next, as the live scheduler does; every node's verdict is reported.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::api::field::FieldError;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{Value, json};

use super::Snapshot;
use crate::api::extension::priority::PriorityClass as KoordClass;
use crate::api::scheduling::explanation::ScheduleExplanationStatus;
use crate::api::scheduling::reservation::Reservation;
use crate::scheduler::config::{self, SchedulerConfig};
use crate::scheduler::cycle::{self, Outcome};
use crate::scheduler::explanation::{self, Asked};
use crate::scheduler::framework::runtime::{Framework, NodeVerdict, Scope, Verdicts};
use crate::scheduler::framework::{ClusterState, Code, Nomination, PodInfo, gangs};
use crate::scheduler::reservation_live;

/// One pending pod's outcome.
pub struct Placement {
    pub pod: String,
    pub node: Option<String>,
    /// What the plugins report about the placement (`cpuset`, `devices`, `reservation`).
    pub details: BTreeMap<&'static str, Value>,
    /// PostFilter's nomination for an unschedulable pod.
    pub preemption: Option<Nomination>,
    pub verdicts: Verdicts,
    /// The status a ScheduleExplanation asking about this pod would get (the live
    /// scheduler's answer for the same state).
    pub explanation: ScheduleExplanationStatus,
}

/// `spec.priority`, else the snapshot's PriorityClass, else Koordinator's built-in classes.
pub fn resolve_priority(pod: &mut Pod, classes: &[PriorityClass]) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if spec.priority.is_some() {
        return;
    }
    let Some(name) = spec
        .priority_class_name
        .as_deref()
        .filter(|n| !n.is_empty())
    else {
        return;
    };
    let from_snapshot = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .map(|c| c.value);
    let builtin = KoordClass::ALL
        .into_iter()
        .find(|c| c.name() == name)
        .map(|c| match c {
            KoordClass::Prod => 9000,
            KoordClass::Mid => 7000,
            KoordClass::Batch => 5000,
            _ => 3000,
        });
    spec.priority = from_snapshot.or(builtin);
}

/// `pod` with its priority resolved, copied only when that changes it.
fn with_priority(pod: &Arc<Pod>, classes: &[PriorityClass]) -> Arc<Pod> {
    let mut p = pod.clone();
    let unresolved = p.spec.as_ref().is_some_and(|s| s.priority.is_none());
    if unresolved {
        resolve_priority(Arc::make_mut(&mut p), classes);
    }
    p
}

/// The volume plugins' kinds (through the live scheduler's own storage-event handling), the
/// PodDisruptionBudgets preemption respects and the selectors default topology spreading reads.
fn load_storage_and_pdbs(cluster: &mut ClusterState, snap: &Snapshot) {
    use crate::scheduler::live_storage::apply;
    use crate::scheduler::live_watch::Storage;
    use kube::runtime::watcher::Event::Apply;
    let (vols, storage) = (&mut cluster.volumes, &snap.storage);
    for o in &storage.pvs {
        apply(vols, Storage::Pv(Apply(o.clone())));
    }
    for o in &storage.pvcs {
        apply(vols, Storage::Pvc(Apply(o.clone())));
    }
    for o in &storage.classes {
        apply(vols, Storage::Class(Apply(o.clone())));
    }
    for o in &storage.csi_nodes {
        apply(vols, Storage::CsiNode(Apply(o.clone())));
    }
    for o in &storage.csi_drivers {
        apply(vols, Storage::CsiDriver(Apply(o.clone())));
    }
    for o in &storage.capacities {
        apply(vols, Storage::Capacity(Apply(o.clone())));
    }
    for p in &snap.pdbs {
        cluster.upsert_pdb(Arc::new(p.clone()));
    }
    load_owners(cluster, snap);
}

/// The Services and controllers default topology spreading reads, through the live
/// scheduler's own handling of their watch events.
fn load_owners(cluster: &mut ClusterState, snap: &Snapshot) {
    use crate::scheduler::live_storage::apply_owner;
    use crate::scheduler::live_watch::Owner;
    use kube::runtime::watcher::Event::Apply;
    let owners = &mut cluster.owners;
    for o in of_kind(snap, "ReplicaSet") {
        apply_owner(owners, Owner::ReplicaSet(Apply(o)));
    }
    for o in of_kind(snap, "StatefulSet") {
        apply_owner(owners, Owner::StatefulSet(Apply(o)));
    }
    for o in of_kind(snap, "ReplicationController") {
        apply_owner(owners, Owner::Rc(Apply(o)));
    }
    for o in of_kind(snap, "Service") {
        apply_owner(owners, Owner::Service(Apply(o)));
    }
}

/// The cluster state of a snapshot (bound pods counted, NodeMetrics, the clock).
pub fn cluster_of(
    snap: &Snapshot,
    classes: &[PriorityClass],
    now_ms: i64,
    fws: &[Framework],
) -> (ClusterState, Vec<Pod>) {
    let mut cluster = ClusterState::default();
    cluster.now_ms = now_ms;
    for fw in fws {
        fw.setup(&mut cluster);
    }
    for q in of_kind::<crate::api::quota::ElasticQuota>(snap, "ElasticQuota") {
        if let Err(e) = cluster.quotas.upsert(&q) {
            tracing::warn!(error = %e, "ElasticQuota in the snapshot skipped");
        }
    }
    for n in &snap.nodes {
        cluster.upsert_node(n.clone());
    }
    for m in &snap.node_metrics {
        cluster.upsert_metric(m.clone());
    }
    let topologies = snap
        .other
        .iter()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some("NodeResourceTopology"));
    for t in topologies {
        match crate::api::decode::from_value::<crate::api::topology::NodeResourceTopology>(
            t.clone(),
        ) {
            Ok(nrt) => cluster.upsert_topology(&nrt),
            Err(e) => tracing::warn!(error = %e, "NodeResourceTopology in the snapshot skipped"),
        }
    }
    for d in &snap.devices {
        cluster.upsert_device(d);
    }
    load_storage_and_pdbs(&mut cluster, snap);
    for r in reservations(snap) {
        cluster.upsert_reservation(r);
    }
    for g in of_kind::<crate::api::quota::PodGroup>(snap, "PodGroup") {
        cluster.gangs.upsert_pod_group(&g);
    }
    cluster.network_topology = network_topology(snap, &cluster);
    let mut pending = Vec::new();
    for p in &snap.pods {
        let p = with_priority(p, classes);
        let bound = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        // Pending pods count too: in their quota's request (and, later, their gang).
        cluster.upsert_pod(p.clone());
        if !bound {
            pending.push(Arc::unwrap_or_clone(p));
        }
    }
    (cluster, pending)
}

/// The tree of the snapshot's ClusterNetworkTopology `default` (as the live scheduler's
/// network-topology manager keeps it) over its nodes.
fn network_topology(
    snap: &Snapshot,
    cluster: &ClusterState,
) -> Option<Arc<crate::scheduler::model::network_topology::Tree>> {
    use crate::api::scheduling::network_topology::{ClusterNetworkTopology, DEFAULT_NAME};
    let cnt = of_kind::<ClusterNetworkTopology>(snap, "ClusterNetworkTopology")
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(DEFAULT_NAME))?;
    let nodes = cluster.nodes.iter().map(|n| (n.name.as_str(), &n.labels));
    match crate::scheduler::model::network_topology::build(&cnt, nodes) {
        Ok(t) => Some(Arc::new(t)),
        Err(e) => {
            tracing::warn!(error = %e, "ClusterNetworkTopology in the snapshot skipped");
            None
        }
    }
}

/// The snapshot's objects of one kind (a malformed one is skipped with a warning).
/// DeviceShare's GPU shared-resource templates, from the ConfigMap its args name when the
/// snapshot holds it (as the live scheduler watches it).
fn load_gpu_templates(cluster: &mut ClusterState, snap: &Snapshot, cfg: &SchedulerConfig) {
    use crate::scheduler::model::gpu_templates::GpuTemplates;
    let Some(src) = crate::scheduler::gpu_templates_of(&cfg.profiles) else {
        return;
    };
    let cm = of_kind::<k8s_openapi::api::core::v1::ConfigMap>(snap, "ConfigMap")
        .into_iter()
        .find(|cm| {
            cm.metadata.name.as_deref() == Some(src.config_map_name.as_str())
                && cm.metadata.namespace.as_deref() == Some(src.config_map_namespace.as_str())
        });
    match cm.as_ref().map(GpuTemplates::from_config_map) {
        Some(Ok(t)) => cluster.gpu_templates = Arc::new(t),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "GPU shared-resource templates in the snapshot skipped")
        }
        None => {}
    }
}

fn of_kind<T: serde::de::DeserializeOwned>(snap: &Snapshot, kind: &str) -> Vec<T> {
    snap.other
        .iter()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some(kind))
        .filter_map(|v| match crate::api::decode::from_value::<T>(v.clone()) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(kind, error = %e, "object in the snapshot skipped");
                None
            }
        })
        .collect()
}

fn reservations(snap: &Snapshot) -> Vec<Arc<Reservation>> {
    of_kind::<Reservation>(snap, "Reservation")
        .into_iter()
        .map(Arc::new)
        .collect()
}

pub fn profile_of<'a>(fws: &'a [Framework], pod: &Pod) -> Option<&'a Framework> {
    let name = crate::scheduler::model::transform::scheduler_name(pod);
    fws.iter().find(|f| f.scheduler_name == name)
}

pub fn run(
    snap: &Snapshot,
    cfg: &SchedulerConfig,
    now_ms: i64,
) -> Result<Vec<Placement>, FieldError> {
    let classes: Vec<PriorityClass> = snap
        .other
        .iter()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some("PriorityClass"))
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    let fws = cfg
        .profiles
        .iter()
        .map(config::framework)
        .collect::<Result<Vec<_>, _>>()?;
    let (mut cluster, pending) = cluster_of(snap, &classes, now_ms, &fws);
    load_gpu_templates(&mut cluster, snap, cfg);
    let mut queue: Vec<(PodInfo, &Framework)> = pending
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| profile_of(&fws, &p).map(|f| (PodInfo::new(Arc::new(p)), f)))
        .collect();
    // Pending Reservations go through the same queue, as their reserve pods.
    for r in reservations(snap) {
        if let Some(p) = reservation_live::pending_pod(&r)
            && let Some(f) = profile_of(&fws, &p.pod)
        {
            queue.push((p, f));
        }
    }
    let Some(first) = fws.first() else {
        return Ok(Vec::new());
    };
    queue.sort_by(|(a, _), (b, _)| first.queue_order(a, b));
    let mut out = Vec::new();
    // Gang members an inline batch already scheduled with their group's first pod.
    let mut batched = std::collections::HashSet::new();
    for (pod, fw) in queue {
        if batched.remove(&pod.key) {
            continue;
        }
        let mut attempt = cycle::run(fw, &pod, &mut cluster, Scope::Everything);
        let batch = std::mem::take(&mut attempt.batch);
        record(&cluster, &mut out, &pod, attempt);
        for (member, attempt) in batch {
            batched.insert(member.key.clone());
            record(&cluster, &mut out, &member, attempt);
        }
    }
    // Gang members still waiting at Permit never complete (the live scheduler's wait
    // times out): none of them is placed.
    for key in std::mem::take(&mut cluster.gangs.waiting) {
        let id = cluster.gangs.gang_id(&key).unwrap_or_default().to_string();
        let min = cluster.gangs.spec(&id).map(|s| s.min).unwrap_or(0);
        cluster.forget(&key);
        let reason = gangs::incomplete_message(&id, min);
        unplace(&cluster, &mut out, &[key], &reason);
    }
    Ok(out)
}

/// One attempt as a placement; the members it sent back are reported unplaced.
fn record(
    cluster: &ClusterState,
    out: &mut Vec<Placement>,
    pod: &PodInfo,
    attempt: cycle::Attempt,
) {
    let asked = [Asked {
        pod,
        attempt: &attempt,
    }];
    let explanation = explanation::status(&asked, cluster);
    let mut placement = Placement {
        pod: shown(pod),
        node: attempt.node().map(str::to_string),
        details: attempt.details,
        preemption: None,
        verdicts: attempt.result.map(|r| r.verdicts).unwrap_or_default(),
        explanation,
    };
    match attempt.outcome {
        Outcome::Gated { plugin, reason } => {
            let v = cycle::rejected(plugin, Code::Unschedulable, &reason);
            placement.verdicts = every_node(cluster, &v);
        }
        Outcome::Unschedulable {
            nomination,
            rejected,
            ..
        } => {
            placement.preemption = nomination;
            for r in rejected {
                unplace(cluster, out, &r.keys, &r.message);
            }
        }
        Outcome::PermitRejected { rejected, .. } => {
            unplace(cluster, out, &rejected.keys, &rejected.message);
        }
        _ => {}
    }
    out.push(placement);
}

/// The same verdict on every node.
fn every_node(cluster: &ClusterState, v: &NodeVerdict) -> Verdicts {
    cluster
        .nodes
        .iter()
        .map(|n| (n.key.clone(), v.clone()))
        .collect()
}

/// Placed gang members taken back by the cycle: reported unplaced, with the gang's reason.
fn unplace(cluster: &ClusterState, out: &mut [Placement], keys: &[String], reason: &str) {
    let v = cycle::rejected(gangs::PLUGIN, Code::Unschedulable, reason);
    for p in out.iter_mut().filter(|p| keys.contains(&p.pod)) {
        p.node = None;
        p.details.clear();
        p.verdicts = every_node(cluster, &v);
        p.explanation = gang_taken_back(reason);
    }
}

/// A gang member placed, then sent back with its group.
fn gang_taken_back(reason: &str) -> ScheduleExplanationStatus {
    ScheduleExplanationStatus {
        schedulable: Some(false),
        schedulable_after_preemption: Some(false),
        failed_message: Some(reason.to_string()),
        ..Default::default()
    }
}

/// How a placement names what was scheduled: `ns/name`, or `reservation/NAME`.
fn shown(pod: &PodInfo) -> String {
    match &pod.reserve_of {
        Some(name) => format!("reservation/{name}"),
        None => pod.key.clone(),
    }
}

pub fn to_json(placements: &[Placement]) -> Value {
    let pods: Vec<Value> = placements
        .iter()
        .map(|p| {
            let nodes: serde_json::Map<String, Value> = p
                .verdicts
                .iter()
                .map(|(name, v)| {
                    let entry = if v.feasible {
                        json!({"feasible": true, "scores": v.scores, "total": v.total})
                    } else {
                        json!({"feasible": false, "plugin": v.plugin, "reason": v.reason})
                    };
                    (name.to_string(), entry)
                })
                .collect();
            let mut v = json!({"pod": p.pod, "node": p.node, "nodes": nodes});
            v["scheduleExplanation"] = serde_json::to_value(&p.explanation).unwrap_or_default();
            for (k, d) in &p.details {
                v[*k] = d.clone();
            }
            if let Some(n) = &p.preemption {
                let victims: Vec<&str> = n.victims.iter().map(|v| v.key.as_str()).collect();
                v["preemption"] = json!({"node": n.node, "victims": victims});
                if let Some(members) = job_members(n) {
                    v["preemption"]["nominated"] = members;
                }
            }
            v
        })
        .collect();
    json!({ "pods": pods })
}

/// The other members of a preempting job and the node each is nominated to.
fn job_members(n: &Nomination) -> Option<Value> {
    let job = n.job.as_ref()?;
    let members: serde_json::Map<String, Value> = job
        .pending
        .iter()
        .chain(&job.waiting)
        .map(|(p, node)| (p.key.clone(), json!(node)))
        .collect();
    (!members.is_empty()).then_some(Value::Object(members))
}

pub fn to_text(placements: &[Placement]) -> String {
    let mut out = String::new();
    for p in placements {
        let mut cpus: String = p
            .details
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!(" ({k} {s})"),
                v => format!(" ({k} {v})"),
            })
            .collect();
        if let Some(n) = &p.preemption {
            let victims: Vec<&str> = n.victims.iter().map(|v| v.key.as_str()).collect();
            cpus += &format!(" (preempting {} on {})", victims.join(" "), n.node);
        }
        out.push_str(&format!(
            "{} → {}{cpus}\n",
            p.pod,
            p.node.as_deref().unwrap_or("<unschedulable>")
        ));
        for (name, v) in &p.verdicts {
            if v.feasible {
                let parts: Vec<String> = v.scores.iter().map(|(k, s)| format!("{k}={s}")).collect();
                out.push_str(&format!(
                    "  {name:<24} total {:>5}  {}\n",
                    v.total,
                    parts.join(" ")
                ));
            } else {
                out.push_str(&format!(
                    "  {name:<24} rejected by {}: {}\n",
                    v.plugin.unwrap_or("?"),
                    v.reason
                ));
            }
        }
    }
    out
}
