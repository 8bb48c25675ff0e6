//! PodGroup status as Koordinator's gang controller keeps it: counts of scheduled
//! (bound), running, succeeded and failed members, and the phase they imply.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::scheduler::framework::ClusterState;

#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub namespace: String,
    pub name: String,
    pub phase: &'static str,
    pub scheduled: usize,
    pub running: usize,
    pub succeeded: usize,
    pub failed: usize,
}

/// Pending → PreScheduling (min children) → Scheduling → Scheduled (min bound) → Running
/// (min running or done) → Finished (min succeeded); Failed when too many failed to
/// ever reach min.
fn phase(min: usize, children: usize, f: &Figures) -> &'static str {
    if min > 0 && f.succeeded >= min {
        "Finished"
    } else if f.running + f.succeeded >= min && f.running + f.succeeded > 0 {
        "Running"
    } else if children.saturating_sub(f.failed) < min && f.failed > 0 {
        "Failed"
    } else if f.scheduled >= min && f.scheduled > 0 {
        "Scheduled"
    } else if f.scheduled > 0 {
        "Scheduling"
    } else if children >= min && children > 0 {
        "PreScheduling"
    } else {
        "Pending"
    }
}

pub fn figures(cluster: &ClusterState) -> BTreeMap<String, Figures> {
    let mut out = BTreeMap::new();
    for (id, g) in &cluster.gangs.gangs {
        let Some(spec) = g.spec.as_ref().filter(|_| g.from_pod_group) else {
            continue;
        };
        let (ns, name) = id.split_once('/').unwrap_or(("", id));
        let count = |f: fn(&crate::scheduler::framework::gangs::Child) -> bool| {
            g.children.values().filter(|c| f(c)).count()
        };
        let mut f = Figures {
            namespace: ns.to_string(),
            name: name.to_string(),
            phase: "Pending",
            scheduled: count(|c| c.bound),
            running: count(|c| c.running),
            succeeded: count(|c| c.succeeded),
            failed: count(|c| c.failed),
        };
        f.phase = phase(spec.min, g.children.len(), &f);
        out.insert(id.clone(), f);
    }
    out
}

pub fn version(cluster: &ClusterState) -> Option<u64> {
    cluster.gangs.enabled().then_some(cluster.gangs.version)
}

pub fn patch(f: &Figures) -> Value {
    json!({"status": {"phase": f.phase, "scheduled": f.scheduled, "running": f.running,
        "succeeded": f.succeeded, "failed": f.failed}})
}
