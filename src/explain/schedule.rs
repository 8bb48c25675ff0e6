//! `koord explain schedule`: the scheduler's framework and plugins over a snapshot. Pending
//! pods are scheduled one at a time in queue order, each placement assumed before the
//! next, as the live scheduler does; every node's verdict is reported.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{Value, json};

use super::Snapshot;
use crate::api::extension::priority::PriorityClass as KoordClass;
use crate::api::scheduling::reservation::Reservation;
use crate::scheduler::config::{self, SchedulerConfig};
use crate::scheduler::framework::runtime::fit_error;
use crate::scheduler::framework::runtime::{Framework, NodeVerdict, Scope};
use crate::scheduler::framework::{ClusterState, PodInfo};
use crate::scheduler::plugins::deviceshare;
use crate::scheduler::reservation_live;

/// One pending pod's outcome.
pub struct Placement {
    pub pod: String,
    pub node: Option<String>,
    /// NodeNUMAResource's cpuset for the pod, as the scheduler would write it.
    pub cpuset: Option<String>,
    /// The Reservation the pod was placed into.
    pub reservation: Option<String>,
    /// DeviceShare's `device-allocated` for the pod, as the scheduler would write it.
    pub devices: Option<Value>,
    pub verdicts: BTreeMap<String, NodeVerdict>,
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
        cluster.upsert_node(Arc::new(n.clone()));
    }
    for m in &snap.node_metrics {
        cluster.upsert_metric(Arc::new(m.clone()));
    }
    let topologies = snap
        .other
        .iter()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some("NodeResourceTopology"));
    for t in topologies {
        match serde_json::from_value::<crate::api::topology::NodeResourceTopology>(t.clone()) {
            Ok(nrt) => cluster.upsert_topology(&nrt),
            Err(e) => tracing::warn!(error = %e, "NodeResourceTopology in the snapshot skipped"),
        }
    }
    for d in &snap.devices {
        cluster.upsert_device(d);
    }
    for r in reservations(snap) {
        cluster.upsert_reservation(r);
    }
    for g in of_kind::<crate::api::quota::PodGroup>(snap, "PodGroup") {
        cluster.gangs.upsert_pod_group(&g);
    }
    let mut pending = Vec::new();
    for p in &snap.pods {
        let mut p = p.clone();
        resolve_priority(&mut p, classes);
        let bound = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        // Pending pods count too: in their quota's request (and, later, their gang).
        let p = Arc::new(p);
        cluster.upsert_pod(p.clone());
        if !bound {
            pending.push(Arc::unwrap_or_clone(p));
        }
    }
    (cluster, pending)
}

/// The snapshot's objects of one kind (a malformed one is skipped with a warning).
fn of_kind<T: serde::de::DeserializeOwned>(snap: &Snapshot, kind: &str) -> Vec<T> {
    snap.other
        .iter()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some(kind))
        .filter_map(|v| match serde_json::from_value::<T>(v.clone()) {
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

fn profile_of<'a>(fws: &'a [Framework], pod: &Pod) -> Option<&'a Framework> {
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    fws.iter().find(|f| f.scheduler_name == name)
}

pub fn run(snap: &Snapshot, cfg: &SchedulerConfig, now_ms: i64) -> Result<Vec<Placement>, String> {
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
    queue.sort_by(|(a, _), (b, _)| {
        if first.less(a, b) {
            std::cmp::Ordering::Less
        } else if first.less(b, a) {
            std::cmp::Ordering::Greater
        } else {
            a.key.cmp(&b.key)
        }
    });
    let mut out = Vec::new();
    for (pod, fw) in queue {
        if let Err((plugin, s)) = fw.pre_enqueue(&pod, &cluster) {
            let v = NodeVerdict {
                feasible: false,
                plugin: Some(plugin),
                code: s.code,
                reason: s.message(),
                scores: BTreeMap::new(),
                total: 0,
            };
            let verdicts = cluster
                .nodes
                .iter()
                .map(|n| (n.name.clone(), v.clone()))
                .collect();
            out.push(Placement {
                pod: shown(&pod),
                node: None,
                cpuset: None,
                reservation: None,
                devices: None,
                verdicts,
            });
            continue;
        }
        let mut result = fw.schedule(&pod, &cluster, Scope::Everything);
        let (mut cpuset, mut reservation, mut devices) = (None, None, None);
        if let (Some(node), Some(name)) = (result.node.clone(), pod.reserve_of.clone()) {
            if let Some(before) = cluster.reservations.get(&name).map(|r| r.object.clone()) {
                let alloc = reservation_live::allocatable_of(&pod);
                let mut annotations = Default::default();
                if fw.reserve(&mut result.state, &pod, &node, &cluster).is_ok() {
                    devices = deviceshare::reserved_devices(&result.state);
                    let modified = fw.pre_bind(&result.state, &pod, &node).ok().flatten();
                    annotations = reservation_live::prebind_annotations(modified.as_ref());
                }
                cluster.upsert_reservation(Arc::new(reservation_live::assumed(
                    &before,
                    &node,
                    &alloc,
                    &annotations,
                )));
            }
        } else if let Some(node) = result.node.clone() {
            // Reserve and PreBind as the live scheduler does, so the pod is counted with
            // what it would be given (its cpuset) before the next pod is scheduled.
            let assumed = match fw.reserve(&mut result.state, &pod, &node, &cluster) {
                Err((plugin, s)) => {
                    tracing::warn!(pod = %pod.key, plugin, reason = %s.message(), "reserve failed");
                    pod.clone()
                }
                Ok(()) => {
                    cpuset = crate::scheduler::plugins::numa::reserved_cpuset(&result.state);
                    devices = deviceshare::reserved_devices(&result.state);
                    reservation =
                        crate::scheduler::plugins::reservation::plugin::chosen(&result.state);
                    match fw.pre_bind(&result.state, &pod, &node) {
                        Ok(Some(m)) => PodInfo::new(Arc::new(m)),
                        _ => pod.clone(),
                    }
                }
            };
            cluster.assume(&assumed, &node);
            if let Err(reason) = permit(fw, &result.state, &pod, &node, &mut cluster) {
                reject(&mut cluster, &mut result.verdicts, "Coscheduling", &reason);
                result.node = None;
            }
        } else if pod.reserve_of.is_none() {
            let msg = fit_error(cluster.nodes.len(), &result);
            gang_failed(&mut cluster, &mut out, &pod.key, &msg);
        }
        out.push(Placement {
            pod: shown(&pod),
            node: result.node,
            cpuset,
            reservation,
            devices,
            verdicts: result.verdicts,
        });
    }
    // Gang members still waiting at Permit never complete: none of them is placed.
    for key in std::mem::take(&mut cluster.gangs.waiting) {
        let id = cluster.gangs.gang_id(&key).unwrap_or_default().to_string();
        let min = cluster.gangs.spec(&id).map(|s| s.min).unwrap_or(0);
        let reason =
            format!("Gang {id:?} cannot be completed: fewer than {min} members could be placed");
        unplace(&mut cluster, &mut out, &key, &reason);
    }
    Ok(out)
}

/// Permit as the live loop runs it: a gang member waits (or releases its group).
fn permit(
    fw: &Framework,
    state: &crate::scheduler::framework::CycleState,
    pod: &PodInfo,
    node: &str,
    cluster: &mut ClusterState,
) -> Result<(), String> {
    match fw.permit(state, pod, node, cluster) {
        Ok(None) => {
            cluster.gangs.release(&pod.key);
            Ok(())
        }
        Ok(Some(_)) => {
            cluster.gangs.wait(&pod.key);
            Ok(())
        }
        Err((_, s)) => {
            cluster.forget(&pod.key);
            Err(s.message())
        }
    }
}

fn reject(
    cluster: &mut ClusterState,
    verdicts: &mut BTreeMap<String, NodeVerdict>,
    plugin: &'static str,
    reason: &str,
) {
    verdicts.clear();
    for n in &cluster.nodes {
        let v = NodeVerdict {
            feasible: false,
            plugin: Some(plugin),
            code: crate::scheduler::framework::Code::Unschedulable,
            reason: reason.to_string(),
            scores: BTreeMap::new(),
            total: 0,
        };
        verdicts.insert(n.name.clone(), v);
    }
}

/// A placed gang member taken back: counted nowhere, reported with the gang's reason.
fn unplace(cluster: &mut ClusterState, out: &mut [Placement], key: &str, reason: &str) {
    cluster.forget(key);
    if let Some(p) = out.iter_mut().find(|p| p.pod == key) {
        p.node = None;
        p.cpuset = None;
        p.reservation = None;
        p.devices = None;
        reject(cluster, &mut p.verdicts, "Coscheduling", reason);
    }
}

/// A member found no node: a Strict gang's waiting members are released.
fn gang_failed(cluster: &mut ClusterState, out: &mut [Placement], key: &str, msg: &str) {
    let released = cluster.gangs.member_failed(key);
    if released.is_empty() {
        return;
    }
    let group = cluster
        .gangs
        .gang_id(key)
        .map(|id| cluster.gangs.group_id(id))
        .unwrap_or_default();
    let reason =
        crate::scheduler::plugins::coscheduling::rejected_message(&group, key, msg, released.len());
    for k in released {
        unplace(cluster, out, &k, &reason);
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
                    (name.clone(), entry)
                })
                .collect();
            let mut v = json!({"pod": p.pod, "node": p.node, "nodes": nodes});
            if let Some(c) = &p.cpuset {
                v["cpuset"] = json!(c);
            }
            if let Some(r) = &p.reservation {
                v["reservation"] = json!(r);
            }
            if let Some(d) = &p.devices {
                v["devices"] = d.clone();
            }
            v
        })
        .collect();
    json!({ "pods": pods })
}

pub fn to_text(placements: &[Placement]) -> String {
    let mut out = String::new();
    for p in placements {
        let cpus = p
            .cpuset
            .as_deref()
            .map(|c| format!(" (cpuset {c})"))
            .unwrap_or_default()
            + &p.devices
                .as_ref()
                .map(|d| format!(" (devices {d})"))
                .unwrap_or_default();
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

/// Reads `--config`, or the built-in default.
pub fn load_config(path: Option<&std::path::Path>) -> Result<SchedulerConfig, String> {
    match path {
        None => config::default_config(),
        Some(p) => {
            let shown = p.display().to_string();
            let text =
                crate::os::files::read_config(p).map_err(|e| format!("--config {shown}: {e}"))?;
            config::resolve(Some((&text, &shown)))
        }
    }
}
