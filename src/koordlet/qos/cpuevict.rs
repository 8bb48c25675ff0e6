//! cpuevict, BECPUEvict (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`): when BE pods get too little of the CPU they
//! requested (satisfaction = limit / request) while using nearly all of it, evict BE pods
//! until satisfaction would reach the upper bound. Pure decision.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::pick::be_pod;
use crate::api::extension::resources::BATCH_CPU;
use crate::api::pod::pod_requests;

pub const FEATURE: &str = "BECPUEvict";

/// BE CPU figures (milli-cores) over a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeCpu {
    pub usage: f64,
    pub request: f64,
    pub limit: f64,
}

/// The satisfaction bounds; Koordinator requires lower ∈ (0, 60], upper ∈ (0, 100),
/// upper ≥ lower.
pub fn bounds_valid(lower: i64, upper: i64) -> bool {
    lower > 0 && lower <= 60 && upper > 0 && upper < 100 && upper >= lower
}

/// "Usage high": the limit is under one core, or usage/limit ≥ threshold%.
pub fn usage_high(b: &BeCpu, threshold_percent: i64) -> bool {
    b.limit < 1000.0 || (b.limit > 0.0 && b.usage / b.limit >= threshold_percent as f64 / 100.0)
}

/// milli-cores of BE requests to release, or `None` when satisfaction is fine.
pub fn release(b: &BeCpu, lower: i64, upper: i64, usage_threshold: i64) -> Option<f64> {
    if b.request <= 0.0 || !usage_high(b, usage_threshold) {
        return None;
    }
    let s = b.limit / b.request;
    (s <= lower as f64 / 100.0).then(|| b.request * (upper as f64 / 100.0 - s))
}

#[derive(Debug, Clone)]
pub struct Candidate {
    pub key: String,
    pub uid: String,
    pub priority: Option<i32>,
    /// batch-cpu request (milli), what evicting the pod releases.
    pub request: i64,
    pub used: f64,
}

pub fn candidate(pod: &Pod, used_milli: Option<f64>) -> Option<Candidate> {
    let (key, uid, priority) = be_pod(pod, FEATURE)?;
    let request = pod_requests(pod).get(BATCH_CPU).copied().unwrap_or(0);
    Some(Candidate {
        key,
        uid,
        priority,
        request,
        used: used_milli.unwrap_or(0.0),
    })
}

/// Lower priority first, then higher usage per requested CPU.
pub fn victims(mut c: Vec<Candidate>, release: f64, skip: &BTreeSet<String>) -> Vec<Candidate> {
    let ratio = |x: &Candidate| {
        if x.request > 0 {
            x.used / x.request as f64
        } else {
            0.0
        }
    };
    c.sort_by(|a, b| {
        a.priority.unwrap_or(0).cmp(&b.priority.unwrap_or(0)).then(
            ratio(b)
                .partial_cmp(&ratio(a))
                .unwrap_or(std::cmp::Ordering::Equal),
        )
    });
    super::pick::take_until(c, release, |x| x.request as f64, |x| &x.uid, skip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn satisfaction_rule() {
        assert!(
            bounds_valid(40, 60)
                && !bounds_valid(70, 80)
                && !bounds_valid(50, 40)
                && !bounds_valid(0, 50)
        );
        // BE asked 10 cores, may use 3 (suppressed) and uses 2.9: satisfaction 0.3 ≤ 0.4 →
        // release 10 × (0.6 − 0.3) = 3 cores of requests.
        let starved = BeCpu {
            usage: 2900.0,
            request: 10_000.0,
            limit: 3000.0,
        };
        assert_eq!(
            release(&starved, 40, 60, 90).map(|r| r.round()),
            Some(3000.0)
        );
        let idle = BeCpu {
            usage: 1000.0,
            ..starved
        };
        assert_eq!(release(&idle, 40, 60, 90), None, "not using what it has");
        let fine = BeCpu {
            limit: 5000.0,
            usage: 4900.0,
            ..starved
        };
        assert_eq!(release(&fine, 40, 60, 90), None, "satisfaction 0.5 > 0.4");
        let tiny = BeCpu {
            usage: 10.0,
            request: 4000.0,
            limit: 500.0,
        };
        assert!(
            release(&tiny, 40, 60, 90).is_some(),
            "under one core counts as high usage"
        );
    }

    #[test]
    fn victims_by_priority_then_usage_ratio() {
        let pod = |n: &str, prio: i32, req: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": n, "namespace": "d", "uid": n, "labels": {"koordinator.sh/qosClass": "BE"}},
                "spec": {"priority": prio, "containers": [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": req}}}]}})).unwrap()
        };
        let c = vec![
            candidate(&pod("a", 5000, "2000"), Some(1000.0)).unwrap(),
            candidate(&pod("b", 5000, "1000"), Some(900.0)).unwrap(),
            candidate(&pod("c", 3000, "1000"), Some(10.0)).unwrap(),
        ];
        let v = victims(c, 1500.0, &BTreeSet::new());
        assert_eq!(
            v.iter().map(|x| x.uid.as_str()).collect::<Vec<_>>(),
            ["c", "b"]
        );
    }
}
