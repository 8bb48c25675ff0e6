//! Koordinator's koordlet series about what the koordlet did rather than what it measured
//! (`pkg/koordlet/metrics`: kubelet.go, runtime_hook.go, resource_executor.go, oom_score_adj.go,
//! cpu_burst.go, core_sched.go, cpu_cpuset.go, common.go's eviction detail,
//! resource_summary.go's priority reclaimable) and the per-container collector series
//! (cpi.go, psi.go).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::{FGauge, Pairs};
use crate::kernel::Metrics;

type Hist = Family<Pairs, Histogram, fn() -> Histogram>;

/// `koordlet_kubelet_request_duration_seconds`, handed to the kubelet pod poller.
pub type KubeletRequests = Hist;

/// Koordinator's `ExponentialBuckets(0.001, 4, 7)`, in seconds.
fn kubelet_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 4.0, 7))
}

/// Koordinator's `ExponentialBuckets(0.01, 4, 8)`, in milliseconds.
fn millisecond_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 4.0, 8))
}

fn hist() -> Hist {
    Family::new_with_constructor(millisecond_buckets as fn() -> Histogram)
}

fn status(ok: bool) -> String {
    if ok { "succeeded" } else { "failed" }.to_string()
}

pub struct OpSeries {
    /// `{verb,path,code}`.
    pub kubelet_requests: KubeletRequests,
    /// `{node,hook,stage,status}`.
    pub runtime_hook: Hist,
    /// `{node,level,resource_type,status}`.
    pub hook_reconciler: Hist,
    /// `{type,status}`: `cgroup` or `default` (other kernel files), `success`/`failed`.
    pub resource_update: Hist,
    /// `{node,pod_namespace,pod_name,reason}`; Go's counter, a gauge holding the count.
    pub eviction_detail: Family<Pairs, Counter>,
    /// `{node,pod_name,pod_namespace,pod_uid,container_name}`.
    pub oom_score_adj: Family<Pairs, FGauge>,
    /// `{node,pod_namespace,pod_name,container_id,container_name}`.
    pub scaled_cfs_burst: Family<Pairs, FGauge>,
    pub scaled_cfs_quota: Family<Pairs, FGauge>,
    /// `{node,pod_name,pod_namespace,pod_uid,container_name,container_id,core_sched_group,core_sched_cookie}` = 1.
    pub core_sched_cookie: Family<Pairs, FGauge>,
    /// `{node,core_sched_group,status}`: per CoreSched round and group, whether all its
    /// processes share one cookie; Go's counter, a gauge holding the count.
    pub core_sched_status: Family<Pairs, Counter>,
    /// `{node,cpu}` = 1 for each CPU of the pool.
    pub share_pool_info: Family<Pairs, Gauge>,
    pub be_share_pool_info: Family<Pairs, Gauge>,
    /// `{node,container_id,container_name,pod_uid,pod_name,pod_namespace,cpi_field}`.
    pub container_cpi: Family<Pairs, FGauge>,
    /// `{node,cache_id,qos}`: the LSR/LS/BE resctrl groups' LLC occupancy in bytes.
    pub resctrl_llc: Family<Pairs, FGauge>,
    /// `{node,cache_id,qos,mb_type}`: their memory bandwidth counters in bytes.
    pub resctrl_mb: Family<Pairs, FGauge>,
    /// `{node,pod_uid,pod_name,pod_namespace,psi_resource_type,psi_precision,psi_degree,cpu_full_supported}`.
    pub pod_psi: Family<Pairs, FGauge>,
    /// As `pod_psi` with `container_id`, `container_name` first.
    pub container_psi: Family<Pairs, FGauge>,
    /// `{node,priority,resource,unit}` and `{node,priority}` (0 ok, 1 failed).
    pub priority_reclaimable: Family<Pairs, FGauge>,
    pub priority_reclaimable_status: Family<Pairs, FGauge>,
    live: Mutex<Live>,
}

/// A container-level CFS burst or quota value cpuburst wrote.
pub struct ScaledCfs {
    pub namespace: String,
    pub pod: String,
    pub container_id: String,
    pub container: String,
    /// `cpu.cfs_burst_us` (else `cpu.cfs_quota_us`).
    pub burst: bool,
    pub value: f64,
}

#[derive(Default)]
struct Live {
    /// (container id, labels) of the scaled CFS series, burst then quota.
    scaled: HashSet<(String, Pairs, bool)>,
    oom: HashSet<Pairs>,
    cpi: HashSet<Pairs>,
    psi: HashSet<Pairs>,
    resctrl_llc: HashSet<Pairs>,
    resctrl_mb: HashSet<Pairs>,
    pools: HashSet<Pairs>,
    cookies: HashSet<Pairs>,
}

impl Default for OpSeries {
    fn default() -> Self {
        OpSeries {
            kubelet_requests: Family::new_with_constructor(kubelet_buckets as fn() -> Histogram),
            runtime_hook: hist(),
            hook_reconciler: hist(),
            resource_update: hist(),
            eviction_detail: Family::default(),
            oom_score_adj: Family::default(),
            scaled_cfs_burst: Family::default(),
            scaled_cfs_quota: Family::default(),
            core_sched_cookie: Family::default(),
            core_sched_status: Family::default(),
            share_pool_info: Family::default(),
            be_share_pool_info: Family::default(),
            container_cpi: Family::default(),
            resctrl_llc: Family::default(),
            resctrl_mb: Family::default(),
            pod_psi: Family::default(),
            container_psi: Family::default(),
            priority_reclaimable: Family::default(),
            priority_reclaimable_status: Family::default(),
            live: Mutex::new(Live::default()),
        }
    }
}

/// Replaces a family's series of one kind with `now`, dropping those not in it.
fn replace<G: Default + prometheus_client::metrics::TypedMetric>(
    family: &Family<Pairs, G>,
    live: &mut HashSet<Pairs>,
    now: Vec<(Pairs, f64)>,
    set: impl Fn(&G, f64),
) {
    let keys: HashSet<Pairs> = now.iter().map(|(l, _)| l.clone()).collect();
    for gone in live.difference(&keys) {
        family.remove(gone);
    }
    for (l, v) in now {
        set(&family.get_or_create(&l), v);
    }
    *live = keys;
}

impl OpSeries {
    pub fn register(&self, m: &Metrics) {
        m.register(
            "koordlet_kubelet_request_duration_seconds",
            "kubelet http request duration in seconds",
            self.kubelet_requests.clone(),
        );
        m.register(
            "koordlet_runtime_hook_invoked_duration_milliseconds",
            "time duration of invocations of runtime hook plugins",
            self.runtime_hook.clone(),
        );
        m.register(
            "koordlet_runtime_hook_reconciler_invoked_duration_milliseconds",
            "time duration of invocations of runtime hook reconciler plugins",
            self.hook_reconciler.clone(),
        );
        m.register(
            "koordlet_resource_update_duration_milliseconds",
            "time duration of resource update such as cgroup files",
            self.resource_update.clone(),
        );
        m.register_bare_counter(
            "koordlet_pod_eviction_detail",
            "evict detail launched by koordlet",
            self.eviction_detail.clone(),
        );
        m.register(
            "koordlet_container_oom_score_adj",
            "oom_score_adj of the container",
            self.oom_score_adj.clone(),
        );
        m.register(
            "koordlet_container_scaled_cfs_burst_us",
            "The maximum accumulated run-time(in microseconds) in container-level set by koordlet",
            self.scaled_cfs_burst.clone(),
        );
        m.register(
            "koordlet_container_scaled_cfs_quota_us",
            "Run-time replenished within a period (in microseconds) in container-level set by koordlet",
            self.scaled_cfs_quota.clone(),
        );
        m.register(
            "koordlet_container_core_sched_cookie",
            "the core scheduling cookie of the container",
            self.core_sched_cookie.clone(),
        );
        m.register_bare_counter(
            "koordlet_core_sched_cookie_manage_status",
            "the manage status of the core scheduling cookie",
            self.core_sched_status.clone(),
        );
        m.register(
            "koordlet_cpuset_share_pool_info",
            "The cpu id of share pool",
            self.share_pool_info.clone(),
        );
        m.register(
            "koordlet_cpuset_be_share_pool_info",
            "The cpu id of be share pool",
            self.be_share_pool_info.clone(),
        );
        m.register(
            "koordlet_container_cpi",
            "Container cpi collected by koordlet",
            self.container_cpi.clone(),
        );
        m.register(
            "koordlet_resctrl_llc_occupancy",
            "resctrl default qos(LSR, LS, BE) llc occupancy collected by koordlet",
            self.resctrl_llc.clone(),
        );
        m.register(
            "koordlet_resctrl_memory_bandwidth",
            "resctrl default qos(LSR, LS, BE) memory bandwidth collected by koordlet",
            self.resctrl_mb.clone(),
        );
        m.register(
            "koordlet_pod_psi",
            "Pod psi collected by koordlet",
            self.pod_psi.clone(),
        );
        m.register(
            "koordlet_container_psi",
            "Container psi collected by koordlet",
            self.container_psi.clone(),
        );
        m.register(
            "koordlet_node_priority_resource_reclaimable",
            "the node reclaimable resources of a priority predicted by koordinator",
            self.priority_reclaimable.clone(),
        );
        m.register(
            "koordlet_node_resource_priority_reclaimable_status",
            "the status of the node priority reclaimable prediction (0 ok, 1 failed)",
            self.priority_reclaimable_status.clone(),
        );
    }

    /// One runtime hook call (Koordinator's hook names: `BatchResource`,
    /// `CPUSetAllocator`, `GroupIdentity`, ...; stages as the proxy's `PreCreateContainer`).
    pub fn hook_invoked(&self, node: &str, hook: &str, stage: &str, ok: bool, took: Duration) {
        let l: Pairs = vec![
            ("node", node.to_string()),
            ("hook", hook.to_string()),
            ("stage", stage.to_string()),
            ("status", status(ok)),
        ];
        self.runtime_hook
            .get_or_create(&l)
            .observe(took.as_secs_f64() * 1000.0);
    }

    /// One reconciler pass of a level (`kubeqos`, `pod`, `container`) over one resource file.
    pub fn reconciled(&self, node: &str, level: &str, resource: &str, ok: bool, took: Duration) {
        let l: Pairs = vec![
            ("node", node.to_string()),
            ("level", level.to_string()),
            ("resource_type", resource.to_string()),
            ("status", status(ok)),
        ];
        self.hook_reconciler
            .get_or_create(&l)
            .observe(took.as_secs_f64() * 1000.0);
    }

    /// One write the executor made (`cgroup` or `default`).
    pub fn updated(&self, kind: &'static str, ok: bool, took: Duration) {
        let status = if ok { "success" } else { "failed" };
        let l: Pairs = vec![("type", kind.to_string()), ("status", status.to_string())];
        self.resource_update
            .get_or_create(&l)
            .observe(took.as_secs_f64() * 1000.0);
    }

    pub fn evicted(&self, node: &str, namespace: &str, name: &str, reason: &str) {
        let l: Pairs = vec![
            ("node", node.to_string()),
            ("pod_namespace", namespace.to_string()),
            ("pod_name", name.to_string()),
            ("reason", reason.to_string()),
        ];
        self.eviction_detail.get_or_create(&l).inc();
    }

    /// This pass's containers with an oom_score_adj target; gone ones are dropped.
    pub fn set_oom_score_adj(&self, now: Vec<(Pairs, f64)>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        replace(&self.oom_score_adj, &mut live.oom, now, |g, v| {
            g.set(v);
        });
    }

    /// The values cpuburst wrote this pass; a series stays until its container is gone
    /// (Koordinator's keep their last value).
    pub fn set_scaled_cfs(&self, node: &str, now: Vec<ScaledCfs>, runs: &dyn Fn(&str) -> bool) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        for v in now {
            let l: Pairs = vec![
                ("node", node.to_string()),
                ("pod_namespace", v.namespace),
                ("pod_name", v.pod),
                ("container_id", v.container_id.clone()),
                ("container_name", v.container),
            ];
            let family = self.scaled_family(v.burst);
            family.get_or_create(&l).set(v.value);
            live.scaled.insert((v.container_id, l, v.burst));
        }
        live.scaled.retain(|(id, l, burst)| {
            let keep = runs(id);
            if !keep {
                self.scaled_family(*burst).remove(l);
            }
            keep
        });
    }

    fn scaled_family(&self, burst: bool) -> &Family<Pairs, FGauge> {
        if burst {
            &self.scaled_cfs_burst
        } else {
            &self.scaled_cfs_quota
        }
    }

    /// This pass's CPI samples (`cycles`, `instructions` per container).
    pub fn set_cpi(&self, now: Vec<(Pairs, f64)>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        replace(&self.container_cpi, &mut live.cpi, now, |g, v| {
            g.set(v);
        });
    }

    /// This pass's resctrl counters, LLC occupancy and memory bandwidth; groups gone are
    /// dropped.
    pub fn set_resctrl(&self, (llc, mb): (super::Values, super::Values)) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        replace(&self.resctrl_llc, &mut live.resctrl_llc, llc, |g, v| {
            g.set(v);
        });
        replace(&self.resctrl_mb, &mut live.resctrl_mb, mb, |g, v| {
            g.set(v);
        });
    }

    /// This pass's PSI (pod and container series together; the label sets differ).
    pub fn set_psi(&self, pods: Vec<(Pairs, f64)>, containers: Vec<(Pairs, f64)>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<(Pairs, f64)> = pods;
        let split = all.len();
        all.extend(containers);
        let keys: HashSet<Pairs> = all.iter().map(|(l, _)| l.clone()).collect();
        for gone in live.psi.difference(&keys) {
            self.pod_psi.remove(gone);
            self.container_psi.remove(gone);
        }
        for (i, (l, v)) in all.into_iter().enumerate() {
            let family = if i < split {
                &self.pod_psi
            } else {
                &self.container_psi
            };
            family.get_or_create(&l).set(v);
        }
        live.psi = keys;
    }

    /// This round's grouped containers and their cookies; gone ones are dropped.
    pub fn set_core_sched_cookies(&self, now: Vec<(Pairs, f64)>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        replace(&self.core_sched_cookie, &mut live.cookies, now, |g, v| {
            g.set(v);
        });
    }

    pub fn core_sched_managed(&self, node: &str, group: &str, ok: bool) {
        let l: Pairs = vec![
            ("node", node.to_string()),
            ("core_sched_group", group.to_string()),
            ("status", status(ok)),
        ];
        self.core_sched_status.get_or_create(&l).inc();
    }

    /// The pools' CPUs, one series per CPU id, as Koordinator's `cpuset_*_info`.
    pub fn set_share_pools(&self, node: &str, ls: &[u32], be: &[u32]) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let keys = |cpus: &[u32], pool: &'static str| -> Vec<(Pairs, f64)> {
            cpus.iter()
                .map(|c| {
                    let l: Pairs = vec![
                        ("node", node.to_string()),
                        ("cpu", c.to_string()),
                        ("pool", pool.to_string()),
                    ];
                    (l, 1.0)
                })
                .collect()
        };
        let mut all = keys(ls, "ls");
        all.extend(keys(be, "be"));
        let now: HashSet<Pairs> = all.iter().map(|(l, _)| l.clone()).collect();
        for gone in live.pools.difference(&now) {
            let family = self.pool_family(gone);
            family.remove(&without_pool(gone));
        }
        for (l, _) in &all {
            self.pool_family(l).get_or_create(&without_pool(l)).set(1);
        }
        live.pools = now;
    }

    fn pool_family(&self, l: &Pairs) -> &Family<Pairs, Gauge> {
        if l.iter().any(|(k, v)| *k == "pool" && v == "be") {
            &self.be_share_pool_info
        } else {
            &self.share_pool_info
        }
    }

    /// Koordinator's prod reclaimable (`priority="koord-prod"`): cpu in cores, memory in
    /// bytes; `None` (no prediction) sets both to 0 and the status to 1.
    pub fn set_prod_reclaimable(&self, node: &str, cpu_memory: Option<(f64, f64)>) {
        let (cpu, mem) = cpu_memory.unwrap_or((0.0, 0.0));
        for (res, unit, v) in [("cpu", "core", cpu), ("memory", "byte", mem)] {
            let l: Pairs = vec![
                ("node", node.to_string()),
                ("priority", "koord-prod".to_string()),
                ("resource", res.to_string()),
                ("unit", unit.to_string()),
            ];
            self.priority_reclaimable.get_or_create(&l).set(v);
        }
        let l: Pairs = vec![
            ("node", node.to_string()),
            ("priority", "koord-prod".to_string()),
        ];
        let failed = if cpu_memory.is_some() { 0.0 } else { 1.0 };
        self.priority_reclaimable_status
            .get_or_create(&l)
            .set(failed);
    }
}

fn without_pool(l: &Pairs) -> Pairs {
    l.iter().filter(|(k, _)| *k != "pool").cloned().collect()
}
