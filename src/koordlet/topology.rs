//! NodeTopologyReport (`states_noderesourcetopology.go`): the node's CPU topology, NUMA
//! zones, kubelet CPU manager state and the LS / BE CPU share pools, reported as the
//! NodeResourceTopology named after the node, for NodeNUMAResource to pin pods by.
//! Computed every 10 s from sysfs and the informer; written when it changed, and compared
//! with the stored object once a minute (what others changed or deleted is put back).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta};
use serde::Deserialize;
use serde_json::json;

use crate::api::cpuset;
use crate::api::extension::keys::{
    ANNOTATION_NODE_RESERVATION, ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
};
use crate::api::extension::qos::QoSClass;
use crate::api::extension::resourcestatus::pinned_cpus as pinned;
use crate::api::quantity::from_int;
use crate::api::topology::{NodeResourceTopology, NodeResourceTopologyFields, ResourceInfo, Zone};
use crate::kernel::Shutdown;
use crate::koordlet::informer::{Informer, PodMeta};
use crate::koordlet::kubeletconfig::KubeletConfiguration;
use crate::os::system::{CpuInfo, Host};

pub const ANNOTATION_CPU_TOPOLOGY: &str = "node.koordinator.sh/cpu-topology";
pub const ANNOTATION_CPU_SHARED_POOLS: &str = "node.koordinator.sh/cpu-shared-pools";
pub const ANNOTATION_BE_CPU_SHARED_POOLS: &str = "node.koordinator.sh/be-cpu-shared-pools";
pub const ANNOTATION_KUBELET_CPU_MANAGER_POLICY: &str = "kubelet.koordinator.sh/cpu-manager-policy";
pub const ANNOTATION_POD_CPU_ALLOCS: &str = "node.koordinator.sh/pod-cpu-allocs";

/// Kubelet's `cpu_manager_state` checkpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletCpuState {
    #[serde(default)]
    pub policy_name: String,
    #[serde(default)]
    pub entries: BTreeMap<String, BTreeMap<String, String>>,
}

impl KubeletCpuState {
    pub fn read(path: &Path) -> KubeletCpuState {
        let Some(raw) = crate::os::knob::read_opt(path) else {
            return KubeletCpuState::default();
        };
        serde_json::from_str(&raw).unwrap_or_else(|e| {
            tracing::warn!(file = %path.display(), error = %e, "kubelet CPU manager state unreadable; reported as policy none");
            KubeletCpuState::default()
        })
    }
}

/// What the report is made of.
pub struct Inputs<'a> {
    pub node: &'a Node,
    pub pods: &'a [PodMeta],
    pub cpus: &'a [CpuInfo],
    pub numa_mem: &'a BTreeMap<u32, i64>,
    pub kubelet: &'a KubeletCpuState,
    /// The kubelet's configuration file, when the node has one.
    pub kubelet_config: Option<&'a KubeletConfiguration>,
    pub basic: &'a crate::os::system::CpuBasicInfo,
}

/// `node.koordinator.sh/cpu-basic-info` as Koordinator's koordlet writes it (Go's
/// `omitempty`: false and empty fields left out).
fn basic_info(b: &crate::os::system::CpuBasicInfo) -> String {
    let mut m = serde_json::Map::new();
    if !b.model.is_empty() {
        m.insert("cpuModel".into(), json!(b.model));
    }
    if b.hyper_thread {
        m.insert("hyperThreadEnabled".into(), json!(true));
    }
    if b.turbo {
        m.insert("turboEnabled".into(), json!(true));
    }
    if !b.vendor.is_empty() {
        m.insert("vendorID".into(), json!(b.vendor));
    }
    serde_json::Value::Object(m).to_string()
}

fn node_annotation<'a>(node: &'a Node, key: &str) -> Option<&'a String> {
    node.metadata.annotations.as_ref()?.get(key)
}

/// CPUs a node annotation reserves (`reservedCPUs` / `cpuset` with `cpusetExclusive`): no
/// share pool includes them (the reported NRT pools and CPUSetAllocator's alike).
pub fn reserved(node: &Node) -> BTreeSet<u32> {
    let get = |k: &str, field: &str| -> BTreeSet<u32> {
        let v: Option<serde_json::Value> =
            node_annotation(node, k).and_then(|s| serde_json::from_str(s).ok());
        let exclusive = v
            .as_ref()
            .and_then(|v| v.get("cpusetExclusive"))
            .and_then(|e| e.as_bool())
            .unwrap_or(true);
        v.as_ref()
            .and_then(|v| v.get(field)?.as_str().map(str::to_string))
            .filter(|_| exclusive)
            .and_then(|s| cpuset::parse(&s).ok())
            .unwrap_or_default()
            .into_iter()
            .collect()
    };
    let mut out = get(ANNOTATION_NODE_RESERVATION, "reservedCPUs");
    out.extend(get(ANNOTATION_NODE_SYSTEM_QOS_RESOURCE, "cpuset"));
    out
}

/// The CPUs of the node's `system-qos-resource` annotation, where SYSTEM QoS pods run.
pub fn system_qos_cpuset(node: &Node) -> Option<String> {
    let raw = node_annotation(node, ANNOTATION_NODE_SYSTEM_QOS_RESOURCE)?;
    let v: serde_json::Value = serde_json::from_str(raw).ok()?;
    let set = v.get("cpuset")?.as_str()?;
    cpuset::parse(set)
        .ok()
        .filter(|c| !c.is_empty())
        .map(|c| cpuset::format(&c))
}

/// The LS and BE CPU share pools (Koordinator's `cpu-shared-pools` and
/// `be-cpu-shared-pools`): the CPUs in `all` but the node's reserved ones and the kubelet's
/// static-policy pins; LS also without every CPU a pod is pinned to, BE without the LSE
/// pods' CPUs. The reported NRT and CPUSetAllocator both use this.
pub fn share_pools(
    all: &[u32],
    node: Option<&Node>,
    pods: &[PodMeta],
    kubelet_pinned: &BTreeSet<u32>,
) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let reserved = node.map(reserved).unwrap_or_default();
    let taken = |only: Option<QoSClass>| -> BTreeSet<u32> {
        pods.iter()
            .filter(|p| only.is_none_or(|q| p.facts.qos == q))
            .flat_map(|p| pinned(&p.pod))
            .collect()
    };
    let base: BTreeSet<u32> = all
        .iter()
        .filter(|c| !reserved.contains(c) && !kubelet_pinned.contains(c))
        .copied()
        .collect();
    let ls = base.difference(&taken(None)).copied().collect();
    let be = base
        .difference(&taken(Some(QoSClass::Lse)))
        .copied()
        .collect();
    (ls, be)
}

/// Kubelet-pinned pods koordinator does not manage: (uid, namespace, name, cpus).
fn kubelet_pins(
    pods: &[PodMeta],
    kubelet: &KubeletCpuState,
) -> Vec<(String, String, String, BTreeSet<u32>)> {
    pods.iter()
        .filter(|p| pinned(&p.pod).is_empty())
        .filter_map(|p| {
            let cpus: BTreeSet<u32> = kubelet
                .entries
                .get(&p.uid)?
                .values()
                .flat_map(|c| cpuset::parse(c).unwrap_or_default())
                .collect();
            (!cpus.is_empty()).then(|| (p.uid.clone(), p.namespace.clone(), p.name.clone(), cpus))
        })
        .collect()
}

/// Every CPU the kubelet's static CPU manager pinned to a pod koord does not pin itself.
pub fn kubelet_pinned(pods: &[PodMeta], kubelet: &KubeletCpuState) -> BTreeSet<u32> {
    kubelet_pins(pods, kubelet)
        .into_iter()
        .flat_map(|p| p.3)
        .collect()
}

/// `[{socket, node, cpuset}]` of `pool` per NUMA node.
/// One socket and NUMA node's part of a pool (Koordinator's `CPUSharedPool`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPool {
    pub socket: u32,
    pub node: u32,
    pub cpus: Vec<u32>,
}

impl SharedPool {
    pub fn cpuset(&self) -> String {
        cpuset::format(&self.cpus)
    }
}

/// A pool split by (socket, NUMA node), in that order.
pub fn per_numa(cpus: &[CpuInfo], pool: &BTreeSet<u32>) -> Vec<SharedPool> {
    let mut by: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    for c in cpus.iter().filter(|c| pool.contains(&c.id)) {
        by.entry((c.socket, c.numa)).or_default().push(c.id);
    }
    by.into_iter()
        .map(|((socket, node), cpus)| SharedPool { socket, node, cpus })
        .collect()
}

fn pools(cpus: &[CpuInfo], pool: &BTreeSet<u32>) -> String {
    let list: Vec<serde_json::Value> = per_numa(cpus, pool)
        .iter()
        .map(|p| json!({"socket": p.socket, "node": p.node, "cpuset": p.cpuset()}))
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// The annotations of the report.
fn annotations(inp: &Inputs) -> BTreeMap<String, String> {
    // Cores are numbered densely across the node, as lscpu's CORE column.
    let mut cores: BTreeMap<u32, usize> = BTreeMap::new();
    for c in inp.cpus {
        let n = cores.len();
        cores.entry(c.core).or_insert(n);
    }
    let detail: Vec<serde_json::Value> = inp
        .cpus
        .iter()
        .map(|c| json!({"id": c.id, "core": cores[&c.core], "socket": c.socket, "node": c.numa}))
        .collect();
    let pins = kubelet_pins(inp.pods, inp.kubelet);
    let kubelet_pinned: BTreeSet<u32> = pins.iter().flat_map(|p| p.3.iter().copied()).collect();
    let all: Vec<u32> = inp.cpus.iter().map(|c| c.id).collect();
    let (ls, be) = share_pools(&all, Some(inp.node), inp.pods, &kubelet_pinned);
    let allocs: Vec<serde_json::Value> = pins
        .iter()
        .map(|(uid, ns, name, cpus)| {
            let ids: Vec<u32> = cpus.iter().copied().collect();
            json!({"namespace": ns, "name": name, "uid": uid, "cpuset": cpuset::format(&ids), "managedByKubelet": true})
        })
        .collect();
    let mut out = BTreeMap::from([
        (
            ANNOTATION_CPU_TOPOLOGY.to_string(),
            json!({"detail": detail}).to_string(),
        ),
        (
            ANNOTATION_CPU_SHARED_POOLS.to_string(),
            pools(inp.cpus, &ls),
        ),
        (
            ANNOTATION_BE_CPU_SHARED_POOLS.to_string(),
            pools(inp.cpus, &be),
        ),
        (
            ANNOTATION_KUBELET_CPU_MANAGER_POLICY.to_string(),
            cpu_manager_policy(inp),
        ),
        (
            ANNOTATION_POD_CPU_ALLOCS.to_string(),
            serde_json::Value::Array(allocs).to_string(),
        ),
        (
            crate::api::extension::keys::ANNOTATION_NODE_CPU_BASIC_INFO.to_string(),
            basic_info(inp.basic),
        ),
    ]);
    for k in [
        ANNOTATION_NODE_RESERVATION,
        ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
    ] {
        if let Some(v) = node_annotation(inp.node, k) {
            out.insert(k.to_string(), v.clone());
        }
    }
    out
}

/// `kubelet.koordinator.sh/cpu-manager-policy`: the kubelet config's policy, options and
/// static-policy reserved CPUs; without a config file, the checkpoint's policy. Reserved
/// CPUs stay in the share pools, as in Koordinator ("Burstable pods … at least there are
/// reservedCPUs available").
fn cpu_manager_policy(inp: &Inputs) -> String {
    /// Koordinator's `KubeletCPUManagerPolicy`, fields in its order.
    #[derive(serde::Serialize)]
    struct Policy<'a> {
        #[serde(skip_serializing_if = "str::is_empty")]
        policy: &'a str,
        #[serde(skip_serializing_if = "no_options")]
        options: Option<&'a BTreeMap<String, String>>,
        #[serde(rename = "reservedCPUs", skip_serializing_if = "String::is_empty")]
        reserved_cpus: String,
    }
    let p = match inp.kubelet_config {
        None => Policy {
            policy: match inp.kubelet.policy_name.as_str() {
                "" => "none",
                p => p,
            },
            options: None,
            reserved_cpus: String::new(),
        },
        Some(cfg) => Policy {
            policy: &cfg.cpu_manager_policy,
            options: Some(&cfg.cpu_manager_policy_options),
            reserved_cpus: match cfg.static_reserved_cpus(inp.cpus) {
                Ok(r) => cpuset::format(&r),
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet reserved CPUs not reported");
                    String::new()
                }
            },
        },
    };
    serde_json::to_string(&p).unwrap_or_default()
}

fn no_options(o: &Option<&BTreeMap<String, String>>) -> bool {
    o.is_none_or(|m| m.is_empty())
}

fn zones(inp: &Inputs) -> Vec<Zone> {
    let mut per: BTreeMap<u32, i64> = BTreeMap::new();
    for c in inp.cpus {
        *per.entry(c.numa).or_default() += 1;
    }
    per.into_iter()
        .map(|(n, cpus)| {
            let res = |name: &str, v: i64| ResourceInfo {
                name: name.to_string(),
                capacity: from_int(v),
                allocatable: from_int(v),
                available: from_int(v),
            };
            let mut resources = vec![res("cpu", cpus)];
            if let Some(m) = inp.numa_mem.get(&n) {
                resources.push(res("memory", *m));
            }
            Zone {
                name: format!("node-{n}"),
                type_: "Node".into(),
                resources: Some(resources),
                ..Default::default()
            }
        })
        .collect()
}

/// The NodeResourceTopology for these inputs.
pub fn build(inp: &Inputs) -> NodeResourceTopology {
    let name = inp.node.metadata.name.clone().unwrap_or_default();
    let owner = inp.node.metadata.uid.clone().map(|uid| OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: name.clone(),
        uid,
        ..Default::default()
    });
    NodeResourceTopology {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "Koordinator".to_string(),
            )])),
            annotations: Some(annotations(inp)),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: NodeResourceTopologyFields {
            topology_policies: vec![
                inp.kubelet_config
                    .map_or("None", KubeletConfiguration::topology_policy)
                    .into(),
            ],
            zones: zones(inp),
            attributes: None,
        },
    }
}

fn same(a: &NodeResourceTopology, b: &NodeResourceTopology) -> bool {
    a.spec == b.spec
        && a.metadata.annotations == b.metadata.annotations
        && a.metadata.labels == b.metadata.labels
}

/// Creates or replaces the report when it differs from what the API server holds, keeping
/// the resources others wrote on its zones (the manager's NUMA-level batch resources).
async fn write(
    api: &Api<NodeResourceTopology>,
    want: NodeResourceTopology,
) -> Result<bool, kube::Error> {
    use super::topology_merge::keep_others;
    let same_merged = |have: &NodeResourceTopology, want: &NodeResourceTopology| {
        let mut merged = want.clone();
        keep_others(have, &mut merged);
        same(have, &merged)
    };
    super::upsert::write_if_changed(api, want, same_merged, keep_others).await
}

/// Rounds between checks of the stored object when the report did not change: what others
/// changed or deleted is put back within a minute.
const VERIFY_EVERY: u64 = 6;

/// The report loop: every 10 s, written when changed (rest: one sysfs read, no API call);
/// once a minute compared with what the API server holds even when unchanged.
pub async fn report_loop(
    client: kube::Client,
    informer: Informer,
    host: Host,
    (kubelet, metrics, per_cpu): (
        super::kubelet_access::KubeletConfig,
        std::sync::Arc<crate::koordlet::metrics::KoordletMetrics>,
        bool,
    ),
    shutdown: Shutdown,
) {
    let api: Api<NodeResourceTopology> = Api::all(client);
    let mut last = super::upsert::LastWritten::new(VERIFY_EVERY);
    let mut failing = false;
    let mut config_source = super::configz::Source::default();
    loop {
        let states = informer.snapshot();
        let cpu_topology = host.cpu_topology();
        let numa_mem = host.numa_mem_total();
        if let Some(node) = states
            .node
            .as_deref()
            .and_then(|n| n.metadata.name.as_deref())
        {
            metrics.collected_node_info(node, cpu_topology.is_ok(), !numa_mem.is_empty());
        }
        if let (Some(node), Ok(cpus)) = (states.node.as_deref(), cpu_topology) {
            let state = KubeletCpuState::read(&kubelet.cpu_manager_state_file);
            let config = super::configz::read(&kubelet, node, &mut config_source).await;
            let basic = host.cpu_basic_info(&cpus);
            let want = build(&Inputs {
                node,
                pods: &states.pods,
                cpus: &cpus,
                numa_mem: &numa_mem,
                kubelet: &state,
                kubelet_config: config.as_ref(),
                basic: &basic,
            });
            metrics.share_pools(&want, per_cpu);
            if last.due(&want, same) {
                match write(&api, want.clone()).await {
                    Ok(_) => {
                        last.written(want);
                        failing = false;
                    }
                    // Once per failure streak (a cluster without the CRD would log it every 10 s).
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "NodeResourceTopology not reported; retrying every 10 s");
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "NodeResourceTopology still not reported")
                    }
                }
            }
        }
        if !shutdown.sleep(Duration::from_secs(10)).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{Cgroups, Driver, Version};

    #[test]
    fn pools_leave_pinned_and_reserved_cpus_out() {
        let cpus: Vec<CpuInfo> = (0..8)
            .map(|id| CpuInfo {
                id,
                core: 100_000 * (id / 4) + id / 2,
                socket: id / 4,
                numa: id / 4,
            })
            .collect();
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n", "uid": "u1",
            "annotations": {"node.koordinator.sh/reservation": "{\"reservedCPUs\":\"7\"}"}}}))
        .unwrap();
        let cg = Cgroups::new("/nonexistent", Version::V1, Driver::Cgroupfs, "");
        let pod = |uid: &str, qos: &str, cpus: &str| {
            PodMeta::new(serde_json::from_value(json!({"metadata": {"name": uid, "namespace": "d", "uid": uid,
                "labels": {"koordinator.sh/qosClass": qos},
                "annotations": {"scheduling.koordinator.sh/resource-status": format!("{{\"cpuset\":\"{cpus}\"}}")}}})).unwrap(), &cg).unwrap()
        };
        let pods = vec![pod("lse", "LSE", "0-1"), pod("lsr", "LSR", "4")];
        let kubelet: KubeletCpuState =
            serde_json::from_value(json!({"policyName": "static", "entries": {}})).unwrap();
        let mem = BTreeMap::from([(0, 8 << 30), (1, 8 << 30)]);
        let basic = crate::os::system::CpuBasicInfo {
            model: "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.90GHz".into(),
            vendor: "GenuineIntel".into(),
            hyper_thread: true,
            turbo: false,
        };
        let nrt = build(&Inputs {
            node: &node,
            pods: &pods,
            cpus: &cpus,
            numa_mem: &mem,
            kubelet: &kubelet,
            kubelet_config: None,
            basic: &basic,
        });
        assert_eq!(nrt.spec.topology_policies, ["None"]);
        let ann = nrt.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            ann[ANNOTATION_CPU_SHARED_POOLS],
            r#"[{"cpuset":"2-3","node":0,"socket":0},{"cpuset":"5-6","node":1,"socket":1}]"#
        );
        assert_eq!(
            ann[ANNOTATION_BE_CPU_SHARED_POOLS],
            r#"[{"cpuset":"2-3","node":0,"socket":0},{"cpuset":"4-6","node":1,"socket":1}]"#
        );
        assert_eq!(
            ann[ANNOTATION_KUBELET_CPU_MANAGER_POLICY],
            r#"{"policy":"static"}"#
        );
        let topo: serde_json::Value = serde_json::from_str(&ann[ANNOTATION_CPU_TOPOLOGY]).unwrap();
        assert_eq!(
            topo["detail"][5],
            json!({"id": 5, "core": 2, "socket": 1, "node": 1})
        );
        assert_eq!(nrt.spec.zones.len(), 2);
        assert_eq!(
            nrt.spec.zones[1].resources.as_ref().unwrap()[0]
                .allocatable
                .0,
            "4"
        );
        assert_eq!(nrt.metadata.owner_references.as_ref().unwrap()[0].uid, "u1");
        assert_eq!(
            ann["node.koordinator.sh/cpu-basic-info"],
            r#"{"cpuModel":"Intel(R) Xeon(R) Platinum 8369B CPU @ 2.90GHz","hyperThreadEnabled":true,"vendorID":"GenuineIntel"}"#
        );
    }

    #[test]
    fn the_kubelet_config_gives_the_policy_its_reserved_cpus_and_the_topology_policy() {
        let cpus: Vec<CpuInfo> = (0..4)
            .map(|id| CpuInfo {
                id,
                core: id % 2,
                socket: 0,
                numa: 0,
            })
            .collect();
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        let config: KubeletConfiguration = serde_yaml::from_str(
            "cpuManagerPolicy: static\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n\
             kubeReserved: {cpu: 500m}\ntopologyManagerPolicy: single-numa-node\n\
             topologyManagerScope: pod\n",
        )
        .unwrap();
        let nrt = build(&Inputs {
            node: &node,
            pods: &[],
            cpus: &cpus,
            numa_mem: &BTreeMap::new(),
            kubelet: &KubeletCpuState::default(),
            kubelet_config: Some(&config),
            basic: &Default::default(),
        });
        assert_eq!(nrt.spec.topology_policies, ["SingleNUMANodePodLevel"]);
        let ann = nrt.metadata.annotations.unwrap();
        // ⌈0.5⌉ = 1 CPU: the lowest core's first thread (a whole core would be two).
        assert_eq!(
            ann[ANNOTATION_KUBELET_CPU_MANAGER_POLICY],
            r#"{"policy":"static","options":{"full-pcpus-only":"true"},"reservedCPUs":"0"}"#
        );
        // Koordinator keeps the kubelet's reserved CPUs in the share pools.
        assert_eq!(
            ann[ANNOTATION_CPU_SHARED_POOLS],
            r#"[{"cpuset":"0-3","node":0,"socket":0}]"#
        );
    }
}
