//! Eviction through the Eviction API (koordlet spec §4.4, API mode): a Warning event with
//! the reason on the pod, and each pod UID remembered for 2 minutes so a pod whose
//! deletion is in progress is not evicted again. Only ever called for BE candidates.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::{EvictParams, PostParams};

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
                let now = Time(k8s_openapi::jiff::Timestamp::now());
                let event = Event {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("{name}.")),
                        namespace: Some(ns.into()),
                        ..Default::default()
                    },
                    involved_object: ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Pod".into()),
                        name: Some(name.into()),
                        namespace: Some(ns.into()),
                        uid: Some(uid.into()),
                        ..Default::default()
                    },
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    type_: Some("Warning".into()),
                    source: Some(EventSource {
                        component: Some("koordlet".into()),
                        host: Some(node.into()),
                    }),
                    first_timestamp: Some(now.clone()),
                    last_timestamp: Some(now),
                    count: Some(1),
                    ..Default::default()
                };
                let _ = Api::<Event>::namespaced(client.clone(), ns)
                    .create(&PostParams::default(), &event)
                    .await;
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
