//! DeviceShare as a NUMA hint provider (`topology_hint.go`): under a NUMA topology
//! policy, NodeNUMAResource's topology manager asks each provider which sets of NUMA nodes
//! can hold the pod's share, merges them with its own cpu/memory hints, and every
//! provider then allocates inside the NUMA nodes chosen (`numa::affinity`). For each set
//! of the Device's NUMA nodes (narrowest first) the devices there are allocated as they
//! would be; a set that can hold the request is a hint for every requested device type,
//! preferred when it is as narrow as any, scored 500 when it gives the same GPUs as the
//! whole node would (so the device choice outweighs the CPU's 0–100).

use std::collections::BTreeSet;

use super::{NAME, PreState, alloc, with_ctx};
use crate::scheduler::framework::{ClusterState, CycleState, NodeInfo, Status};
use crate::scheduler::model::devices::Allocations;
use crate::scheduler::plugins::numa::hints::{Hint, HintMap};

/// Koordinator's `defaultNUMAScore`.
pub const DEFAULT_NUMA_SCORE: i64 = 500;
/// Koordinator's `ErrInsufficientNUMAScopedDevices`.
pub const ERR_INSUFFICIENT_NUMA_SCOPED: &str = "Insufficient NUMA Scoped Devices";

/// Every non-empty subset of `nodes` as a mask, by size then in order
/// (`bitmask.IterateBitMasks`).
fn masks(nodes: &[u32]) -> Vec<u64> {
    let mut out: Vec<u64> = (1u64..(1u64 << nodes.len()))
        .map(|subset| {
            nodes
                .iter()
                .enumerate()
                .filter(|(i, _)| subset & (1 << i) != 0)
                .fold(0u64, |m, (_, n)| m | (1 << n))
        })
        .collect();
    out.sort_by_key(|m| {
        (
            m.count_ones(),
            crate::scheduler::plugins::numa::alloc::bits(*m),
        )
    });
    out
}

fn gpu_minors(a: &Allocations) -> Vec<i32> {
    a.get("gpu")
        .map(|g| g.iter().map(|d| d.minor).collect())
        .unwrap_or_default()
}

/// `GetPodTopologyHints`: the pod's device hints on `node`; `None` when DeviceShare has no
/// preference (no device asked, alignment disabled, no Device or no NUMA topology in it);
/// an error when even the whole node cannot hold the request.
pub fn topology_hints(
    state: &CycleState,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Result<Option<HintMap>, Status> {
    let Some(st) = state.read::<PreState>(NAME).filter(|s| s.numa_align) else {
        return Ok(None);
    };
    let Some(devs) = cluster.devices.get(&node.name) else {
        return Ok(None);
    };
    let nodes: BTreeSet<u32> = devs
        .by_type
        .values()
        .flatten()
        .filter_map(|d| d.numa)
        .filter_map(|n| u32::try_from(n).ok().filter(|n| *n < 64))
        .collect();
    let nodes: Vec<u32> = nodes.into_iter().take(20).collect();
    if nodes.is_empty() {
        return Ok(None);
    }
    let full = nodes.iter().fold(0u64, |m, n| m | (1 << n));
    let mut feasible: Vec<(u64, Allocations)> = Vec::new();
    let mut whole: Result<Vec<i32>, Status> =
        Err(Status::unschedulable(ERR_INSUFFICIENT_NUMA_SCOPED));
    for mask in masks(&nodes) {
        let planned = scoped_allocation(st, state, node, cluster, devs, mask);
        if mask == full {
            whole = planned.as_ref().map(gpu_minors).map_err(Clone::clone);
        }
        if let Ok(a) = planned {
            feasible.push((mask, a));
        }
    }
    let best = whole?;
    let narrowest = feasible
        .iter()
        .map(|(m, _)| m.count_ones())
        .min()
        .unwrap_or(0);
    let hints: Vec<Hint> = feasible
        .iter()
        .map(|(mask, a)| Hint {
            mask: *mask,
            preferred: mask.count_ones() == narrowest,
            score: if gpu_minors(a) == best {
                DEFAULT_NUMA_SCORE
            } else {
                0
            },
        })
        .collect();
    Ok(Some(
        st.req
            .by_type
            .keys()
            .map(|kind| (kind.clone(), hints.clone()))
            .collect(),
    ))
}

/// The pod's devices within the NUMA nodes of `mask`, or why not.
fn scoped_allocation(
    st: &PreState,
    state: &CycleState,
    node: &NodeInfo,
    cluster: &ClusterState,
    devs: &crate::scheduler::model::devices::NodeDevices,
    mask: u64,
) -> Result<Allocations, Status> {
    for (kind, need) in &st.req.by_type {
        let there = devs.by_type.get(kind).map_or(0, |list| {
            list.iter()
                .filter(|d| {
                    d.numa
                        .is_some_and(|n| (0..64).contains(&n) && mask & (1 << n) != 0)
                })
                .count()
        });
        if there < need.count {
            return Err(Status::unschedulable(ERR_INSUFFICIENT_NUMA_SCOPED));
        }
    }
    with_ctx(state, node, cluster, Some(mask), |ctx| {
        alloc::allocate(ctx, &st.req, st.joint.as_ref())
    })
    .unwrap_or_else(|| Ok(Allocations::new()))
    .map_err(|e| Status::unschedulable(e.to_string()))
}
