//! NodeNUMAResource (`pkg/scheduler/plugins/nodenumaresource`): LSE/LSR koord-prod pods
//! asking for whole CPUs get a cpuset (FullPCPUs / SpreadByPCPUs, exclusive policies),
//! pods under a NUMA topology policy get NUMA-aligned resources; both are written to the
//! pod's `scheduling.koordinator.sh/resource-status` at PreBind, from which the koordlet
//! pins the containers. Each node's topology comes from its NodeResourceTopology; what is
//! taken comes from the resource-status of the pods on it.

pub mod affinity;
pub mod alloc;
pub mod args;
pub mod error;
pub mod hints;
mod status;
pub mod take;

#[cfg(test)]
mod tests;

use alloc::{Allocation, Bind, NodeState, Request};
use status::{policy_name, status_json};
use take::Exclusive;

use crate::api::cpuset;
use crate::api::extension::keys::{ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS};
use crate::api::extension::numa_res::NumaRes;
use crate::api::extension::priority::PriorityClass;
use crate::api::extension::qos::{QoSClass, pod_qos_class};
use crate::api::extension::resourcestatus as rs;
use crate::scheduler::framework::memo::{self, Memoized};
use crate::scheduler::framework::res::{R_BATCH_CPU, R_BATCH_MEMORY, R_CPU, R_MEMORY};
use crate::scheduler::framework::{
    ClusterState, CycleState, NodeInfo, Plugin, PodDraft, PodInfo, Point, PreFilterResult, Status,
};
use crate::scheduler::model::topology::{
    BindPolicy, NodeFacts, NumaPolicy, Strategy, TopologyOptions,
};
use crate::scheduler::plugins::deviceshare;

pub const NAME: &str = "NodeNUMAResource";
const ALLOC_KEY: &str = "NodeNUMAResource/allocation";

pub const ERR_NOT_MATCH_NUMA_TOPOLOGY: &str = "node(s) NUMA Topology policy not match";
pub const ERR_INVALID_REQUESTED_CPUS: &str = "the requested CPUs must be integer";
pub const ERR_INVALID_CPU_TOPOLOGY: &str = "node(s) invalid CPU Topology";
pub const ERR_SMT_ALIGNMENT: &str = "node(s) requested cpus not multiple cpus per core";
pub const ERR_CPU_BIND_POLICY_CONFLICT: &str =
    "node(s) cpu bind policy conflicts with pod's required cpu bind policy";
pub const ERR_INVALID_AMPLIFICATION_RATIO: &str = "node(s) invalid CPU amplification ratio";
pub const ERR_INSUFFICIENT_AMPLIFIED_CPU: &str = "Insufficient amplified cpu";

pub struct NodeNUMAResource {
    args: args::Args,
    /// This instance's slot in node memos (the node's labels and annotations, parsed).
    owner: usize,
}

/// What PreFilter learned about the pod.
struct PreState {
    /// cpu, memory, batch-cpu, batch-memory requested.
    res: NumaRes,
    /// (policy, required, exclusive) when the pod itself asks to be pinned.
    bind: Option<(BindPolicy, bool, Exclusive)>,
    pod_numa: Option<NumaPolicy>,
    /// `singleNUMANodeExclusive` is Required (the default under a pod-level policy).
    numa_exclusive: bool,
    /// The pod's resource-spec names a bind policy already.
    has_policy: bool,
}

/// Reserve's decision, for PreBind.
#[derive(Debug, Clone)]
struct Reserved {
    alloc: Allocation,
    /// A required policy the node forced on the pod (written back to its resource-spec).
    forced: Option<BindPolicy>,
    bound: Option<BindPolicy>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Filter,
    Score,
    Reserve,
}

/// The node's forced policy: its `cpu-bind-policy` label, or kubelet's full-pcpus-only.
fn node_bind_policy(facts: &NodeFacts, opts: &TopologyOptions) -> Option<BindPolicy> {
    match facts.bind_label {
        Some(p) => p,
        None if opts.kubelet_full_pcpus_only => Some(BindPolicy::FullPcpus),
        None => None,
    }
}

fn amplification_ratio(facts: &NodeFacts) -> Result<f64, Status> {
    facts
        .cpu_ratio
        .ok_or_else(|| Status::unresolvable(ERR_INVALID_AMPLIFICATION_RATIO))
}

static EMPTY: std::sync::LazyLock<TopologyOptions> =
    std::sync::LazyLock::new(TopologyOptions::default);

fn topology_of(node: &NodeInfo) -> &TopologyOptions {
    node.topology.as_deref().unwrap_or(&EMPTY)
}

fn amplify(v: i64, ratio: f64) -> i64 {
    if ratio <= 1.0 {
        v
    } else {
        (v as f64 * ratio).ceil() as i64
    }
}

impl NodeNUMAResource {
    pub fn new(raw: args::RawArgs) -> Result<NodeNUMAResource, crate::api::field::FieldError> {
        Ok(NodeNUMAResource {
            args: args::Args::new(raw)?,
            owner: memo::owner_id(),
        })
    }

    /// The node's labels and annotations as this plugin reads them, parsed once per state
    /// of the node.
    fn facts<'a>(&self, node: &'a NodeInfo) -> Memoized<'a, NodeFacts> {
        node.memo
            .get_or_init(self.owner, || NodeFacts::of(&node.node))
    }

    fn strategy(&self, facts: &NodeFacts) -> Strategy {
        facts.strategy.unwrap_or(self.args.numa_strategy)
    }

    fn pre_state(&self, pod: &PodInfo) -> Result<Option<PreState>, Status> {
        let spec = rs::resource_spec(&pod.pod).map_err(|e| Status::error(e.to_string()))?;
        let numa = rs::numa_topology_spec(&pod.pod).map_err(|e| Status::error(e.to_string()))?;
        let res = NumaRes([R_CPU, R_MEMORY, R_BATCH_CPU, R_BATCH_MEMORY].map(|r| pod.req.get(r)));
        let cpu_milli = res.cpu();
        if pod.requests.values().all(|v| *v == 0) {
            return Ok(None);
        }
        let pod_numa = match numa.numa_topology_policy.as_str() {
            "" => None,
            p => Some(NumaPolicy::parse(p).ok_or_else(|| {
                Status::unresolvable(format!("unknown NUMA topology policy {p:?}"))
            })?),
        };
        let mut st = PreState {
            res,
            bind: None,
            pod_numa,
            numa_exclusive: numa.single_numa_node_exclusive != "Preferred",
            has_policy: spec
                .preferred_cpu_bind_policy
                .as_deref()
                .is_some_and(|p| !p.is_empty() && p != "Default")
                || spec
                    .required_cpu_bind_policy
                    .as_deref()
                    .is_some_and(|p| !p.is_empty()),
        };
        let eligible = matches!(pod_qos_class(&pod.pod), QoSClass::Lse | QoSClass::Lsr)
            && pod.class == PriorityClass::Prod;
        if eligible {
            let parse = |s: Option<&str>| -> Result<Option<BindPolicy>, Status> {
                match s {
                    None | Some("") | Some("Default") => Ok(self.args.default_bind),
                    Some(p) => {
                        args::bind_policy(p).map_err(|e| Status::unresolvable(e.to_string()))
                    }
                }
            };
            let preferred = parse(spec.preferred_cpu_bind_policy.as_deref())?;
            let required = match spec.required_cpu_bind_policy.as_deref() {
                None | Some("") => None,
                r => parse(r)?,
            };
            if let Some(p) = required.or(preferred) {
                if cpu_milli % 1000 != 0 {
                    return Err(Status::unresolvable(ERR_INVALID_REQUESTED_CPUS));
                }
                if cpu_milli > 0 {
                    let ex = Exclusive::parse(
                        spec.preferred_cpu_exclusive_policy.as_deref().unwrap_or(""),
                    );
                    st.bind = Some((p, required.is_some(), ex));
                }
            }
        }
        Ok(Some(st))
    }

    /// The pod's request on this node: the pod's own bind wish, or the node's forced policy
    /// for every pod with a CPU request.
    fn request(
        &self,
        st: &PreState,
        facts: &NodeFacts,
        opts: &TopologyOptions,
    ) -> Result<Request, Status> {
        let forced = node_bind_policy(facts, opts);
        let mut bind = st.bind.map(|(policy, required, exclusive)| Bind {
            policy,
            required,
            exclusive,
        });
        if bind.is_none()
            && let Some(f) = forced
            && st.res.cpu() > 0
        {
            if st.res.cpu() % 1000 != 0 {
                return Err(Status::unresolvable(ERR_INVALID_REQUESTED_CPUS));
            }
            bind = Some(Bind {
                policy: f,
                required: true,
                exclusive: Exclusive::None,
            });
        }
        if let Some(b) = bind.as_mut() {
            if let Some(f) = forced {
                if b.required && b.policy != f {
                    return Err(Status::unresolvable(ERR_CPU_BIND_POLICY_CONFLICT));
                }
                b.policy = f;
                b.required = true;
            }
            if !opts.topo.is_valid() {
                return Err(Status::unresolvable(ERR_INVALID_CPU_TOPOLOGY));
            }
            if b.required
                && b.policy == BindPolicy::FullPcpus
                && !((st.res.cpu() / 1000) as usize)
                    .is_multiple_of(opts.topo.cpus_per_core().max(1))
            {
                return Err(Status::unresolvable(ERR_SMT_ALIGNMENT));
            }
        }
        Ok(Request { res: st.res, bind })
    }

    fn numa_policy(
        &self,
        st: &PreState,
        facts: &NodeFacts,
        opts: &TopologyOptions,
    ) -> Result<NumaPolicy, Status> {
        let node_policy = facts
            .numa_label
            .or(opts.policy)
            .filter(|p| *p != NumaPolicy::None);
        match (node_policy, st.pod_numa.filter(|p| *p != NumaPolicy::None)) {
            (Some(n), Some(p)) if n != p => Err(Status::unresolvable(ERR_NOT_MATCH_NUMA_TOPOLOGY)),
            (_, Some(p)) => Ok(p),
            (Some(n), None) => Ok(n),
            (None, None) => Ok(NumaPolicy::None),
        }
    }

    /// The pod's allocation on `node` (`None`: nothing to allocate, or not checked in this
    /// phase), or why the node cannot take the pod.
    fn plan(
        &self,
        (state, st): (&CycleState, &PreState),
        pod: &PodInfo,
        (node, cluster): (&NodeInfo, &ClusterState),
        phase: Phase,
    ) -> Result<Option<(Allocation, Request)>, Status> {
        let opts = topology_of(node);
        let facts = self.facts(node);
        let policy = self.numa_policy(st, &facts, opts)?;
        let req = self.request(st, &facts, opts)?;
        if phase == Phase::Filter {
            self.filter_amplified(&req, &facts, node, pod)?;
        }
        if req.bind.is_none() && policy == NumaPolicy::None {
            return Ok(None);
        }
        let check_now = match phase {
            Phase::Filter => {
                matches!(policy, NumaPolicy::Restricted | NumaPolicy::SingleNumaNode)
                    || (policy == NumaPolicy::None && req.bind.is_some_and(|b| b.required))
            }
            Phase::Score | Phase::Reserve => true,
        };
        if !check_now {
            return Ok(None);
        }
        let ns = NodeState::in_cycle(state, pod, node, cluster);
        let all = opts.numa.keys().fold(0u64, |m, n| m | (1 << n));
        let hint = if policy == NumaPolicy::None {
            None
        } else {
            if opts.numa.is_empty() {
                return Err(Status::unresolvable("insufficient resources on NUMA Node"));
            }
            let exclusive = st.pod_numa.is_some() && st.numa_exclusive;
            let mut hs = hints::generate(opts, &ns, &req, policy, exclusive);
            if let Some(devices) = deviceshare::numa::topology_hints(state, node, cluster)? {
                hs.extend(devices);
            }
            hints::admit(policy, &hs, all).map_err(|e| Status::unschedulable(e.to_string()))?
        };
        if let Some(mask) = hint {
            affinity::set(state, &node.name, mask);
        }
        let a = alloc::allocate(opts, &ns, &req, hint, self.strategy(&facts))
            .map_err(|e| Status::unschedulable(e.to_string()))?;
        Ok(Some((a, req)))
    }

    fn filter_amplified(
        &self,
        req: &Request,
        facts: &NodeFacts,
        node: &NodeInfo,
        pod: &PodInfo,
    ) -> Result<(), Status> {
        let ratio = amplification_ratio(facts)?;
        if req.cpu_milli() == 0 || ratio <= 1.0 {
            return Ok(());
        }
        let want = if req.bind.is_some() {
            amplify(req.cpu_milli(), ratio)
        } else {
            req.cpu_milli()
        };
        let pinned = NodeState::of(node, &|k| k == pod.key).held.len() as i64 * 1000;
        let mut requested = node.req.get(R_CPU);
        if requested >= pinned && pinned > 0 {
            requested = requested - pinned + amplify(pinned, ratio);
        }
        if want > node.alloc.get(R_CPU) - requested {
            return Err(Status::unschedulable(ERR_INSUFFICIENT_AMPLIFIED_CPU));
        }
        Ok(())
    }

    fn least_or_most(&self, requested: impl Iterator<Item = (i64, i64, i64)>) -> i64 {
        let (mut sum, mut weights) = (0i64, 0i64);
        for (req, cap, w) in requested.filter(|(_, cap, _)| *cap > 0) {
            let s = match self.args.scoring.strategy {
                Strategy::LeastAllocated if req > cap => 0,
                Strategy::LeastAllocated => (cap - req) * 100 / cap,
                Strategy::MostAllocated => req.min(cap) * 100 / cap,
            };
            sum += s * w;
            weights += w;
        }
        if weights == 0 { 0 } else { sum / weights }
    }

    fn node_score(&self, pod: &PodInfo, node: &NodeInfo, pinned_cpus: i64, ratio: f64) -> i64 {
        let parts = self
            .args
            .scoring
            .weights
            .iter()
            .filter_map(|(id, scalar, w)| {
                let want = pod.req.get(*id);
                if *scalar && want == 0 {
                    return None;
                }
                let mut req = node.req.get(*id) + want;
                if *id == R_CPU && ratio > 1.0 && pinned_cpus > 0 {
                    req = req - pinned_cpus + amplify(pinned_cpus, ratio);
                }
                Some((req, node.alloc.get(*id), *w))
            });
        self.least_or_most(parts)
    }

    fn numa_score(&self, node: &NodeInfo, pod: &PodInfo, a: &Allocation, req: &Request) -> i64 {
        let Some(opts) = node.topology.as_deref() else {
            return 0;
        };
        let ns = NodeState::of(node, &|k| k == pod.key);
        let (mut cap, mut used) = (NumaRes::default(), NumaRes::default());
        for (n, _) in &a.numa {
            cap.add(&opts.numa.get(n).copied().unwrap_or_default());
            used.add(&ns.numa_used.get(n).copied().unwrap_or_default());
        }
        let parts = self
            .args
            .scoring
            .weights
            .iter()
            .filter_map(|(id, _, w)| match *id {
                R_CPU => Some((used.cpu() + req.res.cpu(), cap.cpu(), *w)),
                R_MEMORY => Some((used.memory() + req.res.memory(), cap.memory(), *w)),
                _ => None,
            });
        self.least_or_most(parts)
    }
}

/// The cpuset NodeNUMAResource gave the pod in this cycle, if any.
pub fn reserved_cpuset(state: &CycleState) -> Option<String> {
    let r = state.read::<Reserved>(ALLOC_KEY)?;
    let cpus: Vec<u32> = r.alloc.cpus.iter().copied().collect();
    (!cpus.is_empty()).then(|| cpuset::format(&cpus))
}

impl Plugin for NodeNUMAResource {
    fn name(&self) -> &'static str {
        NAME
    }
    /// A node added or changed (allocatable, its CPU policy labels, amplification
    /// annotations), its NodeResourceTopology, a pod gone from a node.
    fn events(&self) -> crate::scheduler::framework::events::Events {
        use crate::scheduler::framework::events::Events as E;
        E::NODE_ADD
            .or(E::NODE_ALLOCATABLE)
            .or(E::NODE_LABEL)
            .or(E::NODE_OTHER)
            .or(E::TOPOLOGY)
            .or(E::POD_ASSIGNED_DELETE)
    }

    fn points(&self) -> &'static [Point] {
        &[
            Point::PreFilter,
            Point::Filter,
            Point::Score,
            Point::Reserve,
            Point::PreBind,
        ]
    }

    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &ClusterState,
    ) -> (Status, PreFilterResult) {
        match self.pre_state(pod) {
            Err(s) => (s, None),
            Ok(None) => (Status::skip(), None),
            Ok(Some(st)) => {
                state.write(NAME, st);
                (Status::success(), None)
            }
        }
    }

    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let Some(st) = state.read::<PreState>(NAME) else {
            return Status::success();
        };
        match self.plan((state, st), pod, (node, cluster), Phase::Filter) {
            Ok(_) => Status::success(),
            Err(s) => s,
        }
    }

    fn score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<i64, Status> {
        let Some(st) = state.read::<PreState>(NAME) else {
            return Ok(0);
        };
        let opts = topology_of(node);
        let facts = self.facts(node);
        let Ok(policy) = self.numa_policy(st, &facts, opts) else {
            return Ok(0);
        };
        if policy == NumaPolicy::None {
            let ratio = amplification_ratio(&facts).unwrap_or(1.0);
            // Only an amplified node counts its pinned CPUs differently; skip the pod scan
            // everywhere else (this runs for every pod on every feasible node).
            let pinned = if ratio > 1.0 {
                NodeState::of(node, &|k| k == pod.key).held.len() as i64 * 1000
            } else {
                0
            };
            return Ok(self.node_score(pod, node, pinned, ratio));
        }
        Ok(
            match self.plan((state, st), pod, (node, cluster), Phase::Score) {
                Ok(Some((a, req))) => self.numa_score(node, pod, &a, &req),
                _ => 0,
            },
        )
    }

    fn reserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
        cluster: &ClusterState,
    ) -> Status {
        let Some(st) = state.read::<PreState>(NAME) else {
            return Status::success();
        };
        let Some(n) = cluster.node(node) else {
            return Status::error(format!("node {node} not found"));
        };
        let planned = match self.plan((state, st), pod, (n, cluster), Phase::Reserve) {
            Ok(p) => p,
            Err(s) => return s,
        };
        let Some((alloc, req)) = planned else {
            return Status::success();
        };
        let forced = node_bind_policy(&self.facts(n), topology_of(n));
        let bound = if st.has_policy {
            None
        } else {
            req.bind.map(|b| b.policy)
        };
        state.write(
            ALLOC_KEY,
            Reserved {
                alloc,
                forced,
                bound,
            },
        );
        Status::success()
    }

    fn report(&self, state: &CycleState) -> Option<(&'static str, serde_json::Value)> {
        reserved_cpuset(state).map(|c| ("cpuset", c.into()))
    }

    fn unreserve(&self, state: &mut CycleState, _: &PodInfo, _: &str) {
        state.remove(ALLOC_KEY);
    }

    fn pre_bind(
        &self,
        state: &CycleState,
        _: &PodInfo,
        _: &str,
        modified: &mut PodDraft,
    ) -> Status {
        let Some(r) = state.read::<Reserved>(ALLOC_KEY) else {
            return Status::success();
        };
        // A pod pinned by default policy records it, as Koordinator back-fills resource-spec.
        let spec = r.bound.map(|p| {
            let mut spec = rs::resource_spec(modified.get()).unwrap_or_default();
            match r.forced {
                Some(f) => spec.required_cpu_bind_policy = Some(policy_name(f).to_string()),
                None => spec.preferred_cpu_bind_policy = Some(policy_name(p).to_string()),
            }
            serde_json::to_string(&spec).unwrap_or_default()
        });
        let ann = modified.annotations_mut();
        if let Some(spec) = spec {
            ann.insert(ANNOTATION_RESOURCE_SPEC.to_string(), spec);
        }
        ann.insert(
            ANNOTATION_RESOURCE_STATUS.to_string(),
            status_json(&r.alloc),
        );
        Status::success()
    }
}
