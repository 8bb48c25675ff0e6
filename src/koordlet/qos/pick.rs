//! What the eviction strategies share when they pick victims: which pods a strategy may
//! evict (QoS class and the pod's eviction policy), how much to release, and taking sorted
//! candidates until enough is freed.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use crate::api::extension::keys::ANNOTATION_EVICTION_POLICY;
use crate::api::extension::qos::{QoSClass, pod_qos_class};

/// Whether the pod's `koordinator.sh/eviction-policy` (a JSON list of feature names)
/// allows `feature`; absent = any feature, malformed = none.
pub fn policy_allows(pod: &Pod, feature: &str) -> bool {
    match pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_EVICTION_POLICY))
    {
        None => true,
        Some(raw) => {
            serde_json::from_str::<Vec<String>>(raw).is_ok_and(|l| l.iter().any(|f| f == feature))
        }
    }
}

/// (key, uid, spec.priority) of a BE pod whose eviction policy allows `feature`.
pub fn be_pod(pod: &Pod, feature: &str) -> Option<(String, String, Option<i32>)> {
    if pod_qos_class(pod) != QoSClass::Be || !policy_allows(pod, feature) {
        return None;
    }
    let m = &pod.metadata;
    let key = format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or("")
    );
    Some((
        key,
        m.uid.clone().unwrap_or_default(),
        pod.spec.as_ref().and_then(|s| s.priority),
    ))
}

/// Release = capacity × (pct − lower)/100 once pct ≥ threshold (lower default threshold − 2).
pub fn release(
    capacity: i64,
    used: i64,
    threshold: Option<i64>,
    lower: Option<i64>,
) -> Option<i64> {
    let t = threshold?;
    if capacity <= 0 {
        return None;
    }
    let pct = used * 100 / capacity;
    (pct >= t).then(|| capacity * (pct - lower.unwrap_or(t - 2)) / 100)
}

/// Takes `sorted` candidates until what they free covers `release`; candidates in `skip`
/// (evicted moments ago) count towards it but are not returned again.
pub fn take_until<T>(
    sorted: Vec<T>,
    release: f64,
    frees: impl Fn(&T) -> f64,
    uid: impl Fn(&T) -> &str,
    skip: &BTreeSet<String>,
) -> Vec<T> {
    let mut freed = 0.0;
    let mut out = Vec::new();
    for x in sorted {
        if freed >= release {
            break;
        }
        freed += frees(&x);
        if !skip.contains(uid(&x)) {
            out.push(x);
        }
    }
    out
}
