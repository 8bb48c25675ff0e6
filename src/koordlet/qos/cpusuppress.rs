//! cpusuppress (`pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go`): how much CPU best-effort pods may use so that the
//! node stays under `cpuSuppressThresholdPercent`, as a CFS quota for the besteffort QoS
//! cgroup (`cfsQuota` policy) or as a set of CPUs (`cpuset` policy, the default). Pure
//! decisions; the executor applies them.

use std::collections::{BTreeMap, BTreeSet};

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

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(cap: i64, thr: i64, pods: i64, sys: i64) -> Inputs {
        Inputs {
            capacity_milli: cap,
            threshold_percent: thr,
            min_percent: None,
            non_be_pods_milli: pods,
            non_be_host_milli: 0,
            system_used_milli: sys,
        }
    }

    #[test]
    fn suppress_formula() {
        // 16 cores × 65 % − 6 cores LS − 1 core system = 3.4 cores.
        assert_eq!(suppress_milli(&inputs(16_000, 65, 6_000, 1_000)), 3_400);
        assert_eq!(suppress_milli(&inputs(16_000, 65, 12_000, 1_000)), -2_600);
        let min = Inputs {
            min_percent: Some(10),
            ..inputs(16_000, 65, 12_000, 1_000)
        };
        assert_eq!(suppress_milli(&min), 1_600);
        assert_eq!(system_used(10_000, 6_000, 500, 1_000), 3_500);
        assert_eq!(
            system_used(5_000, 6_000, 0, 1_000),
            1_000,
            "reserved is the floor"
        );
    }

    #[test]
    fn quota_steps() {
        let cap = 16_000; // 1.6 s per 100 ms period; 1 % = 16_000 µs, 10 % = 160_000 µs
        // (suppress, current quota, expected)
        for (s, cur, want) in [
            (3_400, -1, Some(340_000)),
            (3_400, 340_000, None),
            (3_500, 340_000, None),
            (3_600, 340_000, Some(360_000)),
            (10_000, 340_000, Some(500_000)),
            (-2_600, 340_000, Some(MIN_QUOTA)),
            (-2_600, MIN_QUOTA, None),
            (10, -1, Some(MIN_QUOTA)),
        ] {
            assert_eq!(cfs_quota(s, cur, cap), want, "S {s} current {cur}");
        }
    }

    #[test]
    fn cpuset_sizes() {
        assert_eq!(cpuset_count(3_400, 8, 16), 4);
        assert_eq!(cpuset_count(-2_000, 8, 16), MIN_CPUS);
        assert_eq!(
            cpuset_count(15_000, 2, 16),
            4,
            "grows by 10 % of 16 → 2 per round"
        );
        assert_eq!(cpuset_count(40_000, 30, 32), 32);
    }

    fn topo() -> Vec<Cpu> {
        // 2 sockets × 2 cores × 2 threads: cpu i on core i/2 % 2, socket i/4.
        (0..8)
            .map(|i| Cpu {
                id: i,
                core: (i / 2) % 2 + 2 * (i / 4),
                socket: i / 4,
                numa: i / 4,
            })
            .collect()
    }

    #[test]
    fn picks_whole_cores_round_robin() {
        assert_eq!(
            pick(&topo(), 4),
            vec![0, 1, 4, 5],
            "one whole core from each socket"
        );
        assert_eq!(
            pick(&topo(), 3),
            vec![0, 1, 4],
            "a core, then a single CPU elsewhere"
        );
        assert_eq!(pick(&topo(), 20).len(), 8);
        let excluded: BTreeSet<u32> = [0, 1].into();
        let lsr: BTreeSet<u32> = [2, 3, 4, 5].into();
        // 6 candidates, 4 in the LSR pool: 3 × 4/6 = 2 from LSR, 1 from LS.
        assert_eq!(be_cpuset(&topo(), 3, &excluded, &lsr), vec![2, 3, 6]);
        assert_eq!(
            be_cpuset(&topo(), 2, &(0..8).collect(), &lsr),
            Vec::<u32>::new()
        );
    }
}
