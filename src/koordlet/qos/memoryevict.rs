//! memoryevict, BEMemoryEvict (`pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict.go`): when node memory use reaches
//! `memoryEvictThresholdPercent` of capacity, evict BE pods until use would fall to
//! `memoryEvictLowerPercent` (default threshold − 2). The pure decision, then the round and its registry `ENTRY`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::context::{QosCtx, count, last_memory};
use super::evictor::{Evictor, evict_uid};
use super::pick::be_pod;
use super::runner::{Entry, Round, Strategy};
use crate::koordlet::features;
use crate::koordlet::informer::States;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Arc;

pub const FEATURE: &str = "BEMemoryEvict";

/// Bytes to release, or `None` below the threshold.
pub fn release(capacity: i64, used: i64, threshold: i64, lower: Option<i64>) -> Option<i64> {
    super::pick::release(capacity, used, Some(threshold), lower)
}

/// A BE pod that may be evicted, with its measured memory (bytes; `None` = no metric).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub key: String,
    pub uid: String,
    pub priority: Option<i32>,
    pub used: Option<i64>,
}

pub fn candidate(pod: &Pod, used: Option<i64>) -> Option<Candidate> {
    let (key, uid, priority) = be_pod(pod, FEATURE)?;
    Some(Candidate {
        key,
        uid,
        priority,
        used,
    })
}

/// Koordinator's order: lower priority first (when both set and differ), then more memory
/// first; pods without a metric last, ties by name descending.
pub fn order(c: &mut [Candidate]) {
    c.sort_by(|a, b| {
        if let (Some(x), Some(y)) = (a.priority, b.priority)
            && x != y
        {
            return x.cmp(&y);
        }
        match (a.used, b.used) {
            (Some(x), Some(y)) if x != y => y.cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            _ => b.key.cmp(&a.key),
        }
    });
}

/// Victims in order until their memory covers `release`; `skip` were evicted already
/// (their memory still counts).
pub fn victims(mut cands: Vec<Candidate>, release: i64, skip: &BTreeSet<String>) -> Vec<Candidate> {
    order(&mut cands);
    super::pick::take_until(
        cands,
        release as f64,
        |c| c.used.unwrap_or(0) as f64,
        |c| &c.uid,
        skip,
    )
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
    let strategy = &states.slo().threshold;
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

/// BEMemoryEvict every second, 4 s of cool-down after an eviction (`pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict.go`).
pub struct MemoryEvict {
    pub client: kube::Client,
    pub evictor: Arc<Evictor>,
}

impl Strategy for MemoryEvict {
    fn name(&self) -> &'static str {
        "memoryevict"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let (node, pods) = last_memory(ctx, states);
            let evicted = memory_pass(&self.client, &self.evictor, states, node, &pods).await;
            if !evicted.is_empty() {
                count(ctx, "memoryevict", "eviction".into(), evicted.len() as u64);
            }
            Round::cool_down_if(!evicted.is_empty(), 4)
        }
        .boxed()
    }
}

/// BEMemoryEvict.
pub const ENTRY: Entry = Entry {
    gate: features::BE_MEMORY_EVICT,
    build: |d| {
        Box::new(MemoryEvict {
            client: d.client.clone(),
            evictor: d.evictor.clone(),
        })
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extension::keys::ANNOTATION_EVICTION_POLICY;
    use serde_json::json;

    fn pod(name: &str, qos: &str, prio: Option<i32>, policy: Option<&str>) -> Pod {
        let mut p = json!({"metadata": {"name": name, "namespace": "d", "uid": name, "labels": {"koordinator.sh/qosClass": qos}},
            "spec": {"priority": prio, "containers": [{"name": "c"}]}});
        if let Some(pol) = policy {
            p["metadata"]["annotations"] = json!({ANNOTATION_EVICTION_POLICY: pol});
        }
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn threshold_and_release() {
        let gib = 1 << 30;
        assert_eq!(release(100 * gib, 69 * gib, 70, None), None);
        assert_eq!(
            release(100 * gib, 70 * gib, 70, None),
            Some(2 * gib),
            "down to 68 %"
        );
        assert_eq!(release(100 * gib, 75 * gib, 70, Some(60)), Some(15 * gib));
        assert_eq!(release(0, 5, 70, None), None);
    }

    #[test]
    fn candidates_order_and_victims() {
        assert!(
            candidate(&pod("ls", "LS", None, None), Some(1)).is_none(),
            "only BE pods"
        );
        assert!(candidate(&pod("x", "BE", None, Some("[\"BECPUEvict\"]")), Some(1)).is_none());
        assert!(
            candidate(&pod("y", "BE", None, Some("oops")), Some(1)).is_none(),
            "malformed policy: never"
        );
        assert!(candidate(&pod("z", "BE", None, Some("[\"BEMemoryEvict\"]")), Some(1)).is_some());
        let c = |n: &str, prio: Option<i32>, used: Option<i64>| {
            candidate(&pod(n, "BE", prio, None), used).unwrap()
        };
        let mut list = vec![
            c("a", Some(5000), Some(100)),
            c("b", Some(3000), Some(10)),
            c("c", Some(5000), Some(300)),
            c("d", Some(5000), None),
            c("e", None, None),
        ];
        order(&mut list);
        let names: Vec<&str> = list.iter().map(|x| x.uid.as_str()).collect();
        assert_eq!(names, ["b", "c", "a", "e", "d"]);
        let v = victims(list, 200, &BTreeSet::new());
        assert_eq!(
            v.iter().map(|x| x.uid.as_str()).collect::<Vec<_>>(),
            ["b", "c"],
            "10 + 300 ≥ 200"
        );
        let mut again = vec![c("a", Some(5000), Some(100)), c("c", Some(5000), Some(300))];
        order(&mut again);
        let v = victims(again, 350, &BTreeSet::from(["c".to_string()]));
        assert_eq!(
            v.iter().map(|x| x.uid.as_str()).collect::<Vec<_>>(),
            ["a"],
            "c already evicted, its memory counts"
        );
    }
}
