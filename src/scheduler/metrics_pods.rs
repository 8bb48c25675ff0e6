//! The rest of the series Koordinator's scheduling dashboard queries: per-cycle node
//! counts and algorithm time, per-pod attempts and latency, the queue's inflow, pods
//! unschedulable by plugin, Permit waits, volume binding errors, Koordinator's scheduling
//! timeout count and its ElasticQuota series.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::kernel::Metrics;

type Hist<L> = Family<L, Histogram, fn() -> Histogram>;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptsLabels {
    attempts: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IncomingLabels {
    queue: &'static str,
    event: &'static str,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnschedulableLabels {
    pub plugin: String,
    pub profile: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkLabels {
    work: &'static str,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProfileLabels {
    profile: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    plugin: String,
    operation: String,
}

/// Koordinator's ElasticQuota gauge labels (`plugins/elasticquota/metrics.go`).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QuotaLabels {
    pub name: String,
    pub resource: String,
    pub tree: String,
    pub is_parent: String,
    pub parent: String,
    pub field: String,
}

fn algorithm_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}
fn node_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 24))
}
fn duration_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}
fn quota_process_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.00001, 2.0, 24))
}
fn quota_hook_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000001, 2.0, 24))
}

pub struct PodSeries {
    algorithm: Histogram,
    evaluated: Histogram,
    feasible: Histogram,
    attempts: Histogram,
    duration: Hist<AttemptsLabels>,
    incoming: Family<IncomingLabels, Counter>,
    pub unschedulable: Family<UnschedulableLabels, Gauge>,
    permit_wait: Hist<ResultLabels>,
    volume_errors: Family<OperationLabels, Counter>,
    timeouts: Family<ProfileLabels, Counter>,
    work: Family<WorkLabels, Gauge>,
    pub quota_spec: Family<QuotaLabels, Gauge>,
    pub quota_status: Family<QuotaLabels, Gauge>,
    pub quota_status_update: Histogram,
    quota_process: Hist<OperationLabels>,
    quota_hook: Hist<HookLabels>,
}

impl Default for PodSeries {
    fn default() -> Self {
        PodSeries {
            algorithm: algorithm_buckets(),
            evaluated: node_buckets(),
            feasible: node_buckets(),
            attempts: Histogram::new(exponential_buckets(1.0, 2.0, 5)),
            duration: Family::new_with_constructor(duration_buckets),
            incoming: Family::default(),
            unschedulable: Family::default(),
            permit_wait: Family::new_with_constructor(algorithm_buckets),
            volume_errors: Family::default(),
            timeouts: Family::default(),
            work: Family::default(),
            quota_spec: Family::default(),
            quota_status: Family::default(),
            quota_status_update: algorithm_buckets(),
            quota_process: Family::new_with_constructor(quota_process_buckets),
            quota_hook: Family::new_with_constructor(quota_hook_buckets),
        }
    }
}

impl PodSeries {
    pub fn register(&self, m: &Metrics) {
        m.register(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds (PreFilter, Filter, Score)",
            self.algorithm.clone(),
        );
        m.register(
            "scheduler_pod_scheduling_evaluated_nodes",
            "The number of nodes the scheduler evaluated the pod against in the filtering phase and beyond when find the suggested node",
            self.evaluated.clone(),
        );
        m.register(
            "scheduler_pod_scheduling_feasible_nodes",
            "The number of of nodes out of the evaluated ones that fit the pod when find the suggested node",
            self.feasible.clone(),
        );
        m.register(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod",
            self.attempts.clone(),
        );
        m.register(
            "scheduler_pod_scheduling_duration_seconds",
            "E2e latency for a pod being scheduled, from its first attempt until it is bound, by the number of attempts",
            self.duration.clone(),
        );
        m.register(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type",
            self.incoming.clone(),
        );
        m.register(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name",
            self.unschedulable.clone(),
        );
        m.register(
            "scheduler_permit_wait_duration_seconds",
            "Duration of waiting on permit",
            self.permit_wait.clone(),
        );
        m.register(
            "scheduler_volume_scheduling_stage_error",
            "Volume scheduling stage error count",
            self.volume_errors.clone(),
        );
        m.register_bare_counter(
            "scheduler_scheduling_timeout",
            "The currently scheduled Pod exceeds the maximum acceptable time interval (a count)",
            self.timeouts.clone(),
        );
        m.register(
            "scheduler_scheduler_goroutines",
            "Number of running goroutines split by the work they do such as binding (koord: binding cycles, pods waiting at Permit)",
            self.work.clone(),
        );
        m.register(
            "scheduler_elastic_quota_spec",
            "ElasticQuota specifications",
            self.quota_spec.clone(),
        );
        m.register(
            "scheduler_elastic_quota_status",
            "ElasticQuota current status",
            self.quota_status.clone(),
        );
        m.register(
            "scheduler_update_elastic_quota_status_duration_seconds",
            "Update ElasticQuota status latency in seconds",
            self.quota_status_update.clone(),
        );
        m.register(
            "scheduler_elastic_quota_process_latency",
            "elastic quota process latency in second",
            self.quota_process.clone(),
        );
        m.register(
            "scheduler_elastic_quota_hook_plugin_latency",
            "elastic quota hook plugin latency in seconds (koord runs no quota hook plugins)",
            self.quota_hook.clone(),
        );
    }

    /// One cycle: the algorithm's time; for a placed pod, the nodes evaluated and feasible.
    pub fn cycle(&self, algorithm_seconds: f64, placed: Option<(usize, usize)>) {
        self.algorithm.observe(algorithm_seconds);
        if let Some((evaluated, feasible)) = placed {
            self.evaluated.observe(evaluated as f64);
            self.feasible.observe(feasible as f64);
        }
    }

    /// A pod bound after `attempts` attempts, `seconds` after its first.
    pub fn scheduled(&self, attempts: u32, seconds: f64) {
        self.attempts.observe(attempts as f64);
        let label = match attempts {
            n if n >= 16 => "16+".to_string(),
            n => n.to_string(),
        };
        let l = AttemptsLabels { attempts: label };
        self.duration.get_or_create(&l).observe(seconds);
    }

    pub fn incoming(&self, queue: &'static str, event: &'static str, n: u64) {
        let l = IncomingLabels { queue, event };
        self.incoming.get_or_create(&l).inc_by(n);
    }

    /// Work in flight: `binding` cycles, pods waiting at `permit`.
    pub fn work(&self, work: &'static str, n: usize) {
        self.work.get_or_create(&WorkLabels { work }).set(n as i64);
    }

    pub fn permit_wait(&self, result: &'static str, seconds: f64) {
        let l = ResultLabels { result };
        self.permit_wait.get_or_create(&l).observe(seconds);
    }

    pub fn volume_error(&self, operation: &'static str) {
        let l = OperationLabels { operation };
        self.volume_errors.get_or_create(&l).inc();
    }

    /// A pod of `profile` in flight past `--scheduling-timeout` (see the live monitor).
    pub fn timed_out(&self, profile: &str) {
        let l = ProfileLabels {
            profile: profile.into(),
        };
        self.timeouts.get_or_create(&l).inc();
    }

    /// One ElasticQuota pass (`operation`: Koordinator's name for the step).
    pub fn quota_process(&self, operation: &'static str, seconds: f64) {
        let l = OperationLabels { operation };
        self.quota_process.get_or_create(&l).observe(seconds);
    }
}
