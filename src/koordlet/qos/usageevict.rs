//! CPUEvict and MemoryEvict (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`, `memoryevict/memory_evict.go`): when node CPU or memory use
//! reaches its threshold, evict pods that opted in — label
//! `koordinator.sh/eviction-enabled: "true"`, priority value ≤
//! `evictEnabledPriorityThreshold`, allowed by `koordinator.sh/eviction-policy` — in order of
//! annotation `koordinator.sh/eviction-priority`, priority, label `koordinator.sh/priority`,
//! then usage (largest first), until their usage covers the release. Pure decision.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::pick::{policy_allows, take_until};
use crate::api::extension::keys::{
    ANNOTATION_EVICTION_PRIORITY, LABEL_EVICTION_ENABLED, LABEL_POD_PRIORITY,
};

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
