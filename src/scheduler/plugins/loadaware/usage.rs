//! Estimation: what a pod will use (scaling factors over max(request, limit)), and a
//! node's estimated usage from its NodeMetric plus pods not yet reflected in it.

use std::collections::BTreeMap;

use super::LoadAware;
use crate::api::extension::keys::ANNOTATION_NODE_RAW_ALLOCATABLE;
use crate::api::extension::priority::PriorityClass;
use crate::api::extension::resources::{BATCH_CPU, BATCH_MEMORY, CPU, MEMORY, translate};
use crate::api::pod::{Amounts, amounts};
use crate::api::slo::NodeMetric;
use crate::scheduler::framework::{NodeInfo, PodInfo};

const DEFAULT_MILLI_CPU: i64 = 250;
const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;
const DEFAULT_REPORT_INTERVAL_SECONDS: i64 = 60;

/// The parts of a NodeMetric LoadAware reads, as integers.
pub struct Metric<'a> {
    pub raw: &'a NodeMetric,
    pub update_ms: Option<i64>,
    pub report_interval_ms: i64,
    /// Pod key → (usage, reported priority class name).
    pub pods: BTreeMap<String, (Amounts, String)>,
}

impl<'a> Metric<'a> {
    pub fn new(m: &'a NodeMetric) -> Metric<'a> {
        let status = m.status.as_ref();
        let pods = status
            .and_then(|s| s.pods_metric.as_ref())
            .into_iter()
            .flatten()
            .map(|p| {
                let key = format!(
                    "{}/{}",
                    p.namespace.as_deref().unwrap_or(""),
                    p.name.as_deref().unwrap_or("")
                );
                (
                    key,
                    (
                        amounts(p.pod_usage.resources.as_ref()),
                        p.priority.clone().unwrap_or_default(),
                    ),
                )
            })
            .collect();
        Metric {
            raw: m,
            update_ms: status
                .and_then(|s| s.update_time.as_ref())
                .map(|t| t.0.as_millisecond()),
            report_interval_ms: m
                .spec
                .metric_collect_policy
                .as_ref()
                .and_then(|p| p.report_interval_seconds)
                .unwrap_or(DEFAULT_REPORT_INTERVAL_SECONDS)
                * 1000,
            pods,
        }
    }

    fn node_usage(&self) -> Option<Amounts> {
        let info = self.raw.status.as_ref()?.node_metric.as_ref()?;
        info.node_usage.resources.as_ref().map(|r| amounts(Some(r)))
    }

    fn system_usage(&self) -> Amounts {
        let r = self
            .raw
            .status
            .as_ref()
            .and_then(|s| s.node_metric.as_ref())
            .and_then(|n| n.system_usage.resources.as_ref());
        amounts(r)
    }

    /// An aggregated percentile for `duration` (empty/0 = the longest reported).
    fn aggregated(&self, kind: &str, duration: Option<&str>) -> Option<Amounts> {
        let list = self
            .raw
            .status
            .as_ref()?
            .node_metric
            .as_ref()?
            .aggregated_node_usages
            .as_ref()?;
        let secs = |d: Option<&str>| {
            d.and_then(|d| crate::api::duration::parse(d).ok())
                .map(|d| d.as_secs())
                .unwrap_or(0)
        };
        let want = secs(duration);
        let with_kind = list.iter().filter(|a| {
            a.usage
                .as_ref()
                .is_some_and(|u| u.get(kind).is_some_and(|r| r.resources.is_some()))
        });
        let chosen = if want == 0 {
            with_kind.max_by_key(|a| secs(a.duration.as_deref()))
        } else {
            with_kind
                .into_iter()
                .find(|a| secs(a.duration.as_deref()) == want)
        }?;
        chosen
            .usage
            .as_ref()?
            .get(kind)
            .map(|r| amounts(r.resources.as_ref()))
    }
}

/// Node allocatable, with `node.koordinator.sh/raw-allocatable` entries overriding.
pub fn allocatable(node: &NodeInfo) -> Amounts {
    let mut a = node.allocatable.clone();
    let raw = node
        .node
        .metadata
        .annotations
        .as_ref()
        .and_then(|m| m.get(ANNOTATION_NODE_RAW_ALLOCATABLE));
    if let Some(list) = raw.and_then(|s| {
        serde_json::from_str::<
            BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >(s)
        .ok()
    }) {
        a.extend(amounts(Some(&list)));
    }
    a
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
        let d = (v - used).max(0);
        let slot = into.entry(k.clone()).or_insert(0);
        *slot = slot.saturating_add(d);
    }
}

/// Estimated usage of `node` with `pod` on it: reported (or aggregated, or prod) usage plus
/// the part of recently scheduled pods the report cannot show yet, plus the pod itself.
pub fn node_estimated(
    la: &LoadAware,
    pod: &PodInfo,
    node: &NodeInfo,
    m: &Metric,
    aggregated: Option<(Option<&str>, Option<&str>)>,
    prod: bool,
) -> Amounts {
    let factors = &la.args.factors;
    let update = m.update_ms.unwrap_or(0);
    let (mut delta, mut estimated, mut prod_usage, mut prod_delta) = (
        Amounts::new(),
        Amounts::new(),
        Amounts::new(),
        Amounts::new(),
    );
    for p in &node.pods {
        if p.key == pod.key {
            continue;
        }
        let e = estimate(factors, p);
        let reported = m.pods.get(&p.key);
        let u = reported.map(|(u, _)| u);
        let deadline = la
            .args
            .seconds_after_scheduled
            .zip(p.scheduled_at_ms)
            .map(|(s, t)| t + s * 1000);
        let recent = p
            .scheduled_at_ms
            .is_some_and(|t| t > update - m.report_interval_ms);
        let estimating = u.is_none() || recent || deadline.is_some_and(|d| d > update);
        if estimating {
            add_excess(&mut delta, &e, u);
        }
        add(&mut estimated, &e);
        if p.class == PriorityClass::Prod {
            let reported_prod = reported.is_some_and(|(_, c)| c == PriorityClass::Prod.name());
            if reported_prod {
                add(&mut prod_usage, u.unwrap_or(&Amounts::new()));
                if estimating {
                    add_excess(&mut prod_delta, &e, u);
                }
            } else {
                add(&mut prod_delta, &e);
            }
        }
    }
    let mut used = if prod {
        if la.args.prod_include_sys {
            add(&mut prod_usage, &m.system_usage());
        }
        add(&mut prod_usage, &prod_delta);
        prod_usage
    } else {
        let base = match aggregated {
            Some((kind, duration)) => {
                let longest = duration
                    .and_then(|d| crate::api::duration::parse(d).ok())
                    .is_none_or(|d| d.is_zero());
                // No aggregate for "the longest duration" falls back to the plain usage.
                m.aggregated(kind.unwrap_or("avg"), duration)
                    .or_else(|| if longest { m.node_usage() } else { None })
            }
            None => m.node_usage(),
        };
        match base {
            Some(mut b) => {
                add(&mut b, &delta);
                b
            }
            None => estimated,
        }
    };
    add(&mut used, &estimate(factors, pod));
    used
}
