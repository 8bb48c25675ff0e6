//! CPUEvict and MemoryEvict (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`, `memoryevict/memory_evict.go`): when node CPU or memory use
//! reaches its threshold, evict pods that opted in — label
//! `koordinator.sh/eviction-enabled: "true"`, priority value ≤
//! `evictEnabledPriorityThreshold`, allowed by `koordinator.sh/eviction-policy` — in order of
//! annotation `koordinator.sh/eviction-priority`, priority, label `koordinator.sh/priority`,
//! then usage (largest first), until their usage covers the release. The pure decision, then the round and its registry `ENTRY`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::context::{QosCtx, count, last_cpu, last_memory, now_ms};
use super::evictor::{Evictor, evict_uid};
use super::pick::release;
use super::pick::{policy_allows, take_until};
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::keys::{
    ANNOTATION_EVICTION_PRIORITY, LABEL_EVICTION_ENABLED, LABEL_POD_PRIORITY,
};
use crate::koordlet::features;
use crate::koordlet::informer::States;
use crate::koordlet::store::{MetricKind, SeriesKey};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct Candidate {
    pub key: String,
    pub uid: String,
    sort: (i64, i32, i64),
    pub used: i64,
}

/// A pod that opted into usage eviction for `feature`, with its usage.
pub fn candidate(
    pod: &Pod,
    feature: &str,
    priority_threshold: Option<i32>,
    used: i64,
) -> Option<Candidate> {
    let m = &pod.metadata;
    let label = |k: &str| m.labels.as_ref().and_then(|l| l.get(k)).map(String::as_str);
    if label(LABEL_EVICTION_ENABLED) != Some("true") || !policy_allows(pod, feature) {
        return None;
    }
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    if priority_threshold.is_none_or(|t| priority > t) {
        return None;
    }
    let ann_prio = m
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_EVICTION_PRIORITY))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let sub = label(LABEL_POD_PRIORITY)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some(Candidate {
        key: format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or("")
        ),
        uid: m.uid.clone().unwrap_or_default(),
        sort: (ann_prio, priority, sub),
        used,
    })
}

pub fn victims(mut c: Vec<Candidate>, release: i64, skip: &BTreeSet<String>) -> Vec<Candidate> {
    c.sort_by(|a, b| a.sort.cmp(&b.sort).then(b.used.cmp(&a.used)));
    take_until(c, release as f64, |x| x.used as f64, |x| &x.uid, skip)
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
    let s = &states.slo().threshold;
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

/// CPUEvict / MemoryEvict every second (opted-in pods, by node usage); cool-down 20 s
/// (CPU) or 4 s (memory) after an eviction.
pub struct UsageEvict {
    pub client: kube::Client,
    pub evictor: Arc<Evictor>,
    /// `CPUEvict` or `MemoryEvict`.
    pub feature: &'static str,
}

impl Strategy for UsageEvict {
    fn name(&self) -> &'static str {
        if self.feature == "CPUEvict" {
            "cpuevict"
        } else {
            "memoryevict"
        }
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let (feature, cpu) = (self.feature, self.feature == "CPUEvict");
            let capacity = states
                .node
                .as_ref()
                .and_then(|n| n.status.as_ref())
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get(if cpu { "cpu" } else { "memory" }))
                .map(|q| {
                    if cpu {
                        crate::api::quantity::q_milli(q)
                    } else {
                        crate::api::quantity::q_value(q)
                    }
                })
                .unwrap_or(0);
            let (node, pods) = if cpu {
                let s = &states.slo().threshold;
                let w = s.cpu_evict_time_window_seconds.unwrap_or(1).max(1) * 1000;
                let now = now_ms();
                let avg = ctx
                    .store
                    .aggregate(&SeriesKey::node(MetricKind::NodeCpuUsage), now - w, now)
                    .ok()
                    .flatten()
                    .filter(|a| a.span_ms >= w / 3)
                    .map(|a| (a.avg * 1000.0).round() as i64);
                (avg, last_cpu(ctx, states).1)
            } else {
                last_memory(ctx, states)
            };
            let (client, evictor) = (&self.client, &self.evictor);
            let evicted = usage_pass(client, evictor, states, feature, capacity, node, &pods).await;
            if !evicted.is_empty() {
                count(ctx, feature, "eviction".into(), evicted.len() as u64);
            }
            Round::cool_down_if(!evicted.is_empty(), if cpu { 20 } else { 4 })
        }
        .boxed()
    }
}

/// CPUEvict.
pub const CPU: Entry = Entry {
    gate: features::CPU_EVICT,
    build: |d| {
        Box::new(UsageEvict {
            client: d.client.clone(),
            evictor: d.evictor.clone(),
            feature: "CPUEvict",
        })
    },
};

/// MemoryEvict.
pub const MEMORY: Entry = Entry {
    gate: features::MEMORY_EVICT,
    build: |d| {
        Box::new(UsageEvict {
            client: d.client.clone(),
            evictor: d.evictor.clone(),
            feature: "MemoryEvict",
        })
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::koordlet::qos::pick::release;
    use serde_json::json;

    fn pod(name: &str, prio: i32, opted: bool, ann_prio: Option<&str>) -> Pod {
        let mut labels = json!({});
        if opted {
            labels[LABEL_EVICTION_ENABLED] = "true".into();
        }
        let mut p = json!({"metadata": {"name": name, "namespace": "d", "uid": name, "labels": labels}, "spec": {"priority": prio, "containers": [{"name": "c"}]}});
        if let Some(a) = ann_prio {
            p["metadata"]["annotations"] = json!({ANNOTATION_EVICTION_PRIORITY: a});
        }
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn opt_in_threshold_and_order() {
        assert!(
            candidate(&pod("no", 100, false, None), "MemoryEvict", Some(9999), 1).is_none(),
            "not opted in"
        );
        assert!(
            candidate(&pod("hi", 9500, true, None), "MemoryEvict", Some(7999), 1).is_none(),
            "above the priority threshold"
        );
        assert!(
            candidate(&pod("x", 100, true, None), "MemoryEvict", None, 1).is_none(),
            "no threshold configured: nobody"
        );
        let c = vec![
            candidate(&pod("a", 5000, true, None), "CPUEvict", Some(7999), 300).unwrap(),
            candidate(
                &pod("b", 5000, true, Some("-1")),
                "CPUEvict",
                Some(7999),
                100,
            )
            .unwrap(),
            candidate(&pod("c", 3000, true, None), "CPUEvict", Some(7999), 50).unwrap(),
        ];
        let v = victims(c, 120, &BTreeSet::new());
        assert_eq!(
            v.iter().map(|x| x.uid.as_str()).collect::<Vec<_>>(),
            ["b", "c"],
            "eviction-priority first, then priority"
        );
        assert_eq!(
            release(16_000, 12_800, Some(75), None),
            Some(16_000 * 7 / 100)
        );
        assert_eq!(release(16_000, 10_000, Some(75), None), None);
        assert_eq!(release(16_000, 15_000, None, None), None);
    }
}
