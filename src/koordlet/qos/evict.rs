//! Eviction through the Eviction API (koordlet spec §4.4, API mode): a Warning event with
//! the reason on the pod, and each pod UID remembered for 2 minutes so a pod whose
//! deletion is in progress is not evicted again. Only ever called for BE candidates.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Api;
use kube::api::EvictParams;

use crate::kernel::events;

const REMEMBER: Duration = Duration::from_secs(120);

#[derive(Default)]
pub struct Evictor {
    recent: Mutex<HashMap<String, Instant>>,
}

impl Evictor {
    /// Pod UIDs evicted in the last 2 minutes.
    pub fn recent(&self) -> std::collections::BTreeSet<String> {
        let mut g = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        g.retain(|_, at| at.elapsed() < REMEMBER);
        g.keys().cloned().collect()
    }

    /// Evicts `namespace/name` (uid `uid`) for `reason`; true when the API accepted it.
    pub async fn evict(
        &self,
        client: &kube::Client,
        key: &str,
        uid: &str,
        node: &str,
        reason: &str,
        message: &str,
    ) -> bool {
        let Some((ns, name)) = key.split_once('/') else {
            return false;
        };
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        match api.evict(name, &EvictParams::default()).await {
            Ok(_) => {
                self.recent
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(uid.to_string(), Instant::now());
                let involved = ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(name.into()),
                    namespace: Some(ns.into()),
                    uid: Some(uid.into()),
                    ..Default::default()
                };
                let event = events::event(
                    "koordlet",
                    Some(node),
                    involved,
                    ns,
                    "Warning",
                    reason,
                    message.to_string(),
                );
                events::record(client, &event).await;
                tracing::info!(pod = key, reason, message, "evicted");
                true
            }
            Err(e) => {
                tracing::warn!(pod = key, error = %e, "eviction refused");
                false
            }
        }
    }
}

/// A Normal event on the Node (cpusuppress changes).
pub async fn node_event(client: &kube::Client, node: &str, reason: &str, message: &str) {
    let involved = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.into()),
        ..Default::default()
    };
    let event = events::event(
        "koordlet",
        Some(node),
        involved,
        "default",
        "Normal",
        reason,
        message.to_string(),
    );
    events::record(client, &event).await;
}

/// One BEMemoryEvict round: evicts BE pods when node memory crosses the threshold.
/// `node_used` and `pod_used` are bytes; returns the keys evicted.
pub async fn memory_pass(
    client: &kube::Client,
    evictor: &Evictor,
    states: &crate::koordlet::informer::States,
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
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let pct = used * 100 / capacity.max(1);
    let mut out = Vec::new();
    for v in victims(cands, to_release, &evictor.recent()) {
        let msg = format!(
            "node memory usage {pct}% reached the threshold {threshold}%; evicting BE pods to release {to_release} bytes"
        );
        if evictor
            .evict(
                client,
                &v.key,
                &v.uid,
                &node_name,
                "EvictPodByNodeMemoryUsage",
                &msg,
            )
            .await
        {
            out.push(v.key);
        }
    }
    out
}

/// BE CPU (usage, request, limit) averaged over a window; `None` when the samples cover
/// less than a third of it.
pub type BeCpuWindow = Option<super::cpuevict::BeCpu>;

/// One BECPUEvict round (spec §4.2): `window` is the averaged BE CPU over the configured
/// window, `last` the newest values; `pod_used` milli-cores. Returns the keys evicted.
pub async fn cpu_pass(
    client: &kube::Client,
    evictor: &Evictor,
    states: &crate::koordlet::informer::States,
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
    let node = states
        .node
        .as_ref()
        .and_then(|n| n.metadata.name.clone())
        .unwrap_or_default();
    let mut out = Vec::new();
    for v in victims(cands, to_release, &evictor.recent()) {
        let msg = format!(
            "BE CPU satisfaction {:.0}% is at or below {lower}% while BE pods use {:.0}% of their limit; releasing {:.0} milli-cores of batch-cpu requests",
            w.limit / w.request * 100.0,
            w.usage / w.limit.max(1.0) * 100.0,
            to_release
        );
        if evictor
            .evict(
                client,
                &v.key,
                &v.uid,
                &node,
                "EvictPodByBECPUSatisfaction",
                &msg,
            )
            .await
        {
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
    states: &crate::koordlet::informer::States,
    feature: &str,
    capacity: i64,
    node_used: Option<i64>,
    pod_used: &HashMap<String, i64>,
) -> Vec<String> {
    use super::usageevict::{candidate, release, victims};
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
    let node = states
        .node
        .as_ref()
        .and_then(|n| n.metadata.name.clone())
        .unwrap_or_default();
    let pct = used * 100 / capacity.max(1);
    let mut out = Vec::new();
    for v in victims(cands, to_release, &evictor.recent()) {
        let msg = format!(
            "node usage {pct}% reached the {feature} threshold {}%",
            threshold.unwrap_or(0)
        );
        let reason = if feature == "CPUEvict" {
            "EvictPodByNodeCPUUsage"
        } else {
            "EvictPodByNodeMemoryUsage"
        };
        if evictor
            .evict(client, &v.key, &v.uid, &node, reason, &msg)
            .await
        {
            out.push(v.key);
        }
    }
    out
}
