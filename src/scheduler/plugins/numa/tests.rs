//! Table tests on fake topologies: 1 socket × 4 cores × 2 threads, 2 sockets × 2 NUMA
//! nodes × 4 cores × 2 threads (the upstream examples) and 2 × 2 × 8 × 2.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::alloc::{Bind, NodeState, Request};
use super::take::{Exclusive, take_cpus};
use super::*;
use crate::scheduler::framework::runtime::Framework;
use crate::scheduler::model::topology::{
    BindPolicy, LABEL_NODE_CPU_BIND_POLICY, LABEL_NODE_NUMA_TOPOLOGY_POLICY, Strategy,
};
use crate::scheduler::model::topology::{CpuTopology, NumaPolicy, TopologyOptions};
use crate::scheduler::test_util::{cluster, node_json, pod};

/// CPUs numbered socket → NUMA node → core → thread.
fn entries(sockets: u32, nodes: u32, cores: u32, threads: u32) -> Vec<(u32, u32, u32, u32)> {
    let mut out = Vec::new();
    for s in 0..sockets {
        for n in 0..nodes {
            for c in 0..cores {
                for t in 0..threads {
                    let id = ((s * nodes + n) * cores + c) * threads + t;
                    out.push((id, (n * cores + c), s, s * nodes + n));
                }
            }
        }
    }
    out
}

fn topo(sockets: u32, nodes: u32, cores: u32, threads: u32) -> CpuTopology {
    CpuTopology::new(entries(sockets, nodes, cores, threads))
}

fn set(s: &str) -> BTreeSet<u32> {
    crate::api::cpuset::parse(s).unwrap().into_iter().collect()
}

fn fmt(s: &BTreeSet<u32>) -> String {
    crate::api::cpuset::format(&s.iter().copied().collect::<Vec<_>>())
}

fn all_but(t: &CpuTopology, taken: &str) -> BTreeSet<u32> {
    let taken = set(taken);
    t.cpus
        .keys()
        .filter(|c| !taken.contains(c))
        .copied()
        .collect()
}

#[test]
fn counts_and_validity() {
    let t = topo(2, 2, 4, 2);
    assert_eq!(
        (t.num_sockets, t.num_nodes, t.num_cores, t.cpus.len()),
        (2, 4, 16, 32)
    );
    assert_eq!(
        (t.cpus_per_core(), t.cpus_per_node(), t.cpus_per_socket()),
        (2, 8, 16)
    );
    assert!(t.is_valid() && !CpuTopology::default().is_valid());
}

#[test]
fn upstream_examples() {
    use BindPolicy::*;
    let t = topo(2, 2, 4, 2);
    let none = BTreeMap::new();
    let avail = all_but(&t, "0-5,16-23");
    let take = |n, p| {
        take_cpus(
            &t,
            &avail,
            &none,
            n,
            p,
            Exclusive::None,
            Strategy::MostAllocated,
        )
        .map(|s| fmt(&s))
    };
    assert_eq!(take(6, FullPcpus).unwrap(), "24-29");
    assert_eq!(take(12, FullPcpus).unwrap(), "6-15,24-25");
    let small = topo(1, 1, 4, 2);
    let all = all_but(&small, "");
    let spread = take_cpus(
        &small,
        &all,
        &none,
        4,
        SpreadByPcpus,
        Exclusive::None,
        Strategy::MostAllocated,
    );
    assert_eq!(fmt(&spread.unwrap()), "0,2,4,6");
}

#[test]
fn bind_policies_on_one_socket() {
    use BindPolicy::*;
    let t = topo(1, 1, 4, 2);
    let none = BTreeMap::new();
    let all = all_but(&t, "");
    // (need, policy, available, strategy) → cpus
    let cases = [
        (2, FullPcpus, all.clone(), "0-1"),
        (3, FullPcpus, all.clone(), "0-2"),
        (2, SpreadByPcpus, all.clone(), "0,2"),
        // Fragmented: core 0 half taken; FullPCPUs takes whole cores first.
        (2, FullPcpus, all_but(&t, "0"), "2-3"),
        (4, FullPcpus, all_but(&t, "0,2"), "4-7"),
    ];
    for (need, p, avail, want) in cases {
        let got = take_cpus(
            &t,
            &avail,
            &none,
            need,
            p,
            Exclusive::None,
            Strategy::LeastAllocated,
        )
        .unwrap();
        assert_eq!(fmt(&got), want, "{need} {p:?} from {}", fmt(&avail));
    }
    let err = take_cpus(
        &t,
        &all_but(&t, "0-6"),
        &none,
        2,
        FullPcpus,
        Exclusive::None,
        Strategy::LeastAllocated,
    );
    assert_eq!(err.unwrap_err().to_string(), take::ERR_NOT_ENOUGH_CPUS);
}

#[test]
fn least_allocated_spreads_numa_nodes_and_most_allocated_packs_them() {
    let t = topo(2, 2, 8, 2);
    let none = BTreeMap::new();
    // NUMA node 0 (CPUs 0-15) half used.
    let avail = all_but(&t, "0-7");
    let least = take_cpus(
        &t,
        &avail,
        &none,
        4,
        BindPolicy::FullPcpus,
        Exclusive::None,
        Strategy::LeastAllocated,
    )
    .unwrap();
    let most = take_cpus(
        &t,
        &avail,
        &none,
        4,
        BindPolicy::FullPcpus,
        Exclusive::None,
        Strategy::MostAllocated,
    )
    .unwrap();
    assert_eq!(
        fmt(&least),
        "32-35",
        "an empty NUMA node on the emptier socket"
    );
    assert_eq!(fmt(&most), "8-11", "the fullest NUMA node that still fits");
    // More than a socket: whole sockets first, then whole cores.
    let big = take_cpus(
        &t,
        &all_but(&t, ""),
        &none,
        36,
        BindPolicy::FullPcpus,
        Exclusive::None,
        Strategy::LeastAllocated,
    )
    .unwrap();
    assert_eq!(big.len(), 36);
    assert_eq!(fmt(&big), "0-35");
}

#[test]
fn exclusive_policies_avoid_others_cores_and_numa_nodes() {
    let t = topo(1, 1, 4, 2);
    let held: BTreeMap<u32, Exclusive> = [(0, Exclusive::PcpuLevel)].into();
    let avail = all_but(&t, "0");
    let got = take_cpus(
        &t,
        &avail,
        &held,
        2,
        BindPolicy::SpreadByPcpus,
        Exclusive::PcpuLevel,
        Strategy::LeastAllocated,
    )
    .unwrap();
    assert!(
        !got.contains(&1),
        "CPU 1 shares core 0 with a PCPULevel pod: {}",
        fmt(&got)
    );
    // When exclusivity leaves too few CPUs, it is dropped.
    let got = take_cpus(
        &t,
        &avail,
        &held,
        7,
        BindPolicy::SpreadByPcpus,
        Exclusive::PcpuLevel,
        Strategy::LeastAllocated,
    )
    .unwrap();
    assert_eq!(fmt(&got), "1-7");

    let t = topo(1, 2, 4, 2);
    let held: BTreeMap<u32, Exclusive> = [(0, Exclusive::NumaNodeLevel)].into();
    let got = take_cpus(
        &t,
        &all_but(&t, "0"),
        &held,
        2,
        BindPolicy::FullPcpus,
        Exclusive::NumaNodeLevel,
        Strategy::MostAllocated,
    )
    .unwrap();
    assert_eq!(fmt(&got), "8-9", "NUMA node 0 holds a NUMANodeLevel pod");
}

fn opts(t: CpuTopology, numa_cpu: i64, numa_mem: i64) -> TopologyOptions {
    let numa = t
        .numa_nodes()
        .into_iter()
        .map(|n| (n, NumaRes::cpu_memory(numa_cpu, numa_mem)))
        .collect();
    TopologyOptions {
        topo: t,
        numa,
        ..Default::default()
    }
}

#[test]
fn numa_policies_admit_by_hints() {
    let o = opts(topo(2, 1, 4, 2), 8000, 16 << 30);
    let st = NodeState::default();
    let all = 0b11;
    let req = |cpu: i64, bind| Request {
        res: NumaRes::cpu_memory(cpu, 1 << 30),
        bind,
    };
    let admit = |p, r: &Request| hints::admit(p, &hints::generate(&o, &st, r, p, false), all);
    // Fits one NUMA node: every policy picks a single node.
    for p in [
        NumaPolicy::BestEffort,
        NumaPolicy::Restricted,
        NumaPolicy::SingleNumaNode,
    ] {
        let mask = admit(p, &req(4000, None)).unwrap().unwrap();
        assert_eq!(mask.count_ones(), 1, "{p:?}");
    }
    // Needs both: SingleNUMANode refuses, Restricted and BestEffort span.
    let wide = req(12000, None);
    assert_eq!(
        admit(NumaPolicy::SingleNumaNode, &wide)
            .unwrap_err()
            .to_string(),
        "Unsatisfied NUMA cpu"
    );
    assert_eq!(admit(NumaPolicy::Restricted, &wide).unwrap(), Some(0b11));
    assert_eq!(admit(NumaPolicy::BestEffort, &wide).unwrap(), Some(0b11));
    // The allocation splits evenly and pins CPUs inside the chosen nodes.
    let bind = Some(Bind {
        policy: BindPolicy::FullPcpus,
        required: true,
        exclusive: Exclusive::None,
    });
    let a = alloc::allocate(
        &o,
        &st,
        &req(12000, bind),
        Some(0b11),
        Strategy::LeastAllocated,
    )
    .unwrap();
    assert_eq!(
        a.numa
            .iter()
            .map(|(n, r)| (*n, r.cpu()))
            .collect::<Vec<_>>(),
        [(0, 6000), (1, 6000)]
    );
    assert_eq!(fmt(&a.cpus), "0-5,8-13");
}

fn nrt(name: &str, e: &[(u32, u32, u32, u32)], extra: Value) -> Value {
    let detail: Vec<Value> = e.iter().map(|(id, core, socket, node)| json!({"id": id, "core": core, "socket": socket, "node": node})).collect();
    let nodes: BTreeSet<u32> = e.iter().map(|x| x.3).collect();
    let per = e.len() / nodes.len();
    let zones: Vec<Value> = nodes
        .iter()
        .map(|n| json!({"name": format!("node-{n}"), "type": "Node", "resources": [
            {"name": "cpu", "capacity": per.to_string(), "allocatable": per.to_string(), "available": per.to_string()},
            {"name": "memory", "capacity": "16Gi", "allocatable": "16Gi", "available": "16Gi"}]}))
        .collect();
    let mut v = json!({"apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
        "metadata": {"name": name, "annotations": {
            "node.koordinator.sh/cpu-topology": json!({"detail": detail}).to_string()}},
        "topologyPolicies": ["None"], "zones": zones});
    json_patch::merge(&mut v, &extra);
    v
}

fn lsr(name: &str, cpu: &str, ann: Value) -> crate::scheduler::framework::PodInfo {
    pod(
        json!({"metadata": {"name": name, "namespace": "d", "uid": name,
            "labels": {"koordinator.sh/qosClass": "LSR"}, "annotations": ann},
        "spec": {"priority": 9500, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}),
    )
}

fn framework() -> Framework {
    let cfg = crate::scheduler::config::default_config().unwrap();
    crate::scheduler::config::framework(&cfg.profiles[0]).unwrap()
}

#[test]
fn the_default_profile_pins_lsr_pods_and_counts_assumed_cpus() {
    let fw = framework();
    let mut c = cluster(vec![
        node_json("n1", "8", "32Gi"),
        node_json("bare", "64", "256Gi"),
    ]);
    let t: CpuTopology = topo(1, 1, 4, 2);
    let nrt: crate::api::topology::NodeResourceTopology =
        serde_json::from_value(nrt("n1", &entries(1, 1, 4, 2), json!({}))).unwrap();
    c.upsert_topology(&nrt);
    assert!(c.topology("n1").unwrap().topo == t);
    let mut seen = BTreeSet::new();
    for i in 0..4 {
        let p = lsr(&format!("p{i}"), "2", json!({}));
        let mut r = fw.schedule(
            &p,
            &c,
            crate::scheduler::framework::runtime::Scope::Everything,
        );
        assert_eq!(r.node.as_deref(), Some("n1"), "{:?}", r.verdicts);
        assert_eq!(r.verdicts["bare"].reason, ERR_INVALID_CPU_TOPOLOGY);
        fw.reserve(&mut r.state, &p, "n1", &c).unwrap();
        let m = fw.pre_bind(&r.state, &p, "n1").unwrap().unwrap();
        let ann = m.metadata.annotations.clone().unwrap();
        let status: Value = serde_json::from_str(&ann[ANNOTATION_RESOURCE_STATUS]).unwrap();
        let cpus = set(status["cpuset"].as_str().unwrap());
        assert_eq!(cpus.len(), 2);
        assert!(seen.is_disjoint(&cpus), "p{i} got {} again", fmt(&cpus));
        seen.extend(cpus.iter().copied());
        assert_eq!(
            ann[ANNOTATION_RESOURCE_SPEC],
            r#"{"preferredCPUBindPolicy":"FullPCPUs"}"#
        );
        c.assume(
            &crate::scheduler::framework::PodInfo::new(Arc::new(m)),
            "n1",
        );
    }
    let p = lsr("p4", "2", json!({}));
    let r = fw.schedule(
        &p,
        &c,
        crate::scheduler::framework::runtime::Scope::Everything,
    );
    assert_eq!(r.node, None, "all 8 CPUs are pinned");
    assert!(
        r.verdicts["n1"].reason.contains("Insufficient cpu")
            || r.verdicts["n1"].reason == take::ERR_NOT_ENOUGH_CPUS,
        "{:?}",
        r.verdicts["n1"]
    );
}

#[test]
fn filter_reasons() {
    let plugin = NodeNUMAResource::new(Default::default()).unwrap();
    let mut c = cluster(vec![node_json("n1", "8", "32Gi")]);
    let n: crate::api::topology::NodeResourceTopology =
        serde_json::from_value(nrt("n1", &entries(1, 1, 4, 2), json!({}))).unwrap();
    c.upsert_topology(&n);
    let run = |p: &crate::scheduler::framework::PodInfo, c: &ClusterState| {
        let mut st = CycleState::default();
        let (s, _) = plugin.pre_filter(&mut st, p, c);
        if !s.is_success() {
            return s.message();
        }
        plugin.filter(&st, p, &c.nodes[0], c).message()
    };
    assert_eq!(
        run(&lsr("a", "1500m", json!({})), &c),
        ERR_INVALID_REQUESTED_CPUS
    );
    let required = json!({"scheduling.koordinator.sh/resource-spec": "{\"requiredCPUBindPolicy\":\"FullPCPUs\"}"});
    assert_eq!(run(&lsr("b", "3", required.clone()), &c), ERR_SMT_ALIGNMENT);
    assert_eq!(run(&lsr("c", "2", required), &c), "");
    let numa = json!({"scheduling.koordinator.sh/numa-topology-spec": "{\"numaTopologyPolicy\":\"SingleNUMANode\"}"});
    let mut labeled = c.nodes[0].node.as_ref().clone();
    labeled
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(LABEL_NODE_NUMA_TOPOLOGY_POLICY.into(), "Restricted".into());
    let mut c2 = ClusterState::default();
    c2.upsert_node(Arc::new(labeled));
    c2.upsert_topology(&n);
    assert_eq!(
        run(&lsr("d", "2", numa.clone()), &c2),
        ERR_NOT_MATCH_NUMA_TOPOLOGY
    );
    // The node as it was, then relabelled in place: what the plugin parsed follows the node.
    let mut c4 = ClusterState::default();
    c4.upsert_node(c.nodes[0].node.clone());
    c4.upsert_topology(&n);
    assert_eq!(run(&lsr("d", "2", numa.clone()), &c4), "");
    c4.upsert_node(c2.nodes[0].node.clone());
    assert_eq!(run(&lsr("d", "2", numa), &c4), ERR_NOT_MATCH_NUMA_TOPOLOGY);
    let spread = json!({"scheduling.koordinator.sh/resource-spec": "{\"requiredCPUBindPolicy\":\"SpreadByPCPUs\"}"});
    let mut forced = c.nodes[0].node.as_ref().clone();
    forced
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(LABEL_NODE_CPU_BIND_POLICY.into(), "FullPCPUsOnly".into());
    let mut c3 = ClusterState::default();
    c3.upsert_node(Arc::new(forced));
    c3.upsert_topology(&n);
    assert_eq!(
        run(&lsr("e", "2", spread), &c3),
        ERR_CPU_BIND_POLICY_CONFLICT
    );
    // On a FullPCPUsOnly node every pod with CPUs binds, whatever its QoS.
    let ls = pod(json!({"metadata": {"name": "f", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}));
    assert_eq!(run(&ls, &c3), ERR_INVALID_REQUESTED_CPUS);
}

#[test]
fn reserved_cpus_and_placed_pods_are_not_given_out() {
    let e = entries(1, 1, 4, 2);
    let raw = nrt(
        "n1",
        &e,
        json!({"metadata": {"annotations": {
        "kubelet.koordinator.sh/cpu-manager-policy": "{\"policy\":\"static\",\"reservedCPUs\":\"0-1\"}"}}}),
    );
    let n: crate::api::topology::NodeResourceTopology = serde_json::from_value(raw).unwrap();
    let o = TopologyOptions::from_nrt(&n);
    assert_eq!(fmt(&o.reserved), "0-1");
    assert_eq!(
        o.numa[&0].cpu(),
        6000,
        "reserved CPUs leave the NUMA node's allocatable"
    );
    let mut c = cluster(vec![node_json("n1", "8", "32Gi")]);
    c.upsert_topology(&n);
    c.upsert_pod(Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "old", "namespace": "d",
            "annotations": {"scheduling.koordinator.sh/resource-status": "{\"cpuset\":\"2-3\"}"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}}))
        .unwrap(),
    ));
    let st = NodeState::of(&c.nodes[0], &|_| false);
    assert_eq!(fmt(&st.available(&o)), "4-7");
    // A topology that arrives before its Node is attached when the Node does.
    let mut early = ClusterState::default();
    early.upsert_topology(&n);
    early.upsert_node(Arc::new(
        serde_json::from_value(node_json("n1", "8", "32Gi")).unwrap(),
    ));
    assert_eq!(early.nodes[0].topology.as_deref(), Some(&o));
    early.remove_topology("n1");
    assert!(early.nodes[0].topology.is_none());
}

/// The annotations the default profile's PreBind writes on `p`, placed on n1.
fn bound_on_n1(
    c: &ClusterState,
    p: &crate::scheduler::framework::PodInfo,
) -> BTreeMap<String, String> {
    let fw = framework();
    let mut r = fw.schedule(
        p,
        c,
        crate::scheduler::framework::runtime::Scope::Everything,
    );
    assert_eq!(r.node.as_deref(), Some("n1"), "{:?}", r.verdicts);
    fw.reserve(&mut r.state, p, "n1", c).unwrap();
    let m = fw.pre_bind(&r.state, p, "n1").unwrap().unwrap();
    m.metadata.annotations.unwrap()
}

#[path = "device_tests.rs"]
mod device_tests;

#[path = "reservation_tests.rs"]
mod reservation_tests;

#[path = "batch_tests.rs"]
mod batch_tests;
