//! Choosing the CPUs of a pinned pod (Koordinator's `takeCPUs`, `cpu_accumulator.go`):
//! FullPCPUs packs whole physical cores into as few NUMA nodes and sockets as possible,
//! SpreadByPCPUs takes one CPU per core first; both fall back to a core ordering that
//! prefers sockets the pod already uses. Exclusive policies are tried first and dropped
//! when they leave too few CPUs. maxRefCount is 1 (a CPU has one holder), as upstream.

use super::error::NumaError;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::scheduler::model::topology::{BindPolicy, Cpu, CpuTopology, Strategy};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exclusive {
    #[default]
    None,
    PcpuLevel,
    NumaNodeLevel,
}

impl Exclusive {
    pub fn parse(s: &str) -> Exclusive {
        match s {
            "PCPULevel" => Exclusive::PcpuLevel,
            "NUMANodeLevel" => Exclusive::NumaNodeLevel,
            _ => Exclusive::None,
        }
    }
}

pub use super::error::ERR_NOT_ENOUGH_CPUS;

struct Acc<'a> {
    topo: &'a CpuTopology,
    free: BTreeMap<u32, Cpu>,
    need: usize,
    exclusive: Exclusive,
    excl_cores: HashSet<u32>,
    excl_nodes: HashSet<u32>,
    strategy: Strategy,
    result: BTreeSet<u32>,
}

/// Orders by a free count: most free first (LeastAllocated) or least free first.
fn by_free(s: Strategy, a: usize, b: usize) -> std::cmp::Ordering {
    match s {
        Strategy::LeastAllocated => b.cmp(&a),
        Strategy::MostAllocated => a.cmp(&b),
    }
}

impl Acc<'_> {
    fn take(&mut self, cpus: &[u32]) {
        for c in cpus {
            if let Some(info) = self.free.remove(c) {
                match self.exclusive {
                    Exclusive::PcpuLevel => _ = self.excl_cores.insert(info.core),
                    Exclusive::NumaNodeLevel => _ = self.excl_nodes.insert(info.node),
                    Exclusive::None => {}
                }
            }
            self.result.insert(*c);
        }
        self.need = self.need.saturating_sub(cpus.len());
    }

    fn excl_pcpu(&self, c: &Cpu) -> bool {
        self.exclusive == Exclusive::PcpuLevel && self.excl_cores.contains(&c.core)
    }

    fn excl_numa(&self, c: &Cpu) -> bool {
        self.exclusive == Exclusive::NumaNodeLevel && self.excl_nodes.contains(&c.node)
    }

    /// Free CPUs grouped by core (CPUs ascending), skipping those `skip` says.
    fn cores(&self, skip: impl Fn(&Cpu) -> bool) -> BTreeMap<u32, Vec<u32>> {
        let mut out: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (id, c) in self.free.iter().filter(|(_, c)| !skip(c)) {
            out.entry(c.core).or_default().push(*id);
        }
        out
    }

    /// Whole free cores grouped by `group` (NUMA node or socket), cores with most free CPUs
    /// first, groups in strategy order (then socket free count, then id).
    fn full_cores_by(
        &self,
        group: impl Fn(&Cpu) -> u32,
        skip: impl Fn(&Cpu) -> bool,
    ) -> Vec<Vec<u32>> {
        let per_core = self.topo.cpus_per_core();
        let cores = self.cores(&skip);
        let mut socket_free: HashMap<u32, usize> = HashMap::new();
        for cpus in cores.values() {
            *socket_free.entry(self.free[&cpus[0]].socket).or_default() += cpus.len();
        }
        let mut groups: BTreeMap<u32, Vec<&Vec<u32>>> = BTreeMap::new();
        for cpus in cores.values().filter(|c| c.len() == per_core) {
            groups
                .entry(group(&self.free[&cpus[0]]))
                .or_default()
                .push(cpus);
        }
        let mut lists: Vec<(u32, usize, Vec<u32>)> = groups
            .into_iter()
            .map(|(g, cs)| {
                let cpus: Vec<u32> = cs.into_iter().flatten().copied().collect();
                let socket = self.free[&cpus[0]].socket;
                (g, socket_free.get(&socket).copied().unwrap_or(0), cpus)
            })
            .collect();
        let s = self.strategy;
        lists.sort_by(|a, b| {
            by_free(s, a.2.len(), b.2.len())
                .then(by_free(s, a.1, b.1))
                .then(a.0.cmp(&b.0))
        });
        lists.into_iter().map(|l| l.2).collect()
    }

    /// Free CPUs grouped by NUMA node or socket (one per core when `one_per_core`).
    fn cpus_by(
        &self,
        group: impl Fn(&Cpu) -> u32,
        skip: impl Fn(&Cpu) -> bool,
        one_per_core: bool,
        by_socket: bool,
    ) -> Vec<Vec<u32>> {
        let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        let (mut free_of, mut socket_free) = (HashMap::new(), HashMap::new());
        for (id, c) in self.free.iter().filter(|(_, c)| !skip(c)) {
            groups.entry(group(c)).or_default().push(*id);
            *free_of.entry(group(c)).or_insert(0usize) += 1;
            *socket_free.entry(c.socket).or_insert(0usize) += 1;
        }
        let mut lists: Vec<(u32, usize, usize, Vec<u32>)> = groups
            .into_iter()
            .map(|(g, mut cpus)| {
                if one_per_core {
                    let mut seen = HashSet::new();
                    cpus.retain(|c| seen.insert(self.topo.cpus[c].core));
                }
                let socket = self.topo.cpus[&cpus[0]].socket;
                let count = if by_socket { cpus.len() } else { free_of[&g] };
                (g, count, socket_free[&socket], cpus)
            })
            .collect();
        let s = self.strategy;
        lists.sort_by(|a, b| {
            by_free(s, a.1, b.1)
                .then(by_free(s, a.2, b.2))
                .then(a.0.cmp(&b.0))
        });
        lists.into_iter().map(|l| l.3).collect()
    }

    /// Round-robin over cores: the first CPU of every core, then the second, …
    fn spread(&self, cpus: Vec<u32>) -> Vec<u32> {
        if cpus.len() <= self.topo.cpus_per_core() {
            return cpus;
        }
        let (mut out, mut rest) = (Vec::with_capacity(cpus.len()), cpus);
        while !rest.is_empty() {
            let mut seen = HashSet::new();
            let (now, later): (Vec<u32>, Vec<u32>) = rest
                .into_iter()
                .partition(|c| seen.insert(self.topo.cpus[c].core));
            out.extend(now);
            rest = later;
        }
        out
    }

    /// All free cores, ordered for the fallback: sockets this allocation already uses,
    /// socket and NUMA free counts (strategy), emptier cores first, socket, core id.
    fn fallback(&self, skip: impl Fn(&Cpu) -> bool) -> Vec<u32> {
        let cores = self.cores(&skip);
        let (mut socket_free, mut node_free) = (HashMap::new(), HashMap::new());
        for cpus in cores.values() {
            let c = self.free[&cpus[0]];
            *socket_free.entry(c.socket).or_insert(0usize) += cpus.len();
            *node_free.entry(c.node).or_insert(0usize) += cpus.len();
        }
        let colo = |socket: u32| {
            self.result
                .iter()
                .filter(|c| self.topo.cpus[c].socket == socket)
                .count()
        };
        let mut list: Vec<(&u32, &Vec<u32>)> = cores.iter().collect();
        let s = self.strategy;
        list.sort_by(|(ca, a), (cb, b)| {
            let (ia, ib) = (self.free[&a[0]], self.free[&b[0]]);
            colo(ib.socket)
                .cmp(&colo(ia.socket))
                .then(by_free(s, socket_free[&ia.socket], socket_free[&ib.socket]))
                .then(by_free(s, node_free[&ia.node], node_free[&ib.node]))
                .then(a.len().cmp(&b.len()))
                .then(ia.socket.cmp(&ib.socket))
                .then(ca.cmp(cb))
        });
        list.into_iter()
            .flat_map(|(_, c)| c.iter().copied())
            .collect()
    }
}

/// `need` CPUs out of `available` for a pod with `policy`, given the exclusive policies of
/// CPUs other pods hold (`held`: cpu → their exclusive policy).
pub fn take_cpus(
    topo: &CpuTopology,
    available: &BTreeSet<u32>,
    held: &BTreeMap<u32, Exclusive>,
    need: usize,
    policy: BindPolicy,
    exclusive: Exclusive,
    strategy: Strategy,
) -> Result<BTreeSet<u32>, NumaError> {
    let mut acc = Acc {
        topo,
        free: available
            .iter()
            .filter_map(|c| Some((*c, *topo.cpus.get(c)?)))
            .collect(),
        need,
        exclusive,
        excl_cores: HashSet::new(),
        excl_nodes: HashSet::new(),
        strategy,
        result: BTreeSet::new(),
    };
    for (cpu, ex) in held {
        if let Some(c) = topo.cpus.get(cpu) {
            match ex {
                Exclusive::PcpuLevel => _ = acc.excl_cores.insert(c.core),
                Exclusive::NumaNodeLevel => _ = acc.excl_nodes.insert(c.node),
                Exclusive::None => {}
            }
        }
    }
    if acc.need == 0 {
        return Ok(acc.result);
    }
    if acc.need > acc.free.len() {
        return Err(NumaError::NotEnoughCpus);
    }
    let full = policy == BindPolicy::FullPcpus;
    if (full || topo.cpus_per_core() == 1) && full_pcpus(&mut acc) {
        return Ok(acc.result);
    }
    if !full && spread_pcpus(&mut acc) {
        return Ok(acc.result);
    }
    for filter in [true, false] {
        let cpus = acc.spread(acc.fallback(|c| filter && (acc.excl_pcpu(c) || acc.excl_numa(c))));
        for c in cpus {
            if acc.need >= 1 {
                acc.take(&[c]);
            }
            if acc.need == 0 {
                return Ok(acc.result);
            }
        }
    }
    Err(NumaError::AllocFailed)
}

fn full_pcpus(acc: &mut Acc) -> bool {
    let topo = acc.topo;
    if acc.need <= topo.cpus_per_node() {
        for filter in [true, false] {
            let lists = acc.full_cores_by(|c| c.node, |c| filter && acc.excl_numa(c));
            if let Some(cpus) = lists.into_iter().find(|l| l.len() >= acc.need) {
                let n = acc.need;
                acc.take(&cpus[..n]);
                return true;
            }
        }
    }
    if acc.need <= topo.cpus_per_socket() {
        let lists = acc.full_cores_by(|c| c.socket, |_| false);
        if let Some(cpus) = lists.into_iter().find(|l| l.len() >= acc.need) {
            let n = acc.need;
            acc.take(&cpus[..n]);
            return true;
        }
    }
    let mut lists = acc.full_cores_by(|c| c.socket, |_| false);
    lists.sort_by_key(|l| std::cmp::Reverse(l.len()));
    let mut left = Vec::new();
    for cpus in lists {
        if acc.need < cpus.len() {
            left.push(cpus);
        } else {
            acc.take(&cpus);
            if acc.need == 0 {
                return true;
            }
        }
    }
    let per_core = topo.cpus_per_core().max(1);
    if acc.need >= per_core {
        left.sort_by_key(|l| l.len());
        for cpus in left {
            for core in cpus.chunks(per_core) {
                acc.take(core);
                if acc.need == 0 {
                    return true;
                }
                if acc.need < per_core {
                    break;
                }
            }
        }
    }
    false
}

fn spread_pcpus(acc: &mut Acc) -> bool {
    let topo = acc.topo;
    let by_node = acc.need <= topo.cpus_per_node();
    let by_socket = acc.need <= topo.cpus_per_socket();
    for (enabled, socket) in [(by_node, false), (by_socket, true)] {
        if !enabled {
            continue;
        }
        for filter in [true, false] {
            let lists = if socket {
                acc.cpus_by(|c| c.socket, |c| filter && acc.excl_pcpu(c), filter, true)
            } else {
                acc.cpus_by(
                    |c| c.node,
                    |c| filter && (acc.excl_pcpu(c) || acc.excl_numa(c)),
                    filter,
                    false,
                )
            };
            if let Some(cpus) = lists.into_iter().find(|l| l.len() >= acc.need) {
                let cpus = acc.spread(cpus);
                let n = acc.need;
                acc.take(&cpus[..n]);
                return true;
            }
        }
    }
    false
}

/// For required policies, the CPUs that can serve: FullPCPUs keeps only completely free
/// cores, SpreadByPCPUs one CPU of each core whose CPUs are all free.
pub fn filter_required(
    topo: &CpuTopology,
    policy: BindPolicy,
    available: &BTreeSet<u32>,
) -> BTreeSet<u32> {
    let per_core = topo.cpus_per_core();
    let mut cores: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for c in available {
        if let Some(info) = topo.cpus.get(c) {
            cores.entry(info.core).or_default().push(*c);
        }
    }
    cores
        .into_values()
        .filter(|cpus| cpus.len() == per_core)
        .flat_map(|cpus| match policy {
            BindPolicy::FullPcpus => cpus,
            BindPolicy::SpreadByPcpus => cpus.into_iter().take(1).collect(),
        })
        .collect()
}
