//! The scheduler's Prometheus series under kube-scheduler's names and labels, so the
//! dashboards and alerts written for koord-scheduler (and kube-scheduler) keep working.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::framework::Point;
use crate::kernel::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
    profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PointLabels {
    extension_point: String,
    status: String,
    profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

type Hist<L> = Family<L, Histogram, fn() -> Histogram>;

/// kube-scheduler's buckets: 1 ms doubling 15 times.
fn attempt_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// kube-scheduler's extension-point buckets: 0.1 ms doubling 12 times.
fn point_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 12))
}

fn victim_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 7))
}

/// Outcome of one scheduling attempt, as kube-scheduler labels it.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    Scheduled,
    Unschedulable,
    Error,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Scheduled => "scheduled",
            Outcome::Unschedulable => "unschedulable",
            Outcome::Error => "error",
        }
    }
}

pub struct SchedulerMetrics {
    attempts: Family<ResultLabels, Counter>,
    attempt_seconds: Hist<ResultLabels>,
    e2e_seconds: Hist<ResultLabels>,
    point_seconds: Hist<PointLabels>,
    pending: Family<QueueLabels, Gauge>,
    preemption_attempts: Counter,
    preemption_victims: Histogram,
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        SchedulerMetrics {
            attempts: Family::default(),
            attempt_seconds: Family::new_with_constructor(attempt_buckets),
            e2e_seconds: Family::new_with_constructor(attempt_buckets),
            point_seconds: Family::new_with_constructor(point_buckets),
            pending: Family::default(),
            preemption_attempts: Counter::default(),
            preemption_victims: victim_buckets(),
        }
    }
}

impl SchedulerMetrics {
    pub fn register(metrics: &Metrics) -> Arc<SchedulerMetrics> {
        let m = Arc::new(SchedulerMetrics::default());
        metrics.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result",
            m.attempts.clone(),
        );
        metrics.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            m.attempt_seconds.clone(),
        );
        metrics.register(
            "scheduler_e2e_scheduling_duration_seconds",
            "E2e scheduling latency in seconds, from the attempt's start until the pod is bound",
            m.e2e_seconds.clone(),
        );
        metrics.register(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point",
            m.point_seconds.clone(),
        );
        metrics.register(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type",
            m.pending.clone(),
        );
        metrics.register(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            m.preemption_attempts.clone(),
        );
        metrics.register(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            m.preemption_victims.clone(),
        );
        m
    }

    /// One scheduling attempt's result and latency.
    pub fn attempt(&self, profile: &str, outcome: Outcome, seconds: f64) {
        let l = ResultLabels {
            result: outcome.label().into(),
            profile: profile.into(),
        };
        self.attempts.get_or_create(&l).inc();
        self.attempt_seconds.get_or_create(&l).observe(seconds);
    }

    /// A pod bound (or failed to) `seconds` after its attempt began.
    pub fn e2e(&self, profile: &str, outcome: Outcome, seconds: f64) {
        let l = ResultLabels {
            result: outcome.label().into(),
            profile: profile.into(),
        };
        self.e2e_seconds.get_or_create(&l).observe(seconds);
    }

    /// One extension point's run.
    pub fn point(&self, profile: &str, point: Point, ok: bool, seconds: f64) {
        let l = PointLabels {
            extension_point: point_name(point).into(),
            status: if ok { "Success" } else { "Unschedulable" }.into(),
            profile: profile.into(),
        };
        self.point_seconds.get_or_create(&l).observe(seconds);
    }

    /// Pods per queue (`active`, `backoff`, `unschedulable`, `gated`).
    pub fn pending(&self, counts: [(&str, usize); 4]) {
        for (queue, n) in counts {
            let l = QueueLabels {
                queue: queue.into(),
            };
            self.pending.get_or_create(&l).set(n as i64);
        }
    }

    /// A PostFilter preemption that nominated a node, evicting `victims` pods.
    pub fn preemption(&self, victims: usize) {
        self.preemption_attempts.inc();
        self.preemption_victims.observe(victims as f64);
    }
}

/// kube-scheduler's extension point names (`PreFilter`, `Filter`, ...).
fn point_name(p: Point) -> &'static str {
    match p {
        Point::PreEnqueue => "PreEnqueue",
        Point::QueueSort => "QueueSort",
        Point::PreFilter => "PreFilter",
        Point::Filter => "Filter",
        Point::PostFilter => "PostFilter",
        Point::PreScore => "PreScore",
        Point::Score => "Score",
        Point::Reserve => "Reserve",
        Point::Permit => "Permit",
        Point::PreBind => "PreBind",
        Point::Bind => "Bind",
        Point::PostBind => "PostBind",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_scheduler_names_and_labels() {
        let registry = Metrics::new();
        let m = SchedulerMetrics::register(&registry);
        m.attempt("koord-scheduler", Outcome::Unschedulable, 0.01);
        m.e2e("koord-scheduler", Outcome::Scheduled, 0.02);
        m.point("koord-scheduler", Point::Filter, true, 0.001);
        m.pending([
            ("active", 1),
            ("backoff", 0),
            ("unschedulable", 2),
            ("gated", 0),
        ]);
        m.preemption(3);
        let text = registry.encode();
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        let names: std::collections::BTreeSet<&str> =
            scrape.samples.iter().map(|s| s.metric.as_str()).collect();
        for n in [
            "scheduler_schedule_attempts_total",
            "scheduler_scheduling_attempt_duration_seconds_count",
            "scheduler_e2e_scheduling_duration_seconds_count",
            "scheduler_framework_extension_point_duration_seconds_count",
            "scheduler_pending_pods",
            "scheduler_preemption_attempts_total",
            "scheduler_preemption_victims_count",
        ] {
            assert!(names.contains(n), "{n}: {text}");
        }
        let point = scrape
            .samples
            .iter()
            .find(|s| s.metric == "scheduler_framework_extension_point_duration_seconds_count")
            .unwrap();
        assert_eq!(point.labels.get("extension_point"), Some("Filter"));
        assert_eq!(point.labels.get("status"), Some("Success"));
    }
}
