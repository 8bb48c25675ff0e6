//! cpuevict, BECPUEvict (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`): when BE pods get too little of the CPU they
//! requested (satisfaction = limit / request) while using nearly all of it, evict BE pods
//! until satisfaction would reach the upper bound. The pure decision, then the round and its registry `ENTRY`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::context::{LAST, QosCtx, count, last_cpu, now_ms};
use super::evictor::{Evictor, evict_uid};
use super::pick::be_pod;
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::resources::BATCH_CPU;
use crate::api::pod::pod_requests;
use crate::koordlet::features;
use crate::koordlet::informer::States;
use crate::koordlet::store::SeriesKey;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

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

/// BE CPU (usage, request, limit) averaged over a window; `None` when the samples cover
/// less than a third of it.
pub type BeCpuWindow = Option<BeCpu>;

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
    let s = &states.slo().threshold;
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
    let adjust = |b: BeCpu| {
        if by_allocatable {
            BeCpu {
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

/// Averages of the BE CPU series over `[from, now]`; `None` when they cover less than
/// `min_span_ms`.
fn be_cpu(ctx: &QosCtx, from: i64, now: i64, min_span_ms: i64, last: bool) -> Option<BeCpu> {
    let get = |alloc: &str| {
        let a = ctx
            .store
            .aggregate(&SeriesKey::be_cpu(alloc), from, now)
            .ok()
            .flatten()?;
        (a.span_ms >= min_span_ms).then_some(if last { a.last } else { a.avg })
    };
    Some(BeCpu {
        usage: get("usage")?,
        request: get("request")?,
        limit: get("real-limit")?,
    })
}

/// BECPUEvict every second, 20 s of cool-down after an eviction (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`).
pub struct CpuEvict {
    pub client: kube::Client,
    pub evictor: Arc<Evictor>,
    pub collect_interval: Duration,
}

impl Strategy for CpuEvict {
    fn name(&self) -> &'static str {
        "cpuevict"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let s = &states.slo().threshold;
            let window =
                Duration::from_secs(s.cpu_evict_time_window_seconds.unwrap_or(0).max(0) as u64)
                    .max(self.collect_interval);
            let now = now_ms();
            let w_ms = window.as_millis() as i64;
            let avg = be_cpu(ctx, now - w_ms, now, w_ms / 3, false);
            let last = be_cpu(ctx, now - LAST, now, 0, true);
            let (_, pods) = last_cpu(ctx, states);
            let used = pods.into_iter().map(|(k, v)| (k, v as f64)).collect();
            let evicted = cpu_pass(&self.client, &self.evictor, states, avg, last, &used).await;
            if !evicted.is_empty() {
                count(ctx, "cpuevict", "eviction".into(), evicted.len() as u64);
            }
            Round::cool_down_if(!evicted.is_empty(), 20)
        }
        .boxed()
    }
}

/// BECPUEvict.
pub const ENTRY: Entry = Entry {
    gate: features::BECPU_EVICT,
    build: |d| {
        Box::new(CpuEvict {
            client: d.client.clone(),
            evictor: d.evictor.clone(),
            collect_interval: d.collect_interval,
        })
    },
};

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
