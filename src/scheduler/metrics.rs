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

#[path = "metrics_koord.rs"]
pub mod koord;
#[path = "metrics_pods.rs"]
pub mod pods;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
    profile: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PointLabels {
    extension_point: String,
    status: String,
    profile: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    // Static strings: sampled cycles record every plugin call on every node, so a label
    // set must cost no allocation.
    plugin: &'static str,
    extension_point: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
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

/// kube-scheduler's plugin buckets: 10 µs growing ×1.5, 20 buckets.
fn plugin_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.00001, 1.5, 20))
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
    plugin_seconds: Hist<PluginLabels>,
    pending: Family<QueueLabels, Gauge>,
    goroutines: Family<OperationLabels, Gauge>,
    preemption_attempts: Counter,
    preemption_victims: Histogram,
    /// The rest of the dashboard's series (`metrics_pods.rs`).
    pub pods: pods::PodSeries,
    /// Koordinator's own series (`metrics_koord.rs`).
    pub koord: koord::KoordSeries,
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        SchedulerMetrics {
            attempts: Family::default(),
            attempt_seconds: Family::new_with_constructor(attempt_buckets),
            e2e_seconds: Family::new_with_constructor(attempt_buckets),
            point_seconds: Family::new_with_constructor(point_buckets),
            plugin_seconds: Family::new_with_constructor(plugin_buckets),
            pending: Family::default(),
            goroutines: Family::default(),
            preemption_attempts: Counter::default(),
            preemption_victims: victim_buckets(),
            pods: Default::default(),
            koord: Default::default(),
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
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point (one cycle in ten is sampled)",
            m.plugin_seconds.clone(),
        );
        metrics.register(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type",
            m.pending.clone(),
        );
        metrics.register(
            "scheduler_goroutines",
            "Number of running binding cycles (kube-scheduler's goroutines split by the work they do)",
            m.goroutines.clone(),
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
        m.pods.register(metrics);
        m.koord.register(metrics);
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

    /// One plugin call of a sampled cycle.
    pub fn plugin(&self, point: Point, plugin: &'static str, ok: bool, seconds: f64) {
        let l = PluginLabels {
            plugin,
            extension_point: point_name(point),
            status: if ok { "Success" } else { "Unschedulable" },
        };
        self.plugin_seconds.get_or_create(&l).observe(seconds);
    }

    /// The observer the frameworks call on sampled cycles.
    pub fn observer(self: &Arc<Self>) -> crate::scheduler::framework::PluginObserver {
        let m = self.clone();
        Arc::new(move |point, plugin, ok, secs| m.plugin(point, plugin, ok, secs))
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

    /// Binding cycles (and status writes) running now.
    pub fn binding(&self, running: usize) {
        let l = OperationLabels {
            operation: "binding",
        };
        self.goroutines.get_or_create(&l).set(running as i64);
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
        m.plugin(Point::Filter, "NodeResourcesFit", false, 0.0001);
        let text = registry.encode();
        let scrape = registry.scrape();
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
            "scheduler_plugin_execution_duration_seconds_count",
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

#[cfg(test)]
mod sampling_tests {
    use std::sync::Mutex;

    use super::*;
    use crate::scheduler::framework::runtime::Scope;
    use crate::scheduler::test_util::{cluster, node_json, simple_pod};

    #[test]
    fn one_cycle_in_ten_times_each_plugin() {
        let cfg = crate::scheduler::config::default_config().unwrap();
        let fw = crate::scheduler::config::framework(&cfg.profiles[0]).unwrap();
        let seen: Arc<Mutex<Vec<(Point, &'static str)>>> = Arc::default();
        let log = seen.clone();
        let obs: crate::scheduler::framework::PluginObserver = Arc::new(move |p, name, _, _| {
            log.lock().unwrap().push((p, name));
        });
        assert!(fw.observer.set(obs).is_ok());
        let mut c = cluster(vec![
            node_json("n1", "8", "32Gi"),
            node_json("n2", "8", "32Gi"),
        ]);
        fw.setup(&mut c);
        let pod = simple_pod("p", "1", "1Gi");
        fw.schedule(&pod, &c, Scope::Everything);
        let first = seen.lock().unwrap().clone();
        assert!(
            first.contains(&(Point::Filter, "NodeResourcesFit")),
            "{first:?}"
        );
        assert!(
            first.contains(&(Point::Score, "LoadAwareScheduling")),
            "{first:?}"
        );
        assert!(
            first.iter().any(|(p, _)| *p == Point::PreFilter),
            "{first:?}"
        );
        for _ in 1..SAMPLE {
            fw.schedule(&pod, &c, Scope::Everything);
        }
        assert_eq!(
            seen.lock().unwrap().len(),
            first.len(),
            "cycles 2..10 are not sampled"
        );
        fw.schedule(&pod, &c, Scope::Everything);
        assert_eq!(seen.lock().unwrap().len(), 2 * first.len(), "cycle 11 is");
    }

    #[test]
    fn a_sampled_cycle_times_a_bounded_number_of_node_calls() {
        use crate::scheduler::framework::NODE_CALLS_TIMED;
        let cfg = crate::scheduler::config::default_config().unwrap();
        let fw = crate::scheduler::config::framework(&cfg.profiles[0]).unwrap();
        let seen: Arc<Mutex<Vec<Point>>> = Arc::default();
        let log = seen.clone();
        let obs: crate::scheduler::framework::PluginObserver = Arc::new(move |p, _, _, _| {
            log.lock().unwrap().push(p);
        });
        assert!(fw.observer.set(obs).is_ok());
        let nodes = (0..400)
            .map(|i| node_json(&format!("n{i}"), "8", "32Gi"))
            .collect();
        let mut c = cluster(nodes);
        fw.setup(&mut c);
        fw.schedule(&simple_pod("p", "1", "1Gi"), &c, Scope::Everything);
        let seen = seen.lock().unwrap();
        let count = |p: Point| seen.iter().filter(|x| **x == p).count() as u32;
        assert_eq!(count(Point::Filter), NODE_CALLS_TIMED);
        assert_eq!(count(Point::Score), NODE_CALLS_TIMED);
        assert!(
            count(Point::PreFilter) > 0,
            "per-cycle points are all timed"
        );
    }

    const SAMPLE: usize = 10;
}
