//! Estimation: what a pod will use (scaling factors over max(request, limit)), and a
//! node's estimated usage from its NodeMetric plus pods not yet reflected in it.

use std::collections::BTreeMap;

use super::{LoadAware, NodeLoad};
use crate::api::extension::keys::ANNOTATION_NODE_RAW_ALLOCATABLE;
use crate::api::extension::priority::PriorityClass;
use crate::api::extension::priority::translate;
use crate::api::extension::resources::{BATCH_CPU, BATCH_MEMORY, CPU, MEMORY};
use crate::api::pod::{Amounts, amounts};
use crate::scheduler::framework::memo::Memoized;
use crate::scheduler::framework::metric::MetricInfo;
use crate::scheduler::framework::res::{self, ResId, ResVec};
use crate::scheduler::framework::{NodeInfo, PodInfo};

const DEFAULT_MILLI_CPU: i64 = 250;
const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;

/// Node allocatable, with `node.koordinator.sh/raw-allocatable` entries overriding.
pub fn allocatable(node: &NodeInfo) -> std::borrow::Cow<'_, ResVec> {
    let raw = node
        .node
        .metadata
        .annotations
        .as_ref()
        .and_then(|m| m.get(ANNOTATION_NODE_RAW_ALLOCATABLE));
    type List = BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;
    match raw.and_then(|s| serde_json::from_str::<List>(s).ok()) {
        None => std::borrow::Cow::Borrowed(&node.alloc),
        Some(list) => {
            let mut a = node.alloc.clone();
            for (k, v) in amounts(Some(&list)) {
                a.set(res::intern(&k), v);
            }
            std::borrow::Cow::Owned(a)
        }
    }
}

fn class_index(c: PriorityClass) -> usize {
    match c {
        PriorityClass::Prod => 0,
        PriorityClass::Mid => 1,
        PriorityClass::Batch => 2,
        PriorityClass::Free => 3,
        PriorityClass::None => 4,
    }
}

const CLASSES: [PriorityClass; 5] = [
    PriorityClass::Prod,
    PriorityClass::Mid,
    PriorityClass::Batch,
    PriorityClass::Free,
    PriorityClass::None,
];

/// One scaling factor, with the tier resource it reads for each priority class resolved
/// up front: (tier id, default when the pod asks for nothing).
#[derive(Debug, Clone)]
pub struct Factor {
    pub out: ResId,
    pub percent: i64,
    tiers: [(ResId, i64); 5],
}

/// The scaling factors of the default estimator, resolved to ids.
pub fn factors(map: &BTreeMap<String, i64>) -> Vec<Factor> {
    map.iter()
        .map(|(name, percent)| Factor {
            out: res::intern(name),
            percent: *percent,
            tiers: CLASSES.map(|c| {
                let tier = translate(name, c);
                let default = match tier {
                    CPU | BATCH_CPU => DEFAULT_MILLI_CPU,
                    MEMORY | BATCH_MEMORY => DEFAULT_MEMORY,
                    _ => 0,
                };
                (res::intern(tier), default)
            }),
        })
        .collect()
}

/// The default estimator: per scaling-factor resource, max(request, limit) of the pod's
/// tier resource × factor / 100 (rounded, capped at the limit), or a default when unset.
pub fn estimate_vec(factors: &[Factor], pod: &PodInfo) -> ResVec {
    let mut out = ResVec::default();
    let ci = class_index(pod.class);
    for f in factors {
        let (tier, default) = f.tiers[ci];
        let (req, limit) = (pod.req.get(tier), pod.lim.get(tier));
        let q = req.max(limit);
        let v = if q == 0 {
            default
        } else {
            let e = (q as f64 * f.percent as f64 / 100.0).round() as i64;
            if limit > 0 { e.min(limit) } else { e }
        };
        out.set(f.out, v);
    }
    out
}

/// [`estimate_vec`] by resource name (for `koord explain` and tests).
pub fn estimate(factors_by_name: &BTreeMap<String, i64>, pod: &PodInfo) -> Amounts {
    let v = estimate_vec(&factors(factors_by_name), pod);
    factors_by_name
        .keys()
        .map(|k| (k.clone(), v.get(res::intern(k))))
        .collect()
}

fn add_excess(into: &mut ResVec, e: &ResVec, u: Option<&ResVec>) {
    for (k, v) in e.iter() {
        let used = u.map_or(0, |u| u.get(k));
        into.set(k, into.get(k).saturating_add((v - used).max(0)));
    }
}

/// The plain base of a node: its reported usage plus what its pods add that the report
/// cannot show yet, or (nothing reported) the estimates of all its pods.
pub fn plain(m: &MetricInfo, sums: &PodSums) -> ResVec {
    match &m.node_usage {
        Some(u) => {
            let mut e = u.clone();
            e.add(&sums.delta);
            e
        }
        None => sums.estimated.clone(),
    }
}

/// What the pods on a node add to its NodeMetric (`pkg/scheduler/plugins/loadaware/helper.go`), summed.
#[derive(Debug, Clone, Default)]
pub struct PodSums {
    /// Σ max(0, estimate − usage) over pods the report cannot show fully yet.
    pub delta: ResVec,
    /// Σ estimate over all pods.
    pub estimated: ResVec,
    pub prod_usage: ResVec,
    pub prod_delta: ResVec,
}

pub fn pod_sums(la: &LoadAware, node: &NodeInfo, m: &MetricInfo) -> PodSums {
    let update = m.update_ms.unwrap_or(0);
    let mut s = PodSums::default();
    for p in &node.pods {
        let e = la.incoming(p);
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
        s.estimated.add(&e);
        if p.class == PriorityClass::Prod {
            if reported.is_some_and(|(_, c)| c == PriorityClass::Prod.name()) {
                if let Some(u) = u {
                    s.prod_usage.add(u);
                }
                if estimating {
                    add_excess(&mut s.prod_delta, &e, u);
                }
            } else {
                s.prod_delta.add(&e);
            }
        }
    }
    s
}

/// How usage is read: plain, an aggregated percentile (kind, seconds), or prod-only.
#[derive(Clone, Copy)]
pub enum Base<'a> {
    Usage,
    Aggregated(&'a str, u64),
    Prod,
}

enum Reported<'a> {
    /// The plain base, reported usage and pods not reflected in it summed up front.
    Existing(&'a ResVec),
    /// Reported (or aggregated) usage, plus pods not reflected in it yet.
    Usage(&'a ResVec),
    /// Nothing reported: the estimates of all pods.
    Estimated,
    /// Prod pods' reported usage and deltas (and the system usage when configured).
    Prod(Option<&'a ResVec>),
}

/// A node's estimated usage with the incoming pod, read per resource without copying maps.
pub struct Usage<'a> {
    sums: &'a PodSums,
    reported: Reported<'a>,
    pod: Memoized<'a, ResVec>,
}

fn at(m: &ResVec, r: ResId) -> i64 {
    m.get(r)
}

impl Usage<'_> {
    pub fn get(&self, r: ResId) -> i64 {
        let s = &self.sums;
        let existing = match &self.reported {
            Reported::Existing(e) => at(e, r),
            Reported::Usage(u) => at(u, r).saturating_add(at(&s.delta, r)),
            Reported::Estimated => at(&s.estimated, r),
            Reported::Prod(sys) => at(&s.prod_usage, r)
                .saturating_add(at(&s.prod_delta, r))
                .saturating_add(sys.map_or(0, |m| at(m, r))),
        };
        existing.saturating_add(at(&self.pod, r))
    }
}

/// Estimated usage of `node` with `pod` on it: reported (or aggregated, or prod) usage plus
/// the part of recently scheduled pods the report cannot show yet, plus the pod itself.
pub fn node_estimated<'a>(
    la: &LoadAware,
    pod: &'a PodInfo,
    load: &'a NodeLoad,
    m: &'a MetricInfo,
    base: Base,
) -> Usage<'a> {
    let reported = match base {
        Base::Prod => Reported::Prod(la.args.prod_include_sys.then_some(&m.system_usage)),
        Base::Usage => Reported::Existing(&load.plain),
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
        sums: &load.sums,
        reported,
        pod: la.incoming(pod),
    }
}
