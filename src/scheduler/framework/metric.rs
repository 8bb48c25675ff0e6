//! A NodeMetric parsed once when it enters the cluster state (quantities to integers),
//! so plugins read numbers instead of re-parsing strings every cycle.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::res::ResVec;
use crate::api::pod::amounts;
use crate::api::slo::NodeMetric;

const DEFAULT_REPORT_INTERVAL_SECONDS: i64 = 60;

/// Seconds of a duration string such as "5m0s"; unset or unparsable is 0 (= the longest).
pub fn duration_seconds(d: Option<&str>) -> u64 {
    d.and_then(|d| crate::api::duration::parse(d).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[derive(Debug, Clone)]
/// What the scheduler reads of a NodeMetric (the object itself is not kept: its pod list
/// alone is kilobytes per node).
pub struct MetricInfo {
    pub update_ms: Option<i64>,
    pub report_interval_ms: i64,
    pub node_usage: Option<ResVec>,
    pub system_usage: ResVec,
    /// (duration in seconds, aggregation kind → usage).
    pub aggregated: Vec<(u64, BTreeMap<String, ResVec>)>,
    /// Pod key → (usage, reported priority class name).
    pub pods: HashMap<String, (ResVec, String)>,
}

impl MetricInfo {
    pub fn new(m: Arc<NodeMetric>) -> MetricInfo {
        let status = m.status.as_ref();
        let info = status.and_then(|s| s.node_metric.as_ref());
        let aggregated = info
            .and_then(|i| i.aggregated_node_usages.as_ref())
            .into_iter()
            .flatten()
            .map(|a| {
                let usage = a
                    .usage
                    .iter()
                    .flatten()
                    .filter_map(|(k, r)| {
                        r.resources
                            .as_ref()
                            .map(|res| (k.clone(), ResVec::from_amounts(&amounts(Some(res)))))
                    })
                    .collect();
                (duration_seconds(a.duration.as_deref()), usage)
            })
            .collect();
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
                let usage = ResVec::from_amounts(&amounts(p.pod_usage.resources.as_ref()));
                (key, (usage, p.priority.clone().unwrap_or_default()))
            })
            .collect();
        MetricInfo {
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
            node_usage: info
                .and_then(|i| i.node_usage.resources.as_ref())
                .map(|r| ResVec::from_amounts(&amounts(Some(r)))),
            system_usage: ResVec::from_amounts(&amounts(
                info.and_then(|i| i.system_usage.resources.as_ref()),
            )),
            aggregated,
            pods,
        }
    }

    /// An aggregated usage of `kind` for `seconds` (0 = the longest duration reported).
    pub fn aggregated(&self, kind: &str, seconds: u64) -> Option<&ResVec> {
        let with_kind = self.aggregated.iter().filter(|(_, u)| u.contains_key(kind));
        let chosen = if seconds == 0 {
            with_kind.max_by_key(|(d, _)| *d)
        } else {
            with_kind.into_iter().find(|(d, _)| *d == seconds)
        }?;
        chosen.1.get(kind)
    }
}
