//! The eviction strategies' rounds (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`, `memoryevict/memory_evict.go`): decide with the pure
//! functions, then evict the victims through the shared [`Evictor`].

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

pub use super::evictor::{Evictor, node_event};
use crate::koordlet::informer::States;

fn pod_by_uid<'a>(states: &'a States, uid: &str) -> Option<&'a Pod> {
    states.pods.iter().find(|p| p.uid == uid).map(|p| &*p.pod)
}

/// Evicts `uid` (if it is still on the node) and says whether it went.
async fn evict_uid(
    client: &kube::Client,
    evictor: &Evictor,
    states: &States,
    uid: &str,
    feature: &str,
    msg: &str,
) -> bool {
    let node = states
        .node
        .as_ref()
        .and_then(|n| n.metadata.name.as_deref())
        .unwrap_or_default();
    match pod_by_uid(states, uid) {
        Some(pod) => evictor.evict(client, pod, node, feature, msg).await,
        None => false,
    }
}

/// One BEMemoryEvict round: evicts BE pods when node memory crosses the threshold.
/// `node_used` and `pod_used` are bytes; returns the keys evicted.
pub async fn memory_pass(
    client: &kube::Client,
    evictor: &Evictor,
    states: &States,
    node_used: Option<i64>,
    pod_used: &HashMap<String, i64>,
) -> Vec<String> {
    use super::memoryevict::{candidate, release, victims};
    let strategy = super::suppress::strategy(states);
    if strategy.enable != Some(true) {
        return Vec::new();
    }
    let Some(node) = states.node.as_ref() else {
        return Vec::new();
    };
    let capacity = node
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("memory"))
        .map(crate::api::quantity::q_value)
        .unwrap_or(0);
    let threshold = strategy.memory_evict_threshold_percent.unwrap_or(70);
    let Some(used) = node_used else {
        return Vec::new();
    };
    let Some(to_release) = release(
        capacity,
        used,
        threshold,
        strategy.memory_evict_lower_percent,
    ) else {
        return Vec::new();
    };
    let cands = states
        .pods
        .iter()
        .filter_map(|p| candidate(&p.pod, pod_used.get(&p.uid).copied()))
        .collect();
    let pct = used * 100 / capacity.max(1);
    let mut out = Vec::new();
    for v in victims(cands, to_release, &evictor.recent()) {
        let msg = format!(
            "node memory usage {pct}% reached the threshold {threshold}%; evicting BE pods to release {to_release} bytes"
        );
        if evict_uid(client, evictor, states, &v.uid, "BEMemoryEvict", &msg).await {
            out.push(v.key);
        }
    }
    out
}

/// BE CPU (usage, request, limit) averaged over a window; `None` when the samples cover
/// less than a third of it.
pub type BeCpuWindow = Option<super::cpuevict::BeCpu>;

/// One BECPUEvict round (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`): `window` is the averaged BE CPU over the configured
/// window, `last` the newest values; `pod_used` milli-cores. Returns the keys evicted.
pub async fn cpu_pass(
    client: &kube::Client,
    evictor: &Evictor,
    states: &States,
    window: BeCpuWindow,
    last: BeCpuWindow,
    pod_used: &HashMap<String, f64>,
) -> Vec<String> {
    use super::cpuevict::{bounds_valid, candidate, release, usage_high, victims};
    let s = super::suppress::strategy(states);
    let (Some(lower), Some(upper)) = (
        s.cpu_evict_be_satisfaction_lower_percent,
        s.cpu_evict_be_satisfaction_upper_percent,
    ) else {
        return Vec::new();
    };
    if s.enable != Some(true) || !bounds_valid(lower, upper) {
        return Vec::new();
    }
    let threshold = s.cpu_evict_be_usage_threshold_percent.unwrap_or(90);
    let by_allocatable = s.cpu_evict_policy.as_deref() == Some("evictByAllocatable");
    let allocatable = || {
        states
            .node
            .as_ref()
            .and_then(|n| n.status.as_ref())
            .and_then(|st| st.allocatable.as_ref())
            .and_then(|a| a.get(crate::api::extension::resources::BATCH_CPU))
            .map(crate::api::quantity::q_value)
            .filter(|v| *v > 0)
            .unwrap_or(1) as f64
    };
    let adjust = |b: super::cpuevict::BeCpu| {
        if by_allocatable {
            super::cpuevict::BeCpu {
                limit: allocatable(),
                ..b
            }
        } else {
            b
        }
    };
    let (Some(w), Some(l)) = (window.map(adjust), last.map(adjust)) else {
        return Vec::new();
    };
    let Some(mut to_release) = release(&w, lower, upper, threshold) else {
        return Vec::new();
    };
    if !usage_high(&l, threshold) {
        return Vec::new();
    }
    if (l.request, l.limit) != (w.request, w.limit)
        && let Some(r) = release(&l, lower, upper, threshold)
    {
        to_release = to_release.min(r);
    }
    let cands = states
        .pods
        .iter()
        .filter_map(|p| candidate(&p.pod, pod_used.get(&p.uid).copied()))
        .collect();
    let mut out = Vec::new();
    for v in victims(cands, to_release, &evictor.recent()) {
        let msg = format!(
            "BE CPU satisfaction {:.0}% is at or below {lower}% while BE pods use {:.0}% of their limit; releasing {:.0} milli-cores of batch-cpu requests",
            w.limit / w.request * 100.0,
            w.usage / w.limit.max(1.0) * 100.0,
            to_release
        );
        if evict_uid(client, evictor, states, &v.uid, "BECPUEvict", &msg).await {
            out.push(v.key);
        }
    }
    out
}

/// One CPUEvict or MemoryEvict round: `node_used`/`pod_used` in milli-cores (CPU) or
/// bytes (memory), `capacity` likewise. Returns the keys evicted.
#[allow(clippy::too_many_arguments)]
pub async fn usage_pass(
    client: &kube::Client,
    evictor: &Evictor,
    states: &States,
    feature: &str,
    capacity: i64,
    node_used: Option<i64>,
    pod_used: &HashMap<String, i64>,
) -> Vec<String> {
    use super::pick::release;
    use super::usageevict::{candidate, victims};
    let s = super::suppress::strategy(states);
    if s.enable != Some(true) {
        return Vec::new();
    }
    let (threshold, lower) = if feature == "CPUEvict" {
        (s.cpu_evict_threshold_percent, s.cpu_evict_lower_percent)
    } else {
        (
            s.memory_evict_threshold_percent,
            s.memory_evict_lower_percent,
        )
    };
    let Some(used) = node_used else {
        return Vec::new();
    };
    let Some(to_release) = release(capacity, used, threshold, lower) else {
        return Vec::new();
    };
    let cands = states
        .pods
        .iter()
        .filter_map(|p| {
            candidate(
                &p.pod,
                feature,
                s.evict_enabled_priority_threshold,
                pod_used.get(&p.uid).copied().unwrap_or(0),
            )
        })
        .collect();
    let pct = used * 100 / capacity.max(1);
    let mut out = Vec::new();
    for v in victims(cands, to_release, &evictor.recent()) {
        let msg = format!(
            "node usage {pct}% reached the {feature} threshold {}%",
            threshold.unwrap_or(0)
        );
        if evict_uid(client, evictor, states, &v.uid, feature, &msg).await {
            out.push(v.key);
        }
    }
    out
}

/// One CPUAllocatableEvict (`cpu`) or MemoryAllocatableEvict round (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`, `memoryevict/memory_evict.go`):
/// per over-committed batch/mid account, evict opted-in pods charged to it. Returns the
/// keys evicted.
pub async fn allocatable_pass(
    client: &kube::Client,
    evictor: &Evictor,
    states: &States,
    cpu: bool,
) -> Vec<String> {
    use super::allocatableevict::{charged, settings, tasks};
    use super::usageevict::{candidate, victims};
    let s = super::suppress::strategy(states);
    let feature = if cpu {
        "CPUAllocatableEvict"
    } else {
        "MemoryAllocatableEvict"
    };
    if s.enable != Some(true) {
        return Vec::new();
    }
    let st = match settings(s, cpu) {
        Ok(st) => st,
        Err(e) => {
            tracing::debug!(feature, reason = %e, "skipped: invalid settings");
            return Vec::new();
        }
    };
    let Some(node) = states.node.as_ref() else {
        return Vec::new();
    };
    let empty = Default::default();
    let alloc = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .unwrap_or(&empty);
    let pods: Vec<&Pod> = states
        .pods
        .iter()
        .map(|p| &*p.pod)
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded") | Some("Failed"))
        })
        .collect();
    let mut skip = evictor.recent();
    let mut out = Vec::new();
    for t in tasks(&pods, alloc, cpu, &st) {
        let cands = pods
            .iter()
            .filter_map(|p| {
                let (res, req) = charged(p, cpu)?;
                (res == t.resource).then_some(())?;
                candidate(p, feature, Some(st.priority_threshold), req)
            })
            .collect();
        let msg = format!(
            "{} requested {} of {} allocatable ({}% > {}%); releasing {}",
            t.resource,
            t.requested,
            t.allocatable,
            t.requested * 100 / t.allocatable.max(1),
            st.threshold,
            t.release
        );
        for v in victims(cands, t.release, &skip) {
            if evict_uid(client, evictor, states, &v.uid, feature, &msg).await {
                skip.insert(v.uid.clone());
                out.push(v.key);
            }
        }
    }
    out
}
