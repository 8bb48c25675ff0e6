//! cpusuppress (`pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go`): how much CPU best-effort pods may use so that the
//! node stays under `cpuSuppressThresholdPercent`, as a CFS quota for the besteffort QoS
//! cgroup (`cfsQuota` policy) or as a set of CPUs (`cpuset` policy, the default). Pure
//! decisions, then the strategy's round ([`CpuSuppress`]) that applies them.

use super::context::{QosCtx, count, last_cpu, last_host_app_cpu};
use super::evictor;
use super::executor::Executor;
use super::kubeqos;
use super::runner::{Entry, Round, Strategy};
use crate::koordlet::features;
use crate::koordlet::informer::States;
use crate::os::system::Host;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Pod;

use super::executor::Change;
use crate::api::cpuset;
use crate::api::extension::nodereservation::NodeReservation;
use crate::api::extension::qos::{
    KubeQoS, QoSClass, kube_qos, pod_qos_class, pod_qos_class_with_default,
};
use crate::api::extension::resourcestatus::pinned_cpus;
use crate::api::quantity::q_milli;
use crate::api::slo::nodeslo::{HostApplicationSpec, ResourceThresholdStrategy};
use crate::koordlet::topology::KubeletCpuState;
use crate::os::Resource;
use std::sync::Arc;

/// CFS period the quota is expressed against (µs).
pub const CFS_PERIOD: i64 = 100_000;
/// The smallest quota ever written (0.02 CPU).
pub const MIN_QUOTA: i64 = 2_000;
/// The fewest CPUs BE pods keep under the cpuset policy.
pub const MIN_CPUS: usize = 2;

/// Node-level inputs, milli-cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inputs {
    pub capacity_milli: i64,
    pub threshold_percent: i64,
    pub min_percent: Option<i64>,
    /// Σ usage of pods that are not BE (koord QoS ≠ BE and kube QoS ≠ BestEffort).
    pub non_be_pods_milli: i64,
    /// Σ usage of host applications that are not BE.
    pub non_be_host_milli: i64,
    pub system_used_milli: i64,
}

/// "System used" = max(node used − Σ pods − Σ host apps, 0, node reserved).
pub fn system_used(node_used: i64, pods_used: i64, host_apps_used: i64, node_reserved: i64) -> i64 {
    (node_used - pods_used - host_apps_used)
        .max(0)
        .max(node_reserved)
}

/// S = capacity × threshold% − non-BE pods − non-BE host apps − system, at least
/// capacity × min% when `cpuSuppressMinPercent` is set. May be negative (nothing left).
pub fn suppress_milli(i: &Inputs) -> i64 {
    let s = i.capacity_milli * i.threshold_percent / 100
        - i.non_be_pods_milli
        - i.non_be_host_milli
        - i.system_used_milli;
    match i.min_percent {
        Some(min) => s.max(i.capacity_milli * min / 100),
        None => s,
    }
}

/// The besteffort `cpu.cfs_quota_us` to write, or `None` to leave it.
pub fn cfs_quota(suppress_milli: i64, current: i64, capacity_milli: i64) -> Option<i64> {
    let mut quota = (suppress_milli * CFS_PERIOD / 1000).max(MIN_QUOTA);
    let cores_period = capacity_milli * CFS_PERIOD / 1000;
    if current != -1 {
        // Changes under 1 % of the node are noise, unless it is the floor.
        if (quota - current).abs() < cores_period / 100 && quota != MIN_QUOTA {
            return None;
        }
        // Give CPU back gradually: at most 10 % of the node per round.
        quota = quota.min(current + cores_period / 10);
    }
    (quota != current).then_some(quota)
}

/// How many CPUs BE pods get: ⌈S/1000⌉, at least 2, growing at most 10 % of the node's
/// CPUs (rounded up) beyond the current set per round.
pub fn cpuset_count(suppress_milli: i64, current: usize, total: usize) -> usize {
    let want = (suppress_milli.max(0) as usize)
        .div_ceil(1000)
        .max(MIN_CPUS);
    want.min(current + total.div_ceil(10)).min(total)
}

/// One logical CPU and where it sits.
pub use crate::os::system::CpuInfo as Cpu;

/// Takes `n` CPUs from `pool`: per (NUMA node, socket) bucket, largest buckets first, round
/// robin across buckets — whole physical cores (both hyper-threads) while at least two are
/// still wanted, then single CPUs.
pub fn pick(pool: &[Cpu], n: usize) -> Vec<u32> {
    let mut buckets: BTreeMap<(u32, u32), Vec<Cpu>> = BTreeMap::new();
    for c in pool {
        buckets.entry((c.numa, c.socket)).or_default().push(*c);
    }
    let mut buckets: Vec<Vec<Cpu>> = buckets.into_values().collect();
    for b in &mut buckets {
        b.sort_by_key(|c| (c.core, c.id));
    }
    buckets.sort_by_key(|b| std::cmp::Reverse(b.len()));
    let mut taken: BTreeSet<u32> = BTreeSet::new();
    if buckets.is_empty() {
        return Vec::new();
    }
    let free_core = |b: &[Cpu], taken: &BTreeSet<u32>| {
        let mut cores: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for c in b.iter().filter(|c| !taken.contains(&c.id)) {
            cores.entry(c.core).or_default().push(c.id);
        }
        cores
            .into_values()
            .find(|ids| ids.len() >= 2)
            .map(|ids| [ids[0], ids[1]])
    };
    // One cursor over the buckets for both phases, so the round robin carries on where
    // whole cores ran out.
    let mut cursor = 0;
    let mut idle = 0;
    while taken.len() + 2 <= n && idle < buckets.len() {
        match free_core(&buckets[cursor % buckets.len()], &taken) {
            Some(pair) => {
                taken.extend(pair);
                idle = 0;
            }
            None => idle += 1,
        }
        cursor += 1;
    }
    idle = 0;
    while taken.len() < n && idle < buckets.len() {
        match buckets[cursor % buckets.len()]
            .iter()
            .find(|c| !taken.contains(&c.id))
        {
            Some(c) => {
                taken.insert(c.id);
                idle = 0;
            }
            None => idle += 1,
        }
        cursor += 1;
    }
    taken.into_iter().collect()
}

/// The BE cpuset: candidates exclude reserved, exclusive system and LSE-pinned CPUs; the
/// ones pinned by LSR pods form one pool, the rest another; the share taken from the LSR
/// pool is proportional to its size.
pub fn be_cpuset(
    all: &[Cpu],
    n: usize,
    excluded: &BTreeSet<u32>,
    lsr_pinned: &BTreeSet<u32>,
) -> Vec<u32> {
    let candidates: Vec<Cpu> = all
        .iter()
        .filter(|c| !excluded.contains(&c.id))
        .copied()
        .collect();
    let (lsr, ls): (Vec<Cpu>, Vec<Cpu>) =
        candidates.iter().partition(|c| lsr_pinned.contains(&c.id));
    let total = lsr.len() + ls.len();
    if total == 0 {
        return Vec::new();
    }
    let n = n.min(total);
    let from_lsr = n * lsr.len() / total;
    let mut out = pick(&lsr, from_lsr);
    out.extend(pick(&ls, n - out.len()));
    out.sort_unstable();
    out
}

/// Measured CPU usage in milli-cores (`None`: no recent sample).
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub node: Option<i64>,
    /// Pod uid → usage.
    pub pods: HashMap<String, i64>,
    /// NodeSLO host application name → usage.
    pub host_apps: HashMap<String, i64>,
}

/// What the last pass left in place, so restoring is not repeated every second.
#[derive(Debug, Default)]
pub struct Memory {
    restored: bool,
    /// The CPU the last suppressing pass left BE pods (`koordlet_be_suppress_cpu_cores`, as
    /// Koordinator records it: the cpuset's CPU count, or the besteffort quota in cores) —
    /// what was applied, not the formula's value. `None` when the pass applied nothing.
    pub applied_cores: Option<f64>,
}

fn is_be(pod: &Pod) -> bool {
    pod_qos_class(pod) == QoSClass::Be || kube_qos(pod) == KubeQoS::BestEffort
}

/// Koordinator's `NonBEHostAppFilter` negated: a host application is BE only with QoS `BE`
/// *and* a cgroup under the kube best-effort directory.
fn host_app_is_be(app: &HostApplicationSpec) -> bool {
    app.qos.as_deref() == Some("BE")
        && app.cgroup_path.as_ref().and_then(|c| c.base.as_deref()) == Some("KubepodsBesteffort")
}

/// `GetNodeResourceReserved`'s CPU: the larger of what the kubelet holds back (capacity −
/// allocatable) and the node's `node.koordinator.sh/reservation` annotation.
fn node_reserved_milli(node: &k8s_openapi::api::core::v1::Node, capacity: i64) -> i64 {
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref()?.get("cpu"))
        .map_or(0, q_milli);
    let kubelet = (capacity - allocatable).max(0);
    let annotated = NodeReservation::parse(node.metadata.annotations.as_ref())
        .and_then(|r| r.resources().get("cpu").copied())
        .unwrap_or(0);
    kubelet.max(annotated)
}

/// The inputs of the formula from the informer's state and measured usage
/// (`calculateBESuppressCPU` with `CalculateFilterPodsUsed`). Host applications count as
/// the NodeSLO lists them, each with its last usage if it has one.
pub fn inputs(states: &States, usage: &Usage, s: &ResourceThresholdStrategy) -> Option<Inputs> {
    let node = states.node.as_ref()?;
    let capacity = node
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref()?.get("cpu"))
        .map_or(0, q_milli);
    let reserved = node_reserved_milli(node, capacity);
    let node_used = usage.node?;
    let pods_used: i64 = usage.pods.values().sum();
    let non_be: i64 = states
        .pods
        .iter()
        .filter(|p| !is_be(&p.pod))
        .filter_map(|p| usage.pods.get(&p.uid))
        .sum();
    // Pods measured but unknown to the informer count as non-BE.
    let known: BTreeSet<&str> = states.pods.iter().map(|p| p.uid.as_str()).collect();
    let unknown: i64 = usage
        .pods
        .iter()
        .filter(|(uid, _)| !known.contains(uid.as_str()))
        .map(|(_, v)| v)
        .sum();
    let (mut apps_used, mut non_be_apps) = (0, 0);
    for app in &states.slo().host_applications {
        let Some(used) = app.name.as_deref().and_then(|n| usage.host_apps.get(n)) else {
            continue;
        };
        apps_used += used;
        if !host_app_is_be(app) {
            non_be_apps += used;
        }
    }
    Some(Inputs {
        capacity_milli: capacity,
        threshold_percent: s.cpu_suppress_threshold_percent.unwrap_or(65),
        min_percent: s.cpu_suppress_min_percent,
        non_be_pods_milli: non_be + unknown,
        non_be_host_milli: non_be_apps,
        system_used_milli: system_used(node_used, pods_used, apps_used, reserved),
    })
}

mod write;
use write::{
    apply_cpuset, apply_cpuset_static, collect, restore_for_be_cpu_manager, set_quota,
    set_quota_over_be,
};

/// CPUs BE pods may never use: those pinned by LSE pods, the node's reserved CPUs and its
/// exclusive system-QoS CPUs (`calcBECPUSet`, and the candidates of `adjustByCPUSet`).
fn excluded_cpus(states: &States) -> BTreeSet<u32> {
    let mut out: BTreeSet<u32> = states
        .pods
        .iter()
        .filter(|p| pod_qos_class_with_default(&p.pod) == QoSClass::Lse)
        .flat_map(|p| pinned_cpus(&p.pod))
        .collect();
    if let Some(node) = states.node.as_deref() {
        out.extend(crate::koordlet::topology::reserved(node));
    }
    out
}

/// What decides how a round writes, beside the NodeSLO.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodePolicy {
    /// The kubelet runs the static CPU manager (the cpuset policy writes containers only).
    pub kubelet_static: bool,
    /// The BECPUManager gate: no suppression, the BE pool restored each round.
    pub be_cpu_manager: bool,
    /// The CoreSched gate: its `schedIdle` rule shares besteffort's `cpu.idle` (`kubeqos`).
    pub core_sched: bool,
}

/// One cpusuppress round; returns the changes written. Under the `cpuIdle` policy the
/// besteffort level also runs as `cpu.idle` (and the cpuset policy's CPU count applies);
/// leaving it, the level gets the kubelet's weight back.
pub fn pass(
    states: &States,
    usage: &Usage,
    topo: &[Cpu],
    ex: &Executor,
    mem: &mut Memory,
    policy: NodePolicy,
) -> Vec<Change> {
    let mut out = suppress(states, usage, topo, ex, mem, policy);
    let by_core_sched = policy.core_sched
        && super::coresched::Rule::new(&states.slo().resource_qos).cpu_idle(KubeQoS::BestEffort);
    let idle = kubeqos::wants_idle(states, KubeQoS::BestEffort, by_core_sched);
    collect(
        kubeqos::set_idle(ex, states, KubeQoS::BestEffort, idle),
        &mut out,
    );
    out
}

fn suppress(
    states: &States,
    usage: &Usage,
    topo: &[Cpu],
    ex: &Executor,
    mem: &mut Memory,
    policy: NodePolicy,
) -> Vec<Change> {
    let s = &states.slo().threshold;
    let mut out = Vec::new();
    if s.enable != Some(true) && mem.restored && !policy.be_cpu_manager {
        return out;
    }
    let excluded = excluded_cpus(states);
    let all: Vec<u32> = topo
        .iter()
        .map(|c| c.id)
        .filter(|c| !excluded.contains(c))
        .collect();
    if policy.be_cpu_manager {
        // Koordinator's suppressBECPU does not run beside BECPUManager, whatever the NodeSLO.
        set_quota(ex, -1, &mut out);
        restore_for_be_cpu_manager(ex, states, &all, &mut out);
        return out;
    }
    if s.enable != Some(true) {
        if !mem.restored {
            set_quota(ex, -1, &mut out);
            apply_cpuset(ex, states, &all, &mut out);
            mem.restored = true;
        }
        return out;
    }
    mem.restored = false;
    mem.applied_cores = None;
    let Some(i) = inputs(states, usage, s) else {
        return out;
    };
    let suppress = suppress_milli(&i);
    if s.cpu_suppress_policy.as_deref() == Some("cfsQuota") {
        let dir = ex.cgroups().qos_dir(KubeQoS::BestEffort);
        let current = ex
            .cgroups()
            .read_i64(Resource::CfsQuota, &dir)
            .unwrap_or(-1);
        let now = match cfs_quota(suppress, current, i.capacity_milli) {
            Some(q) if set_quota_over_be(ex, states, q, &mut out) => q,
            _ => current,
        };
        mem.applied_cores = (now > 0).then(|| now as f64 / CFS_PERIOD as f64);
        apply_cpuset(ex, states, &all, &mut out);
        return out;
    }
    let qos = ex.cgroups().qos_dir(KubeQoS::BestEffort);
    let current = ex
        .cgroups()
        .read(Resource::CpusetCpus, &qos)
        .ok()
        .and_then(|c| cpuset::parse(c.trim()).ok())
        .unwrap_or_default();
    let n = cpuset_count(suppress, current.len(), all.len());
    let lsr: BTreeSet<u32> = states
        .pods
        .iter()
        .filter(|p| p.facts.qos == QoSClass::Lsr)
        .flat_map(|p| pinned_cpus(&p.pod))
        .collect();
    let cpus = be_cpuset(topo, n, &excluded, &lsr);
    if !cpus.is_empty() {
        mem.applied_cores = Some(cpus.len() as f64);
        if policy.kubelet_static {
            apply_cpuset_static(ex, states, &all, &cpus, &mut out);
        } else {
            apply_cpuset(ex, states, &cpus, &mut out);
        }
    }
    set_quota(ex, -1, &mut out);
    out
}

/// cpusuppress every second (`pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go`).
pub struct CpuSuppress {
    pub ex: Arc<Executor>,
    pub host: Host,
    pub client: kube::Client,
    pub topo: Vec<crate::os::system::CpuInfo>,
    pub mem: Memory,
    /// The kubelet's CPU manager checkpoint (`cpu_manager_state`): its policy.
    pub kubelet_state: std::path::PathBuf,
    /// The BECPUManager gate.
    pub be_cpu_manager: bool,
    /// The CoreSched gate.
    pub core_sched: bool,
}

impl Strategy for CpuSuppress {
    fn name(&self) -> &'static str {
        "cpusuppress"
    }

    fn prepare(&mut self) -> bool {
        self.topo = self.host.cpu_topology().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "no CPU topology; the cpuset policy cannot pick CPUs");
            Vec::new()
        });
        true
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let strategy = &states.slo().threshold;
            // As Koordinator's suppressBECPU: usage is read and the suppress series recorded
            // only while the strategy is on; off, a round restores (once) what an earlier
            // suppression changed (`pass`).
            let on = strategy.enable == Some(true) && !self.be_cpu_manager;
            let usage = if on {
                let (node, pods) = last_cpu(ctx, states);
                let host_apps = last_host_app_cpu(ctx, states);
                Usage {
                    node,
                    pods,
                    host_apps,
                }
            } else {
                Usage::default()
            };
            let cpuset_policy = strategy.cpu_suppress_policy.as_deref() != Some("cfsQuota");
            let policy = NodePolicy {
                kubelet_static: on
                    && cpuset_policy
                    && KubeletCpuState::read(&self.kubelet_state).policy_name == "static",
                be_cpu_manager: self.be_cpu_manager,
                core_sched: self.core_sched,
            };
            let changes = pass(states, &usage, &self.topo, &self.ex, &mut self.mem, policy);
            if on && let Some(i) = inputs(states, &usage, strategy) {
                let milli = suppress_milli(&i);
                ctx.metrics.be_suppress_milli.set(milli);
                let kind = strategy.cpu_suppress_policy.as_deref().unwrap_or("cpuset");
                let node = states.node.as_ref().and_then(|n| n.metadata.name.clone());
                let l = vec![
                    ("node", node.unwrap_or_default()),
                    ("type", kind.to_string()),
                ];
                if let Some(applied) = self.mem.applied_cores {
                    let cores = ctx.metrics.be_suppress_cores.get_or_create(&l);
                    cores.set(applied);
                }
                let node = crate::koordlet::metrics::node_only(&l[0].1);
                let ls = ctx.metrics.be_suppress_ls_used.get_or_create(&node);
                ls.set(i.non_be_pods_milli as f64 / 1000.0);
                let be = usage.pods.values().sum::<i64>() - i.non_be_pods_milli;
                let be_used = ctx.metrics.be_suppress_be_used.get_or_create(&node);
                be_used.set(be.max(0) as f64 / 1000.0);
            }
            for c in &changes {
                count(ctx, "cpusuppress", format!("{:?}", c.resource), 1);
            }
            // One event per round that changed the besteffort QoS level (not per pod/container).
            let qos_dir = self
                .ex
                .cgroups()
                .qos_dir(crate::api::extension::qos::KubeQoS::BestEffort);
            if let Some(c) = changes.iter().find(|c| c.dir == qos_dir.as_str())
                && let Some(node) = states.node.as_ref().and_then(|n| n.metadata.name.clone())
            {
                let msg = format!("best-effort {:?} {} -> {}", c.resource, c.old, c.new);
                evictor::node_event(&self.client, &node, "BECPUSuppressed", &msg).await;
            }
            Round::DONE
        }
        .boxed()
    }
}

/// BECPUSuppress.
pub const ENTRY: Entry = Entry {
    gate: features::BECPU_SUPPRESS,
    build: |d| {
        Box::new(CpuSuppress {
            ex: d.executor.clone(),
            host: d.host.clone(),
            client: d.client.clone(),
            topo: Vec::new(),
            mem: Memory::default(),
            kubelet_state: d.kubelet_state.clone(),
            be_cpu_manager: d.be_cpu_manager,
            core_sched: d.core_sched,
        })
    },
};

#[cfg(test)]
#[path = "cpusuppress_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "cpusuppress_pass_tests.rs"]
mod pass_tests;
