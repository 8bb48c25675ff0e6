//! Estimation: what a pod will use (scaling factors over max(request, limit)), and a
//! node's estimated usage from its NodeMetric plus pods not yet reflected in it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::LoadAware;
use crate::api::extension::keys::ANNOTATION_NODE_RAW_ALLOCATABLE;
use crate::api::extension::priority::PriorityClass;
use crate::api::extension::resources::{BATCH_CPU, BATCH_MEMORY, CPU, MEMORY, translate};
use crate::api::pod::{Amounts, amounts};
use crate::scheduler::framework::metric::MetricInfo;
use crate::scheduler::framework::{NodeInfo, PodInfo};

const DEFAULT_MILLI_CPU: i64 = 250;
const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;

/// Node allocatable, with `node.koordinator.sh/raw-allocatable` entries overriding.
pub fn allocatable(node: &NodeInfo) -> std::borrow::Cow<'_, Amounts> {
    let raw = node
        .node
        .metadata
        .annotations
        .as_ref()
        .and_then(|m| m.get(ANNOTATION_NODE_RAW_ALLOCATABLE));
    type List = BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;
    match raw.and_then(|s| serde_json::from_str::<List>(s).ok()) {
        None => std::borrow::Cow::Borrowed(&node.allocatable),
        Some(list) => {
            let mut a = node.allocatable.clone();
            a.extend(amounts(Some(&list)));
            std::borrow::Cow::Owned(a)
        }
    }
}

/// The default estimator: per scaling-factor resource, max(request, limit) of the pod's
/// tier resource × factor / 100 (rounded, capped at the limit), or a default when unset.
pub fn estimate(factors: &BTreeMap<String, i64>, pod: &PodInfo) -> Amounts {
    let mut out = Amounts::new();
    for (res, factor) in factors {
        let tier = translate(res, pod.class);
        let req = pod.requests.get(tier).copied().unwrap_or(0);
        let limit = pod.limits.get(tier).copied().unwrap_or(0);
        let q = req.max(limit);
        let v = if q == 0 {
            match tier {
                CPU | BATCH_CPU => DEFAULT_MILLI_CPU,
                MEMORY | BATCH_MEMORY => DEFAULT_MEMORY,
                _ => 0,
            }
        } else {
            let e = (q as f64 * *factor as f64 / 100.0).round() as i64;
            if limit > 0 { e.min(limit) } else { e }
        };
        out.insert(res.clone(), v);
    }
    out
}

fn add(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

fn add_excess(into: &mut Amounts, e: &Amounts, u: Option<&Amounts>) {
    for (k, v) in e {
        let used = u.and_then(|u| u.get(k)).copied().unwrap_or(0);
        let slot = into.entry(k.clone()).or_insert(0);
        *slot = slot.saturating_add((v - used).max(0));
    }
}

/// What the pods on a node add to its NodeMetric (spec §2.4), summed.
#[derive(Debug, Clone, Default)]
pub struct PodSums {
    /// Σ max(0, estimate − usage) over pods the report cannot show fully yet.
    pub delta: Amounts,
    /// Σ estimate over all pods.
    pub estimated: Amounts,
    pub prod_usage: Amounts,
    pub prod_delta: Amounts,
}

/// Per node: (node generation, metric generation) → sums. Valid until either changes.
#[derive(Default)]
pub struct SumsCache(Mutex<HashMap<String, Cached>>);

/// (node generation, metric generation, sums).
type Cached = (u64, u64, std::sync::Arc<PodSums>);

fn pod_sums(la: &LoadAware, node: &NodeInfo, m: &MetricInfo) -> PodSums {
    let factors = &la.args.factors;
    let update = m.update_ms.unwrap_or(0);
    let mut s = PodSums::default();
    for p in &node.pods {
        let e = estimate(factors, p);
        let reported = m.pods.get(&p.key);
        let u = reported.map(|(u, _)| u);
        let deadline = la
            .args
            .seconds_after_scheduled
            .zip(p.scheduled_at_ms)
            .map(|(secs, t)| t + secs * 1000);
        let recent = p
            .scheduled_at_ms
            .is_some_and(|t| t > update - m.report_interval_ms);
        let estimating = u.is_none() || recent || deadline.is_some_and(|d| d > update);
        if estimating {
            add_excess(&mut s.delta, &e, u);
        }
        add(&mut s.estimated, &e);
        if p.class == PriorityClass::Prod {
            if reported.is_some_and(|(_, c)| c == PriorityClass::Prod.name()) {
                add(&mut s.prod_usage, u.unwrap_or(&Amounts::new()));
                if estimating {
                    add_excess(&mut s.prod_delta, &e, u);
                }
            } else {
                add(&mut s.prod_delta, &e);
            }
        }
    }
    s
}

impl SumsCache {
    fn get(&self, la: &LoadAware, node: &NodeInfo, m: &MetricInfo) -> std::sync::Arc<PodSums> {
        let key = (node.generation, m.generation);
        if let Some((g, mg, sums)) = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&node.name)
            && (*g, *mg) == key
        {
            return sums.clone();
        }
        let sums = std::sync::Arc::new(pod_sums(la, node, m));
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.name.clone(), (key.0, key.1, sums.clone()));
        sums
    }
}

/// How usage is read: plain, an aggregated percentile (kind, seconds), or prod-only.
#[derive(Clone, Copy)]
pub enum Base<'a> {
    Usage,
    Aggregated(&'a str, u64),
    Prod,
}

enum Reported<'a> {
    /// Reported (or aggregated) usage, plus pods not reflected in it yet.
    Usage(&'a Amounts),
    /// Nothing reported: the estimates of all pods.
    Estimated,
    /// Prod pods' reported usage and deltas (and the system usage when configured).
    Prod(Option<&'a Amounts>),
}

/// A node's estimated usage with the incoming pod, read per resource without copying maps.
pub struct Usage<'a> {
    sums: std::sync::Arc<PodSums>,
    reported: Reported<'a>,
    pod: std::sync::Arc<Amounts>,
}

fn at(m: &Amounts, r: &str) -> i64 {
    m.get(r).copied().unwrap_or(0)
}

impl Usage<'_> {
    pub fn get(&self, r: &str) -> i64 {
        let s = &self.sums;
        let existing = match &self.reported {
            Reported::Usage(u) => at(u, r).saturating_add(at(&s.delta, r)),
            Reported::Estimated => at(&s.estimated, r),
            Reported::Prod(sys) => at(&s.prod_usage, r)
                .saturating_add(at(&s.prod_delta, r))
                .saturating_add(sys.map(|m| at(m, r)).unwrap_or(0)),
        };
        existing.saturating_add(at(&self.pod, r))
    }
}

/// Estimated usage of `node` with `pod` on it: reported (or aggregated, or prod) usage plus
/// the part of recently scheduled pods the report cannot show yet, plus the pod itself.
pub fn node_estimated<'a>(
    la: &LoadAware,
    pod: &PodInfo,
    node: &NodeInfo,
    m: &'a MetricInfo,
    base: Base,
) -> Usage<'a> {
    let sums = la.cache.get(la, node, m);
    let reported = match base {
        Base::Prod => Reported::Prod(la.args.prod_include_sys.then_some(&m.system_usage)),
        Base::Usage => m
            .node_usage
            .as_ref()
            .map_or(Reported::Estimated, Reported::Usage),
        // No aggregate for "the longest duration" falls back to the plain usage.
        Base::Aggregated(kind, secs) => m
            .aggregated(kind, secs)
            .or(if secs == 0 {
                m.node_usage.as_ref()
            } else {
                None
            })
            .map_or(Reported::Estimated, Reported::Usage),
    };
    Usage {
        sums,
        reported,
        pod: la.incoming(pod),
    }
}
