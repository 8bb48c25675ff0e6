//! The topology manager's NUMA hints (`frameworkext/topologymanager`): for each requested
//! resource, every set of NUMA nodes that can hold it; merged across resources and judged
//! by the NUMA policy. The providers are NodeNUMAResource (cpu, memory) and DeviceShare
//! (each device type it allocates, unless `disableDeviceNUMATopologyAlignment`).

use super::error::NumaError;
use std::collections::BTreeMap;

use super::alloc::{NodeState, Request, bits, usable};
use crate::api::extension::numa_res::NumaRes;
use crate::scheduler::model::topology::{NumaPolicy, TopologyOptions};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    pub mask: u64,
    pub preferred: bool,
    pub score: i64,
}

fn width(mask: u64) -> u32 {
    mask.count_ones()
}

/// LeastAllocated of (allocated + request) over allocatable on the mask, cpu and memory
/// weighted equally.
fn mask_score(
    free: &BTreeMap<u32, NumaRes>,
    opts: &TopologyOptions,
    req: &Request,
    mask: u64,
) -> i64 {
    let (mut total, mut used) = ((0i64, 0i64), (0i64, 0i64));
    for n in bits(mask) {
        let cap = opts.numa.get(&n).copied().unwrap_or_default();
        let f = free.get(&n).copied().unwrap_or_default();
        total = (total.0 + cap.cpu(), total.1 + cap.memory());
        used = (
            used.0 + cap.cpu() - f.cpu(),
            used.1 + cap.memory() - f.memory(),
        );
    }
    let least = |req: i64, cap: i64| {
        if cap == 0 || req > cap {
            0
        } else {
            (cap - req) * 100 / cap
        }
    };
    let parts = [
        (req.res.cpu(), used.0, total.0),
        (req.res.memory(), used.1, total.1),
    ];
    let scored: Vec<i64> = parts
        .iter()
        .filter(|(_, _, cap)| *cap > 0)
        .map(|(r, u, cap)| least(u + r, *cap))
        .collect();
    if scored.is_empty() {
        0
    } else {
        scored.iter().sum::<i64>() / scored.len() as i64
    }
}

/// Hints per resource: every provider's, merged into one map.
pub type HintMap = BTreeMap<String, Vec<Hint>>;

/// Hints per resource ("cpu", "memory", batch ones the zones list) for the pod on this node.
pub fn generate(
    opts: &TopologyOptions,
    st: &NodeState,
    req: &Request,
    policy: NumaPolicy,
    pod_exclusive: bool,
) -> HintMap {
    let mut free = st.numa_free(opts);
    if let Some(b) = &req.bind
        && b.required
    {
        let cpus = usable(opts, st, b);
        for (n, f) in free.iter_mut() {
            let in_node = opts.topo.cpus_in_node(*n).intersection(&cpus).count() as i64;
            f.0[NumaRes::CPU] = f.cpu().min(in_node * 1000);
        }
    }
    let nodes: Vec<u32> = free.keys().copied().collect();
    let mut out = HintMap::new();
    let wanted: Vec<(usize, &str, i64)> = req
        .res
        .nonzero()
        .filter(|(i, _, amount)| opts.aligned(*i) && *amount > 0)
        .collect();
    for subset in 1u64..(1u64 << nodes.len().min(20)) {
        let mask = nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| subset & (1 << i) != 0)
            .fold(0u64, |m, (_, n)| m | (1 << n));
        for (which, res, amount) in &wanted {
            let avail: i64 = bits(mask).iter().map(|n| free[n].0[*which]).sum();
            if avail >= *amount {
                out.entry(res.to_string()).or_default().push(Hint {
                    mask,
                    preferred: false,
                    score: mask_score(&free, opts, req, mask),
                });
            }
        }
    }
    for hints in out.values_mut() {
        let min = hints.iter().map(|h| width(h.mask)).min().unwrap_or(0);
        for h in hints.iter_mut() {
            h.preferred = policy == NumaPolicy::Restricted || width(h.mask) == min;
            if pod_exclusive && h.preferred {
                let touches_single = bits(h.mask).iter().any(|n| st.single.contains(n));
                let on_shared = bits(h.mask).iter().any(|n| st.shared.contains(n));
                if (width(h.mask) > 1 && touches_single) || (width(h.mask) == 1 && on_shared) {
                    h.preferred = false;
                }
            }
        }
        if policy == NumaPolicy::SingleNumaNode {
            hints.retain(|h| width(h.mask) == 1 && h.preferred);
        }
    }
    out
}

/// The best merged hint (Koordinator's `mergeFilteredHints`): over the cross product of
/// the resources' hints, masks AND-ed; a merge is preferred when every hint is and all
/// masks agree, unsatisfied when the AND is narrower than the widest hint. Preferred beats
/// not preferred, narrower beats wider, equal widths go by score. Starts from "all NUMA
/// nodes, not preferred". A resource with no hint at all makes every merge unsatisfied.
pub fn merge(hints: &HintMap, all: u64) -> (Hint, bool) {
    let mut best = (
        Hint {
            mask: all,
            preferred: false,
            score: 0,
        },
        false,
    );
    let none = [Hint {
        mask: 0,
        preferred: false,
        score: 0,
    }];
    let lists: Vec<&[Hint]> = hints
        .values()
        .map(|l| if l.is_empty() { &none[..] } else { &l[..] })
        .collect();
    let missing = hints.values().any(|l| l.is_empty());
    let mut idx = vec![0usize; lists.len()];
    loop {
        let picked: Vec<Hint> = idx
            .iter()
            .zip(&lists)
            .map(|(i, l)| l[*i])
            .filter(|h| h.mask != 0)
            .collect();
        let mask = picked.iter().fold(all, |m, h| m & h.mask);
        let widest = picked.iter().map(|h| width(h.mask)).max().unwrap_or(0);
        let merged = Hint {
            mask,
            preferred: !missing
                && picked
                    .iter()
                    .all(|h| h.preferred && h.mask == picked[0].mask),
            score: picked
                .iter()
                .filter(|h| h.mask == mask)
                .map(|h| h.score)
                .sum(),
        };
        let unsatisfied = missing || (!picked.is_empty() && widest != width(mask));
        if mask != 0 && better(&merged, &best.0) {
            best = (merged, unsatisfied);
        }
        // Next combination.
        let mut k = 0;
        loop {
            if k == idx.len() {
                return best;
            }
            idx[k] += 1;
            if idx[k] < lists[k].len() {
                break;
            }
            idx[k] = 0;
            k += 1;
        }
    }
}

fn better(h: &Hint, b: &Hint) -> bool {
    if h.preferred != b.preferred {
        return h.preferred;
    }
    if width(h.mask) != width(b.mask) {
        return width(h.mask) < width(b.mask);
    }
    h.score > b.score
}

/// Whether the policy admits the pod, in the topology manager's words; the NUMA nodes
/// the allocation then follows (`None`: no NUMA alignment).
pub fn admit(policy: NumaPolicy, hints: &HintMap, all: u64) -> Result<Option<u64>, NumaError> {
    if policy == NumaPolicy::None {
        return Ok(None);
    }
    let missing: Vec<&str> = hints
        .iter()
        .filter(|(_, l)| l.is_empty())
        .map(|(r, _)| r.as_str())
        .collect();
    if let Some(r) = missing.first()
        && policy != NumaPolicy::BestEffort
    {
        return Err(NumaError::Unsatisfied(r.to_string()));
    }
    let (best, unsatisfied) = merge(hints, all);
    match policy {
        NumaPolicy::BestEffort if unsatisfied => Ok(Some(all)),
        NumaPolicy::BestEffort => Ok(Some(best.mask)),
        _ if best.preferred => Ok(Some(best.mask)),
        _ => {
            let sep = if policy == NumaPolicy::Restricted {
                " & "
            } else {
                ","
            };
            let names: Vec<&str> = hints.keys().map(String::as_str).collect();
            Err(NumaError::Unaligned(names.join(sep)))
        }
    }
}
