//! The cgroup and kernel-knob QoS strategies of the running koordlet, fed by the informer
//! and the metric store, each one [`Strategy`] run by [`super::runner`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::koordlet::informer::States;
use crate::koordlet::store::{MetricKind, SeriesKey};
use crate::os::system::Host;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::executor::Executor;
use super::runner::{Round, Strategy};
use super::{cpusuppress, evict, suppress};
use crate::kernel::features::Gate;
use crate::koordlet::features;

use super::context::{LAST, QosCtx, count, last_cpu, now_ms, record};

/// cpusuppress every second (`pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go`).
pub struct CpuSuppress {
    pub ex: Arc<Executor>,
    pub host: Host,
    pub client: kube::Client,
    pub topo: Vec<crate::os::system::CpuInfo>,
    pub mem: suppress::Memory,
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
            let (node, pods) = last_cpu(ctx, states);
            let usage = suppress::Usage { node, pods };
            let strategy = suppress::strategy(states);
            if let Some(i) = suppress::inputs(states, &usage, strategy) {
                let milli = cpusuppress::suppress_milli(&i);
                ctx.metrics.be_suppress_milli.set(milli);
                let kind = strategy.cpu_suppress_policy.as_deref().unwrap_or("cpuset");
                let node = states.node.as_ref().and_then(|n| n.metadata.name.clone());
                let l = vec![
                    ("node", node.unwrap_or_default()),
                    ("type", kind.to_string()),
                ];
                let cores = ctx.metrics.be_suppress_cores.get_or_create(&l);
                cores.set(milli as f64 / 1000.0);
                let node = crate::koordlet::metrics::node_only(&l[0].1);
                let ls = ctx.metrics.be_suppress_ls_used.get_or_create(&node);
                ls.set(i.non_be_pods_milli as f64 / 1000.0);
                let be = usage.pods.values().sum::<i64>() - i.non_be_pods_milli;
                let be_used = ctx.metrics.be_suppress_be_used.get_or_create(&node);
                be_used.set(be.max(0) as f64 / 1000.0);
            }
            let changes = suppress::pass(states, &usage, &self.topo, &self.ex, &mut self.mem);
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
                evict::node_event(&self.client, &node, "BECPUSuppressed", &msg).await;
            }
            Round::DONE
        }
        .boxed()
    }
}

/// What a per-pod reconciler wants written for one pod (levels: pod, then containers).
type PodUpdates =
    fn(&States, &crate::koordlet::informer::PodMeta) -> Vec<Vec<super::executor::Update>>;

/// Every second, writes what `updates` wants for each pod.
pub struct Reconcile {
    pub ex: Arc<Executor>,
    pub name: &'static str,
    pub updates: PodUpdates,
}

impl Strategy for Reconcile {
    fn name(&self) -> &'static str {
        self.name
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        for pod in states.pods.iter() {
            let results = self.ex.leveled(&(self.updates)(states, pod));
            record(ctx, self.name, &pod.name, results);
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// BatchResource: BE pod and container cgroups get shares, quota and memory limits from
/// their batch resources.
pub fn batchresource(ex: Arc<Executor>) -> Reconcile {
    Reconcile {
        ex,
        name: "batchresource",
        updates: |states, pod| {
            let s = suppress::strategy(states);
            let by_quota =
                s.enable == Some(true) && s.cpu_suppress_policy.as_deref() == Some("cfsQuota");
            let ratio = super::batchresource::normalization_ratio(states.node.as_deref());
            super::batchresource::updates(pod, by_quota, ratio)
        },
    }
}

/// CPUBurst every second (`pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst.go`):
/// `cfs_burst_us` for LS pods, then the cfsQuotaBurst scaling of throttled containers under
/// the node's share-pool state.
pub struct CpuBurst {
    pub ex: Arc<Executor>,
    pub host: Host,
    pub topo_cpus: usize,
    pub clock: std::time::Instant,
    pub limiters: HashMap<String, super::cfsquotaburst::Limiter>,
}

impl CpuBurst {
    pub fn new(ex: Arc<Executor>, host: Host) -> CpuBurst {
        CpuBurst {
            ex,
            host,
            topo_cpus: 0,
            clock: std::time::Instant::now(),
            limiters: HashMap::new(),
        }
    }
}

impl Strategy for CpuBurst {
    fn name(&self) -> &'static str {
        "cpuburst"
    }

    fn prepare(&mut self) -> bool {
        self.topo_cpus = self.host.cpu_topology().map(|t| t.len()).unwrap_or(0);
        true
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        use super::cfsquotaburst::node_state;
        let cg = self.ex.cgroups().clone();
        let quota =
            move |d: &crate::os::CgroupDir| cg.read_i64(crate::os::Resource::CfsQuota, d).ok();
        let cfg = super::cpuburst::node_strategy(states);
        let cpus = if self.topo_cpus > 0 {
            self.topo_cpus
        } else {
            node_cpus(states)
        };
        let (node_used, pool) = share_pool(ctx, states);
        let now = self.clock.elapsed().as_secs_f64();
        let env = super::cpuburst::CfsEnv {
            node: node_state(
                cfg.share_pool_threshold_percent.unwrap_or(50),
                cpus,
                node_used,
                &pool,
            ),
            now,
            quota: &quota,
            throttled: &|id| last_container(ctx, MetricKind::ContainerCpuThrottled, id),
            usage: &|id| last_container(ctx, MetricKind::ContainerCpuUsage, id),
            fill: &random_fill,
        };
        let mut scaled = Vec::new();
        for pod in states.pods.iter() {
            let burst = super::cpuburst::updates(states, pod, &quota);
            let mut results = self.ex.leveled(&burst);
            scaled.extend(super::cpuburst::scaled_values(pod, burst.iter().flatten()));
            for u in super::cpuburst::cfs_updates(states, pod, &env, &mut self.limiters) {
                let r = self.ex.update(&u);
                let failed = r.is_err();
                results.push(r);
                if failed {
                    break; // later steps rely on this one (parent ≥ child, burst ≤ quota)
                }
                scaled.extend(super::cpuburst::scaled_values(pod, [&u]));
            }
            record(ctx, "cpuburst", &pod.name, results);
        }
        let node = states.node.as_ref().and_then(|n| n.metadata.name.clone());
        let live = states.pods.iter().flat_map(|p| &p.containers);
        let live = live.map(|c| crate::koordlet::informer::PodMeta::container_id(c).to_string());
        ctx.metrics
            .ops
            .set_scaled_cfs(&node.unwrap_or_default(), scaled, live.collect());
        self.limiters.retain(|_, l| !l.expired(now));
        futures::future::ready(Round::DONE).boxed()
    }
}

fn node_cpus(states: &States) -> usize {
    states
        .node
        .as_ref()
        .and_then(|n| n.status.as_ref()?.capacity.as_ref()?.get("cpu"))
        .map_or(0, |q| {
            (crate::api::quantity::q_milli(q) / 1000).max(0) as usize
        })
}

/// Node CPU and per-pod CPU (cores) averaged over min(5 × 1 s, 10 s).
fn share_pool(ctx: &QosCtx, states: &States) -> (Option<f64>, Vec<super::cfsquotaburst::PoolPod>) {
    let now = now_ms();
    let avg = |key: &SeriesKey| {
        let a = ctx.store.aggregate(key, now - 5_000, now).ok().flatten()?;
        Some(a.avg)
    };
    let pods = states
        .pods
        .iter()
        .map(|p| super::cfsquotaburst::PoolPod {
            qos: crate::api::extension::qos::pod_qos_class(&p.pod),
            request_milli: crate::api::pod::pod_requests(&p.pod)
                .get(crate::api::extension::resources::CPU)
                .copied()
                .unwrap_or(0),
            usage: avg(&SeriesKey::pod(MetricKind::PodCpuUsage, &p.uid)),
        })
        .collect();
    (avg(&SeriesKey::node(MetricKind::NodeCpuUsage)), pods)
}

fn last_container(ctx: &QosCtx, kind: MetricKind, id: &str) -> Option<f64> {
    let now = now_ms();
    let points = ctx
        .store
        .query(&SeriesKey::container(kind, id), now - LAST, now)
        .ok()?;
    points.last().map(|p| p.value)
}

fn random_fill() -> f64 {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new().hash_one(0u8);
    (r % 1_000_000) as f64 / 2_000_000.0
}

/// CgroupReconcile (memory QoS) every second: QoS, pod and container levels at once.
pub struct CgReconcile {
    pub ex: Arc<Executor>,
}

impl Strategy for CgReconcile {
    fn name(&self) -> &'static str {
        "cgreconcile"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        for r in self
            .ex
            .leveled(&super::cgreconcile::updates(states, self.ex.cgroups()))
        {
            match r {
                Ok(super::executor::Outcome::Written(c)) => {
                    count(ctx, "cgreconcile", format!("{:?}", c.resource), 1)
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "memory QoS value rejected"),
            }
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// SystemConfig every second: kernel memory knobs from the NodeSLO systemStrategy.
pub struct SysReconcile {
    pub host: Host,
}

impl Strategy for SysReconcile {
    fn name(&self) -> &'static str {
        "sysreconcile"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        for (knob, _, _) in super::sysreconcile::pass(states, &self.host) {
            count(ctx, "sysreconcile", format!("{knob:?}"), 1);
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// RdtResctrl every second, when the host supports it (else one warning and done).
pub struct Resctrl {
    pub host: Host,
    pub ex: Arc<Executor>,
}

impl Strategy for Resctrl {
    fn name(&self) -> &'static str {
        "resctrl"
    }

    fn prepare(&mut self) -> bool {
        match super::resctrl::supported(&self.host) {
            Ok(true) => true,
            Ok(false) => {
                tracing::warn!(root = %self.host.resctrl_root().display(), "resctrl unsupported here (no cat_l3/mba or not mounted); LLC/MBA isolation skipped");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "resctrl support unknown; LLC/MBA isolation skipped");
                false
            }
        }
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        match super::resctrl::pass(states, &self.host, &self.ex) {
            Ok(written) => {
                for w in written {
                    count(ctx, "resctrl", w, 1);
                }
            }
            Err(e) => tracing::warn!(error = %e, "resctrl round failed"),
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// BlkIOReconcile every second (cgroup v1): BE block-device throttles and weight.
pub struct Blkio {
    pub host: Host,
    pub ex: Arc<Executor>,
}

impl Strategy for Blkio {
    fn name(&self) -> &'static str {
        "blkio"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        for w in super::blkio::pass(states, &self.host, &self.ex) {
            tracing::info!(change = %w, "blkio updated");
            let what = w.split_whitespace().next().unwrap_or("").to_string();
            count(ctx, "blkio", what, 1);
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// What the QoS strategies share.
pub struct Deps {
    pub executor: Arc<Executor>,
    pub host: Host,
    pub client: kube::Client,
    pub collect_interval: Duration,
    /// Shared by every eviction strategy (one memory of recently evicted pods).
    pub evictor: Arc<super::evict::Evictor>,
}

/// Every QoS strategy with the koordlet feature gate that switches it on.
pub fn registry(d: &Deps) -> Vec<(Gate, Box<dyn Strategy>)> {
    use super::evictloops::{AllocatableEvict, CpuEvict, MemoryEvict, UsageEvict};
    let ex = || d.executor.clone();
    let (client, evictor) = (|| d.client.clone(), || d.evictor.clone());
    let suppress = CpuSuppress {
        ex: ex(),
        host: d.host.clone(),
        client: client(),
        topo: Vec::new(),
        mem: suppress::Memory::default(),
    };
    vec![
        (
            features::BECPU_SUPPRESS,
            Box::new(suppress) as Box<dyn Strategy>,
        ),
        (features::BATCH_RESOURCE, Box::new(batchresource(ex()))),
        (
            features::CPU_SET_ALLOCATOR,
            Box::new(super::hookreconcile::Cpusets {
                ex: ex(),
                host: d.host.clone(),
                online: Vec::new(),
            }),
        ),
        (
            features::GROUP_IDENTITY,
            Box::new(super::hookreconcile::Bvt { ex: ex() }),
        ),
        (
            features::CPU_NORMALIZATION,
            Box::new(Reconcile {
                ex: ex(),
                name: "cpunormalization",
                updates: super::cpunormalization::updates,
            }),
        ),
        (
            features::CORE_SCHED,
            Box::new(super::coresched::CoreSched::new(
                ex(),
                d.host.proc_root.clone(),
                Arc::new(crate::os::coresched::Prctl),
            )),
        ),
        (
            features::OOM_SCORE_ADJ,
            Box::new(super::oomscoreadj::OomScoreAdj {
                ex: ex(),
                proc_root: d.host.proc_root.clone(),
            }),
        ),
        (
            features::CPU_BURST,
            Box::new(CpuBurst::new(ex(), d.host.clone())),
        ),
        (
            features::CGROUP_RECONCILE,
            Box::new(CgReconcile { ex: ex() }),
        ),
        (
            features::RDT_RESCTRL,
            Box::new(Resctrl {
                host: d.host.clone(),
                ex: ex(),
            }),
        ),
        (
            features::BLK_IO_RECONCILE,
            Box::new(Blkio {
                host: d.host.clone(),
                ex: ex(),
            }),
        ),
        (
            features::SYSTEM_CONFIG,
            Box::new(SysReconcile {
                host: d.host.clone(),
            }),
        ),
        (
            features::BECPU_EVICT,
            Box::new(CpuEvict {
                client: client(),
                evictor: evictor(),
                collect_interval: d.collect_interval,
            }),
        ),
        (
            features::BE_MEMORY_EVICT,
            Box::new(MemoryEvict {
                client: client(),
                evictor: evictor(),
            }),
        ),
        (
            features::CPU_EVICT,
            Box::new(UsageEvict {
                client: client(),
                evictor: evictor(),
                feature: "CPUEvict",
            }),
        ),
        (
            features::MEMORY_EVICT,
            Box::new(UsageEvict {
                client: client(),
                evictor: evictor(),
                feature: "MemoryEvict",
            }),
        ),
        (
            features::CPU_ALLOCATABLE_EVICT,
            Box::new(AllocatableEvict {
                client: client(),
                evictor: evictor(),
                cpu: true,
            }),
        ),
        (
            features::MEMORY_ALLOCATABLE_EVICT,
            Box::new(AllocatableEvict {
                client: client(),
                evictor: evictor(),
                cpu: false,
            }),
        ),
    ]
}

/// Starts every QoS strategy whose koordlet feature gate is on.
pub fn spawn(
    gates: &crate::koordlet::features::Gates,
    ctx: impl Fn() -> QosCtx,
    d: Deps,
    tasks: &crate::kernel::Tasks,
) {
    for (gate, strategy) in registry(&d) {
        if gates.on(gate) {
            let name = format!("koordlet/qos/{}", strategy.name());
            tasks.spawn(name, super::runner::run(ctx(), strategy));
        }
    }
}
