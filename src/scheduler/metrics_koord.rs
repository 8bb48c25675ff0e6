//! Koordinator's own scheduler series (`pkg/scheduler/metrics/metrics.go`) beside the ones
//! kube-scheduler's dashboard reads (`metrics_pods.rs`): reservations by phase and
//! resource, waiting gang groups, gang scheduling cycles, job preemption, the NextPod
//! queue step, secondary devices not well planned, the reservation-selector index and
//! inline batch scheduling.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::kernel::Metrics;

type Hist<L> = Family<L, Histogram, fn() -> Histogram>;
type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub name: String,
    pub phase: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    pub r#type: String,
    pub name: String,
    pub resource: String,
    pub unit: String,
}

/// `jobName` (Koordinator's camel case, which a derived label set cannot spell) and
/// `result`.
type JobLabels = Vec<(&'static str, String)>;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GangCycleLabels {
    reason: String,
    job_size: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node_name: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

/// Koordinator's GC histogram keeps a job's series 5 minutes after its last observation.
const JOB_SERIES_EXPIRE: Duration = Duration::from_secs(300);

fn queue_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.00001, 2.0, 24))
}
fn job_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}
fn gang_cycle_buckets() -> Histogram {
    let b = [
        0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 12.5, 15.0, 20.0, 25.0, 30.0, 45.0, 60.0, 120.0,
    ];
    Histogram::new(b)
}
fn batch_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

pub struct KoordSeries {
    pub reservation_phase: Family<PhaseLabels, FloatGauge>,
    pub reservation_resource: Family<ResourceLabels, FloatGauge>,
    waiting_gang_groups: Gauge,
    next_pod: Histogram,
    job_preemption: Hist<JobLabels>,
    job_seen: Mutex<HashMap<JobLabels, Instant>>,
    gang_cycle: Hist<GangCycleLabels>,
    secondary_device: Family<NodeLabels, FloatGauge>,
    selector_index_queries: Family<ResultLabels, Counter>,
    selector_index_candidates: Histogram,
    inline_batch: Hist<ResultLabels>,
}

impl Default for KoordSeries {
    fn default() -> Self {
        KoordSeries {
            reservation_phase: Family::default(),
            reservation_resource: Family::default(),
            waiting_gang_groups: Gauge::default(),
            next_pod: queue_buckets(),
            job_preemption: Family::new_with_constructor(job_buckets),
            job_seen: Mutex::default(),
            gang_cycle: Family::new_with_constructor(gang_cycle_buckets),
            secondary_device: Family::default(),
            selector_index_queries: Family::default(),
            selector_index_candidates: Histogram::new(exponential_buckets(1.0, 2.0, 16)),
            inline_batch: Family::new_with_constructor(batch_buckets),
        }
    }
}

impl KoordSeries {
    pub fn register(&self, m: &Metrics) {
        m.register(
            "scheduler_reservation_status_phase",
            "The current number of reservations in each status phase (e.g. Pending, Available, Succeeded, Failed)",
            self.reservation_phase.clone(),
        );
        m.register(
            "scheduler_reservation_resource",
            "Resource metrics for a reservation, including allocatable, allocated, and utilization with unit.",
            self.reservation_resource.clone(),
        );
        m.register(
            "scheduler_waiting_gang_group_number",
            "The number of GangGroups in Waiting",
            self.waiting_gang_groups.clone(),
        );
        m.register(
            "scheduler_next_pod_delete_from_queue_latency",
            "run next pod plugins, the latency of deleting pod from queue",
            self.next_pod.clone(),
        );
        m.register(
            "scheduler_job_preemption_duration_seconds",
            "Latency for running Coscheduling plugin postFilter.",
            self.job_preemption.clone(),
        );
        m.register(
            "scheduler_gang_schedule_cycle_duration_seconds",
            "Duration of a gang scheduling cycle, from the first pod passing PreFilter until the context is cleared, labeled by clear reason and job size bucket.",
            self.gang_cycle.clone(),
        );
        m.register(
            "scheduler_secondary_device_not_well_planned",
            "The number of secondary device not well planned",
            self.secondary_device.clone(),
        );
        m.register(
            "scheduler_reservation_selector_index_query",
            "Total number of reservationSelector index queries, labeled by index hit/miss result.",
            self.selector_index_queries.clone(),
        );
        m.register(
            "scheduler_reservation_selector_index_candidates_count",
            "The number of candidate nodes returned by the reservationSelector white-list index for an index-hit query.",
            self.selector_index_candidates.clone(),
        );
        m.register(
            "scheduler_inline_batch_schedule_duration_seconds",
            "Duration of an inline batch schedule (whole-job PreFilter/Filter/Reserve/Assume + Bind) triggered by a FindOneNode plan, labeled by result (success/failure).",
            self.inline_batch.clone(),
        );
    }

    pub fn waiting_gang_groups(&self, n: usize) {
        self.waiting_gang_groups.set(n as i64);
    }

    /// Taking a gang member's sibling from the queue (Koordinator's NextPod step).
    pub fn next_pod(&self, seconds: f64) {
        self.next_pod.observe(seconds);
    }

    /// One Coscheduling PostFilter run for the job `preemptor`, with Koordinator's reason.
    pub fn job_preemption(&self, preemptor: &str, reason: &str, seconds: f64, now: Instant) {
        let l: JobLabels = vec![
            ("jobName", preemptor.to_string()),
            ("result", reason.to_string()),
        ];
        self.job_preemption.get_or_create(&l).observe(seconds);
        let mut seen = self.job_seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.insert(l, now);
        seen.retain(|l, at| {
            let fresh = now.duration_since(*at) < JOB_SERIES_EXPIRE;
            if !fresh {
                self.job_preemption.remove(l);
            }
            fresh
        });
    }

    /// A gang scheduling cycle ended (`reason`: Koordinator's clear reason) after
    /// `attempted` members were tried.
    pub fn gang_cycle(&self, reason: &str, attempted: usize, seconds: f64) {
        let l = GangCycleLabels {
            reason: reason.to_string(),
            job_size: job_size_bucket(attempted),
        };
        self.gang_cycle.get_or_create(&l).observe(seconds);
    }

    /// The Devices whose secondary devices are not well planned (labelled
    /// `node.koordinator.sh/secondary-device-well-planned: "false"`), by name.
    pub fn secondary_devices(&self, not_well_planned: &[String]) {
        self.secondary_device.clear();
        for node in not_well_planned {
            let l = NodeLabels {
                node_name: node.clone(),
            };
            self.secondary_device.get_or_create(&l).set(1.0);
        }
    }

    /// A reservationSelector index query (`hit`: with its candidate nodes; a hit with
    /// none is not observed, as Koordinator, so it does not blur the 1-node bucket).
    pub fn selector_index(&self, candidates: Option<usize>) {
        let result = if candidates.is_some() { "hit" } else { "miss" };
        let l = ResultLabels {
            result: result.into(),
        };
        self.selector_index_queries.get_or_create(&l).inc();
        if let Some(n) = candidates.filter(|n| *n > 0) {
            self.selector_index_candidates.observe(n as f64);
        }
    }

    pub fn inline_batch(&self, ok: bool, seconds: f64) {
        let result = if ok { "success" } else { "failure" };
        let l = ResultLabels {
            result: result.into(),
        };
        self.inline_batch.get_or_create(&l).observe(seconds);
    }
}

/// `GangJobSizeBucket`: 100-wide buckets up to 1000, then "1000+".
pub fn job_size_bucket(n: usize) -> String {
    match n {
        0 => "0".into(),
        n if n > 1000 => "1000+".into(),
        n => {
            let i = (n - 1) / 100;
            format!("{}-{}", i * 100 + 1, (i + 1) * 100)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gang_job_size_bucket() {
        // Koordinator's TestGangJobSizeBucket.
        for (name, n, want) in [
            ("zero", 0, "0"),
            ("lower_boundary_of_first_bucket", 1, "1-100"),
            ("upper_boundary_of_first_bucket", 100, "1-100"),
            ("start_of_second_bucket", 101, "101-200"),
            ("mid_bucket", 250, "201-300"),
            ("exact_bucket_edge_300", 300, "201-300"),
            ("exact_bucket_edge_301", 301, "301-400"),
            ("bucket_401_500", 500, "401-500"),
            ("bucket_501_600", 501, "501-600"),
            ("bucket_901_1000_lower", 901, "901-1000"),
            ("bucket_901_1000_upper", 1000, "901-1000"),
            ("overflow_just_above", 1001, "1000+"),
            ("overflow_large", 100000, "1000+"),
        ] {
            assert_eq!(job_size_bucket(n), want, "{name}");
        }
    }

    #[test]
    fn a_job_series_leaves_five_minutes_after_its_last_preemption() {
        let s = KoordSeries::default();
        let t0 = Instant::now();
        s.job_preemption("default/a", "preemption not helpful", 0.01, t0);
        s.job_preemption(
            "default/b",
            "no pending pods",
            0.01,
            t0 + Duration::from_secs(200),
        );
        s.job_preemption(
            "default/b",
            "no pending pods",
            0.01,
            t0 + Duration::from_secs(301),
        );
        let seen = s.job_seen.lock().unwrap();
        let jobs: Vec<&str> = seen.keys().map(|l| l[0].1.as_str()).collect();
        assert_eq!(jobs, ["default/b"]);
    }
}
