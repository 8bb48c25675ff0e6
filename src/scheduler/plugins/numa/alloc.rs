//! What a node's CPUs and NUMA nodes hold (rebuilt from its pods' `resource-status`, so
//! state survives restarts and assumed pods count at once) and one pod's allocation on it.

use super::error::NumaError;
use std::collections::{BTreeMap, BTreeSet};

use super::take::{self, Exclusive};
use crate::api::extension::numa_res::NumaRes;
use crate::scheduler::framework::NodeInfo;
use crate::scheduler::model::topology::TopologyOptions;
use crate::scheduler::model::topology::{BindPolicy, Strategy};

/// The node's allocations by other pods.
#[derive(Debug, Default)]
pub struct NodeState {
    /// CPU → exclusive policy of the pod holding it.
    pub held: BTreeMap<u32, Exclusive>,
    /// NUMA node → allocated.
    pub numa_used: BTreeMap<u32, NumaRes>,
    /// NUMA nodes with pods on them alone / with pods spanning several.
    pub single: BTreeSet<u32>,
    pub shared: BTreeSet<u32>,
    /// CPUs the pod's matched reservations hold and their owners do not use: free for the
    /// pod and taken first.
    pub preferred: BTreeSet<u32>,
    /// Every matched reservation is Restricted: pinned CPUs come only from `preferred`.
    pub restricted: bool,
}

impl NodeState {
    /// Every pod on the node but `except` (a pod being rescheduled or a preemption victim).
    pub fn of(node: &NodeInfo, except: &dyn Fn(&str) -> bool) -> NodeState {
        let mut st = NodeState::default();
        for p in node.pods.iter().filter(|p| !except(&p.key)) {
            let Some(a) = &p.cpu_alloc else { continue };
            let ex = Exclusive::parse(&a.exclusive);
            for c in &a.cpus {
                st.held.insert(*c, ex);
            }
            for (n, res) in &a.numa {
                st.numa_used.entry(*n).or_default().add(res);
                if a.numa.len() == 1 {
                    st.single.insert(*n);
                } else {
                    st.shared.insert(*n);
                }
            }
        }
        st
    }

    /// What the node holds as `pod` sees it in this cycle: its matched reservations'
    /// CPUs are its own.
    pub fn in_cycle(
        state: &crate::scheduler::framework::CycleState,
        pod: &crate::scheduler::framework::PodInfo,
        node: &NodeInfo,
        cluster: &crate::scheduler::framework::ClusterState,
    ) -> NodeState {
        use crate::scheduler::model::reservation::AllocatePolicy;
        let reserved: Vec<(String, bool)> =
            crate::scheduler::plugins::reservation::plugin::matched_on(state, &node.name)
                .into_iter()
                .map(|n| {
                    let restricted = cluster
                        .reservations
                        .get(&n)
                        .is_some_and(|r| r.policy == AllocatePolicy::Restricted);
                    (n, restricted)
                })
                .collect();
        NodeState::for_pod(node, &pod.key, &reserved)
    }

    /// For `pod_key` placed into one of `reserved` (its matched reservations on the node,
    /// with whether each is Restricted): their reserve pods' CPUs and NUMA resources count
    /// as free, their CPUs not used by owners preferred (Koordinator's reservation restore).
    pub fn for_pod(node: &NodeInfo, pod_key: &str, reserved: &[(String, bool)]) -> NodeState {
        if reserved.is_empty() {
            return NodeState::of(node, &|k| k == pod_key);
        }
        let is_reserved = |p: &crate::scheduler::framework::PodInfo| {
            p.reserve_of
                .as_ref()
                .is_some_and(|n| reserved.iter().any(|(r, _)| r == n))
        };
        let keys: Vec<&str> = node
            .pods
            .iter()
            .filter(|p| is_reserved(p))
            .map(|p| p.key.as_str())
            .collect();
        let mut st = NodeState::of(node, &|k| k == pod_key || keys.contains(&k));
        st.preferred = node
            .pods
            .iter()
            .filter(|p| is_reserved(p))
            .filter_map(|p| p.cpu_alloc.as_ref())
            .flat_map(|a| a.cpus.iter().copied())
            .filter(|c| !st.held.contains_key(c))
            .collect();
        st.restricted =
            reserved.iter().all(|(_, restricted)| *restricted) && !st.preferred.is_empty();
        st
    }

    /// CPUs nobody holds and nothing reserves.
    pub fn available(&self, opts: &TopologyOptions) -> BTreeSet<u32> {
        opts.topo
            .cpus
            .keys()
            .filter(|c| !opts.reserved.contains(c) && !self.held.contains_key(c))
            .copied()
            .collect()
    }

    /// Per NUMA node: what is still free.
    pub fn numa_free(&self, opts: &TopologyOptions) -> BTreeMap<u32, NumaRes> {
        opts.numa
            .iter()
            .map(|(n, cap)| {
                let used = self.numa_used.get(n).copied().unwrap_or_default();
                (*n, cap.minus(&used))
            })
            .collect()
    }
}

/// How a pinned pod wants its CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bind {
    pub policy: BindPolicy,
    pub required: bool,
    pub exclusive: Exclusive,
}

/// One pod's request as the allocation sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub res: NumaRes,
    pub bind: Option<Bind>,
}

impl Request {
    pub fn cpu_milli(&self) -> i64 {
        self.res.cpu()
    }

    pub fn num_cpus(&self) -> usize {
        (self.cpu_milli() / 1000).max(0) as usize
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Allocation {
    pub cpus: BTreeSet<u32>,
    /// NUMA node → what the pod is given there.
    pub numa: Vec<(u32, NumaRes)>,
}

pub fn bits(mask: u64) -> Vec<u32> {
    (0..64).filter(|b| mask & (1 << b) != 0).collect()
}

/// The CPUs a pod may be given: for required policies, only what that policy can use.
pub fn usable(opts: &TopologyOptions, st: &NodeState, bind: &Bind) -> BTreeSet<u32> {
    let avail = st.available(opts);
    if bind.required {
        take::filter_required(&opts.topo, bind.policy, &avail)
    } else {
        avail
    }
}

/// Splits the request over the NUMA nodes of `mask`, resource by resource (those the
/// zones list), emptiest last, each node giving at most an even share of what is left
/// (whole CPUs for a pinned pod, whole cores per node for required FullPCPUs).
fn distribute(
    opts: &TopologyOptions,
    free: &BTreeMap<u32, NumaRes>,
    req: &Request,
    mask: u64,
) -> Result<Vec<(u32, NumaRes)>, NumaError> {
    let nodes: Vec<u32> = bits(mask)
        .into_iter()
        .filter(|n| free.contains_key(n))
        .collect();
    let mut out: BTreeMap<u32, NumaRes> = BTreeMap::new();
    let per_core = opts.topo.cpus_per_core().max(1) as i64;
    let whole_cores = req
        .bind
        .is_some_and(|b| b.required && b.policy == BindPolicy::FullPcpus);
    for (which, name, wanted) in req.res.nonzero() {
        if !opts.aligned(which) {
            continue;
        }
        let mut left = wanted;
        let avail = |n: &u32| free[n].0[which];
        let mut order = nodes.clone();
        order.sort_by_key(avail);
        for (i, n) in order.iter().enumerate() {
            let count = (order.len() - i) as i64;
            let share = match (which == NumaRes::CPU, req.bind.is_some()) {
                (true, true) if whole_cores => (left / 1000 / per_core / count) * per_core * 1000,
                (true, true) => (left / 1000 / count) * 1000,
                _ => left / count,
            };
            // The last node takes the remainder so exact requests split exactly.
            let share = if i + 1 == order.len() {
                left
            } else {
                share.max(0)
            };
            let given = share.min(avail(n)).max(0);
            if given > 0 {
                out.entry(*n).or_default().0[which] += given;
                left -= given;
            }
        }
        if left > 0 {
            return Err(NumaError::InsufficientNuma(name));
        }
    }
    Ok(out.into_iter().collect())
}

/// The pod's allocation on this node: NUMA resources when a hint chose NUMA nodes, and
/// CPUs when it binds (per chosen NUMA node, adding up exactly).
pub fn allocate(
    opts: &TopologyOptions,
    st: &NodeState,
    req: &Request,
    hint: Option<u64>,
    strategy: Strategy,
) -> Result<Allocation, NumaError> {
    let mut out = Allocation::default();
    if let Some(mask) = hint {
        out.numa = distribute(opts, &st.numa_free(opts), req, mask)?;
    }
    let Some(bind) = req.bind else {
        return Ok(out);
    };
    let avail = usable(opts, st, &bind);
    let need = req.num_cpus();
    if avail.len() < need {
        return Err(NumaError::NotEnoughCpus);
    }
    let take_from = |from: &BTreeSet<u32>, n: usize| {
        take::take_cpus(
            &opts.topo,
            from,
            &st.held,
            n,
            bind.policy,
            bind.exclusive,
            strategy,
        )
    };
    // `takePreferredCPUs`: a matched reservation's CPUs first, the rest after (none after
    // for a Restricted reservation).
    let take = |from: &BTreeSet<u32>, n: usize| -> Result<BTreeSet<u32>, NumaError> {
        let preferred: BTreeSet<u32> = from.intersection(&st.preferred).copied().collect();
        if preferred.is_empty() && !st.restricted {
            return take_from(from, n);
        }
        let first = n.min(preferred.len());
        let mut got = if first > 0 {
            take_from(&preferred, first)?
        } else {
            BTreeSet::new()
        };
        if n > first {
            if st.restricted {
                return Err(NumaError::NotEnoughCpus);
            }
            let rest: BTreeSet<u32> = from.difference(&preferred).copied().collect();
            got.extend(take_from(&rest, n - first)?);
        }
        Ok(got)
    };
    if out.numa.is_empty() {
        out.cpus = take(&avail, need)?;
    } else {
        for (n, res) in &out.numa {
            let in_node: BTreeSet<u32> = opts
                .topo
                .cpus_in_node(*n)
                .intersection(&avail)
                .copied()
                .collect();
            let want = ((res.cpu() / 1000) as usize).min(in_node.len());
            out.cpus.extend(take(&in_node, want)?);
        }
        if out.cpus.len() != need {
            return Err(NumaError::NotEnoughCpus);
        }
    }
    check_required(opts, &bind, &out.cpus)?;
    Ok(out)
}

/// Required policies hold after the fact: FullPCPUs fills whole cores, SpreadByPCPUs one
/// CPU per core.
fn check_required(
    opts: &TopologyOptions,
    bind: &Bind,
    cpus: &BTreeSet<u32>,
) -> Result<(), NumaError> {
    if !bind.required {
        return Ok(());
    }
    let cores: BTreeSet<u32> = cpus
        .iter()
        .filter_map(|c| opts.topo.cpus.get(c))
        .map(|c| c.core)
        .collect();
    let ok = match bind.policy {
        BindPolicy::FullPcpus => cores.len() * opts.topo.cpus_per_core() == cpus.len(),
        BindPolicy::SpreadByPcpus => cores.len() == cpus.len(),
    };
    if ok {
        Ok(())
    } else {
        Err(NumaError::NotEnoughCpus)
    }
}
