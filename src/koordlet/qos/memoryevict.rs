//! memoryevict, BEMemoryEvict (`pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict.go`): when node memory use reaches
//! `memoryEvictThresholdPercent` of capacity, evict BE pods until use would fall to
//! `memoryEvictLowerPercent` (default threshold − 2). Pure decision.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::pick::be_pod;

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
