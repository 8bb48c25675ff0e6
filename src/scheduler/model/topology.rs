//! A node's CPU topology and NUMA zones as NodeNUMAResource sees them ("TopologyOptions"):
//! built once per NodeResourceTopology update from the koordlet's annotations and zones.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::api::cpuset;
use crate::api::extension::numa_res::NumaRes;
use crate::api::topology::NodeResourceTopology;

pub const LABEL_NODE_CPU_BIND_POLICY: &str = "node.koordinator.sh/cpu-bind-policy";
pub const LABEL_NODE_NUMA_TOPOLOGY_POLICY: &str = "node.koordinator.sh/numa-topology-policy";
pub const LABEL_NODE_NUMA_ALLOCATE_STRATEGY: &str = "node.koordinator.sh/numa-allocate-strategy";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindPolicy {
    #[default]
    FullPcpus,
    SpreadByPcpus,
}

/// NUMA allocate strategy: which NUMA node / socket to fill first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    #[default]
    LeastAllocated,
    MostAllocated,
}

pub const ANNOTATION_CPU_TOPOLOGY: &str = "node.koordinator.sh/cpu-topology";
pub const ANNOTATION_KUBELET_CPU_MANAGER_POLICY: &str = "kubelet.koordinator.sh/cpu-manager-policy";
pub const ANNOTATION_POD_CPU_ALLOCS: &str = "node.koordinator.sh/pod-cpu-allocs";
pub const ANNOTATION_NODE_RESERVATION: &str = "node.koordinator.sh/reservation";
pub const ANNOTATION_SYSTEM_QOS_RESOURCE: &str = "node.koordinator.sh/system-qos-resource";

/// One logical CPU: its (node-unique) core, socket and NUMA node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    pub core: u32,
    pub socket: u32,
    pub node: u32,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuTopology {
    pub cpus: BTreeMap<u32, Cpu>,
    pub num_sockets: usize,
    pub num_nodes: usize,
    pub num_cores: usize,
}

impl CpuTopology {
    /// From (cpu, core, socket, node) entries; core ids are made unique per socket.
    pub fn new(entries: impl IntoIterator<Item = (u32, u32, u32, u32)>) -> CpuTopology {
        let cpus: BTreeMap<u32, Cpu> = entries
            .into_iter()
            .map(|(id, core, socket, node)| {
                let core = (socket << 16) | (core & 0xffff);
                (id, Cpu { core, socket, node })
            })
            .collect();
        let distinct =
            |f: &dyn Fn(&Cpu) -> (u32, u32)| cpus.values().map(f).collect::<BTreeSet<_>>().len();
        CpuTopology {
            num_sockets: distinct(&|c| (c.socket, 0)),
            num_nodes: distinct(&|c| (c.socket, c.node)),
            num_cores: distinct(&|c| (c.core, 0)),
            cpus,
        }
    }

    pub fn is_valid(&self) -> bool {
        self.num_sockets > 0 && self.num_nodes > 0 && self.num_cores > 0 && !self.cpus.is_empty()
    }

    pub fn cpus_per_core(&self) -> usize {
        self.cpus.len() / self.num_cores.max(1)
    }

    pub fn cpus_per_node(&self) -> usize {
        self.cpus.len() / self.num_nodes.max(1)
    }

    pub fn cpus_per_socket(&self) -> usize {
        self.cpus.len() / self.num_sockets.max(1)
    }

    pub fn cpus_in_node(&self, node: u32) -> BTreeSet<u32> {
        self.cpus
            .iter()
            .filter(|(_, c)| c.node == node)
            .map(|(id, _)| *id)
            .collect()
    }

    pub fn numa_nodes(&self) -> BTreeSet<u32> {
        self.cpus.values().map(|c| c.node).collect()
    }
}

/// NUMA policies (`NUMATopologyPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumaPolicy {
    #[default]
    None,
    BestEffort,
    Restricted,
    SingleNumaNode,
}

impl NumaPolicy {
    /// A policy name as pods, node labels and NRT `topologyPolicies` spell it.
    pub fn parse(s: &str) -> Option<NumaPolicy> {
        Some(match s {
            "" | "None" => NumaPolicy::None,
            "BestEffort" => NumaPolicy::BestEffort,
            "Restricted" => NumaPolicy::Restricted,
            "SingleNUMANode" | "SingleNUMANodePodLevel" | "SingleNUMANodeContainerLevel" => {
                NumaPolicy::SingleNumaNode
            }
            _ => return None,
        })
    }
}

/// What NodeNUMAResource reads from a Node object, parsed when the Node changes.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    /// `node.koordinator.sh/cpu-bind-policy`: absent, or the policy it forces (`None` for
    /// a label that forces nothing).
    pub bind_label: Option<Option<BindPolicy>>,
    /// `node.koordinator.sh/numa-topology-policy`.
    pub numa_label: Option<NumaPolicy>,
    /// `node.koordinator.sh/numa-allocate-strategy`.
    pub strategy: Option<Strategy>,
    /// The cpu amplification ratio; `None` when the annotation is malformed.
    pub cpu_ratio: Option<f64>,
}

impl Default for NodeFacts {
    fn default() -> Self {
        NodeFacts {
            bind_label: None,
            numa_label: None,
            strategy: None,
            cpu_ratio: Some(1.0),
        }
    }
}

impl NodeFacts {
    pub fn of(node: &k8s_openapi::api::core::v1::Node) -> NodeFacts {
        use {BindPolicy, Strategy};
        let label = |k: &str| {
            node.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(k))
                .map(String::as_str)
        };
        let bind_label = label(LABEL_NODE_CPU_BIND_POLICY).map(|v| match v {
            "FullPCPUsOnly" => Some(BindPolicy::FullPcpus),
            "SpreadByPCPUs" => Some(BindPolicy::SpreadByPcpus),
            _ => None,
        });
        let strategy = match label(LABEL_NODE_NUMA_ALLOCATE_STRATEGY) {
            Some("MostAllocated") => Some(Strategy::MostAllocated),
            Some("LeastAllocated") => Some(Strategy::LeastAllocated),
            _ => None,
        };
        let ratio =
            node.metadata.annotations.as_ref().and_then(|a| {
                a.get(crate::api::extension::keys::ANNOTATION_NODE_AMPLIFICATION_RATIO)
            });
        let cpu_ratio = match ratio {
            None => Some(1.0),
            Some(raw) => serde_json::from_str::<BTreeMap<String, f64>>(raw)
                .ok()
                .map(|m| m.get("cpu").copied().unwrap_or(1.0)),
        };
        NodeFacts {
            bind_label,
            numa_label: label(LABEL_NODE_NUMA_TOPOLOGY_POLICY).and_then(NumaPolicy::parse),
            strategy,
            cpu_ratio,
        }
    }
}

/// Per node: topology, reserved CPUs, per-NUMA allocatable, NUMA policy, kubelet policy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopologyOptions {
    pub topo: CpuTopology,
    pub reserved: BTreeSet<u32>,
    /// NUMA node → allocatable (cpu, memory, batch-cpu, batch-memory).
    pub numa: BTreeMap<u32, NumaRes>,
    /// Which of the resources the zones report: cpu and memory always count; batch-cpu and
    /// batch-memory only once the manager has written them (as Koordinator, a resource no
    /// zone has is not aligned).
    pub numa_listed: [bool; 4],
    pub policy: Option<NumaPolicy>,
    /// Kubelet's static CPU manager with `full-pcpus-only=true`.
    pub kubelet_full_pcpus_only: bool,
}

#[derive(Deserialize)]
struct TopoDetail {
    id: u32,
    #[serde(default)]
    core: u32,
    #[serde(default)]
    socket: u32,
    #[serde(default)]
    node: u32,
}

#[derive(Deserialize)]
struct TopoAnnotation {
    #[serde(default)]
    detail: Vec<TopoDetail>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct KubeletPolicy {
    #[serde(default)]
    policy: String,
    #[serde(default)]
    options: BTreeMap<String, String>,
    #[serde(default, rename = "reservedCPUs")]
    reserved_cpus: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Reservation {
    #[serde(default, rename = "reservedCPUs")]
    reserved_cpus: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SystemQos {
    #[serde(default)]
    cpuset: String,
    #[serde(default)]
    cpuset_exclusive: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodCpuAlloc {
    #[serde(default, rename = "cpuset")]
    cpu_set: String,
    #[serde(default)]
    managed_by_kubelet: Option<bool>,
}

fn json<T: serde::de::DeserializeOwned>(raw: Option<&str>) -> Option<T> {
    serde_json::from_str(raw?).ok()
}

fn cpus_of(s: &str) -> BTreeSet<u32> {
    cpuset::parse(s.trim())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

impl TopologyOptions {
    /// Whether resource `i` of [`NumaRes`] is placed on NUMA nodes here.
    pub fn aligned(&self, i: usize) -> bool {
        i <= NumaRes::MEMORY || self.numa_listed[i]
    }

    /// From a NodeResourceTopology; malformed annotations count as absent (the node then
    /// has no valid topology and pinned pods do not go there).
    pub fn from_nrt(nrt: &NodeResourceTopology) -> TopologyOptions {
        let empty = BTreeMap::new();
        let ann = nrt.metadata.annotations.as_ref().unwrap_or(&empty);
        let parse = |k: &str| ann.get(k).map(String::as_str);
        let topo = json::<TopoAnnotation>(parse(ANNOTATION_CPU_TOPOLOGY))
            .map(|t| CpuTopology::new(t.detail.iter().map(|d| (d.id, d.core, d.socket, d.node))))
            .unwrap_or_default();
        let kubelet: KubeletPolicy =
            json(parse(ANNOTATION_KUBELET_CPU_MANAGER_POLICY)).unwrap_or_default();
        let mut reserved = cpus_of(&kubelet.reserved_cpus);
        if let Some(r) = json::<Reservation>(parse(ANNOTATION_NODE_RESERVATION)) {
            reserved.extend(cpus_of(&r.reserved_cpus));
        }
        let sys: SystemQos = json(parse(ANNOTATION_SYSTEM_QOS_RESOURCE)).unwrap_or_default();
        if sys.cpuset_exclusive.unwrap_or(true) {
            reserved.extend(cpus_of(&sys.cpuset));
        }
        let allocs: Vec<PodCpuAlloc> = json(parse(ANNOTATION_POD_CPU_ALLOCS)).unwrap_or_default();
        for a in allocs
            .iter()
            .filter(|a| a.managed_by_kubelet.unwrap_or(true))
        {
            reserved.extend(cpus_of(&a.cpu_set));
        }
        let full_pcpus_only = kubelet.policy == "static"
            && kubelet
                .options
                .get("full-pcpus-only")
                .is_some_and(|v| v == "true");
        let policy = nrt
            .spec
            .topology_policies
            .iter()
            .find_map(|p| NumaPolicy::parse(p));
        let (numa, numa_listed) = zones(nrt);
        let mut out = TopologyOptions {
            numa,
            numa_listed,
            topo,
            reserved,
            policy,
            kubelet_full_pcpus_only: full_pcpus_only,
        };
        // Reserved CPUs are not allocatable on their NUMA node.
        for c in &out.reserved {
            if let Some(cpu) = out.topo.cpus.get(c)
                && let Some(z) = out.numa.get_mut(&cpu.node)
            {
                z.0[NumaRes::CPU] = (z.cpu() - 1000).max(0);
            }
        }
        out
    }
}

/// `zones[]` of type Node named `node-<id>` → allocatable, and which resources any zone
/// lists.
fn zones(nrt: &NodeResourceTopology) -> (BTreeMap<u32, NumaRes>, [bool; 4]) {
    let mut out = BTreeMap::new();
    let mut listed = [true, true, false, false];
    for z in nrt.spec.zones.iter().filter(|z| z.type_ == "Node") {
        let Some(id) = z
            .name
            .strip_prefix("node-")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let resources = z.resources.as_deref().unwrap_or_default();
        let (v, has) = NumaRes::from_list(|name| {
            let r = resources.iter().find(|r| r.name == name)?;
            Some(crate::api::pod::amount(name, &r.allocatable))
        });
        for (l, h) in listed.iter_mut().zip(has) {
            *l |= h;
        }
        out.insert(id, v);
    }
    (out, listed)
}
