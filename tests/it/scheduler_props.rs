//! Property tests of the scheduling framework over random clusters and pods: no node is
//! ever over-committed by the pods placed on it (bound + assumed), no pod is counted twice,
//! and the live scope (≤ 100 nodes) decides exactly like `koord explain`'s full scope.

use std::collections::HashMap;
use std::sync::Arc;

use koord::scheduler::config;
use koord::scheduler::framework::runtime::Scope;
use koord::scheduler::framework::{ClusterState, PodInfo};
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct NodeSpec {
    cpu_milli: u32,
    mem_mib: u32,
    pods: u32,
    batch_cpu: u32,
    zone: u8,
    tainted: bool,
}

#[derive(Debug, Clone)]
struct PodSpec {
    cpu_milli: u32,
    mem_mib: u32,
    batch_cpu: u32,
    zone: Option<u8>,
    tolerates: bool,
    priority: i32,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        500u32..8000,
        256u32..16384,
        1u32..8,
        0u32..4000,
        0u8..3,
        any::<bool>(),
    )
        .prop_map(
            |(cpu_milli, mem_mib, pods, batch_cpu, zone, tainted)| NodeSpec {
                cpu_milli,
                mem_mib,
                pods,
                batch_cpu,
                zone,
                tainted,
            },
        )
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        0u32..3000,
        0u32..4096,
        prop_oneof![Just(0u32), 1u32..2000],
        prop::option::of(0u8..3),
        any::<bool>(),
        0i32..10000,
    )
        .prop_map(
            |(cpu_milli, mem_mib, batch_cpu, zone, tolerates, priority)| PodSpec {
                cpu_milli,
                mem_mib,
                batch_cpu,
                zone,
                tolerates,
                priority,
            },
        )
}

fn node_json(i: usize, n: &NodeSpec) -> Value {
    let mut v = json!({"metadata": {"name": format!("n{i:03}"), "labels": {"zone": format!("z{}", n.zone)}},
        "status": {"allocatable": {"cpu": format!("{}m", n.cpu_milli), "memory": format!("{}Mi", n.mem_mib),
            "pods": n.pods.to_string(), "kubernetes.io/batch-cpu": n.batch_cpu.to_string()}}});
    if n.tainted {
        v["spec"] = json!({"taints": [{"key": "dedicated", "effect": "NoSchedule"}]});
    }
    v
}

fn pod_info(i: usize, p: &PodSpec) -> PodInfo {
    let mut requests =
        json!({"cpu": format!("{}m", p.cpu_milli), "memory": format!("{}Mi", p.mem_mib)});
    if p.batch_cpu > 0 {
        requests["kubernetes.io/batch-cpu"] = p.batch_cpu.to_string().into();
    }
    let mut spec = json!({"priority": p.priority, "containers": [{"name": "c", "resources": {"requests": requests}}]});
    if let Some(z) = p.zone {
        spec["nodeSelector"] = json!({"zone": format!("z{z}")});
    }
    if p.tolerates {
        spec["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
    }
    PodInfo::new(Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": format!("p{i:03}"), "namespace": "d"}, "spec": spec}),
        )
        .unwrap(),
    ))
}

fn cluster(nodes: &[NodeSpec]) -> ClusterState {
    let mut c = ClusterState::default();
    for (i, n) in nodes.iter().enumerate() {
        c.upsert_node(Arc::new(serde_json::from_value(node_json(i, n)).unwrap()));
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn placements_never_overcommit_and_scopes_agree(nodes in prop::collection::vec(node_spec(), 1..12), pods in prop::collection::vec(pod_spec(), 1..40)) {
        let cfg = config::default_config().unwrap();
        let fw = config::framework(&cfg.profiles[0]).unwrap();
        let mut live = cluster(&nodes);
        let mut full = cluster(&nodes);
        let infos: Vec<PodInfo> = pods.iter().enumerate().map(|(i, p)| pod_info(i, p)).collect();
        for p in &infos {
            let a = fw.schedule(p, &live, Scope::Live { start: 0 }).node;
            let b = fw.schedule(p, &full, Scope::Everything).node;
            prop_assert_eq!(&a, &b, "live and explain disagree on {}", p.key);
            if let Some(n) = a {
                live.assume(p, &n);
                full.assume(p, &n);
                // Assuming the same pod again (a retried cycle) never counts it twice.
                live.assume(p, &n);
            }
        }
        // Preemption for every pod that did not fit: victims are strictly lower priority and
        // removing them makes the pod fit on the nominated node.
        for p in &infos {
            if live.placement(&p.key).is_some() {
                continue;
            }
            let r = fw.schedule(p, &live, Scope::Live { start: 0 });
            if r.node.is_some() {
                continue;
            }
            if let Some(n) = fw.post_filter(&r, p, &live) {
                prop_assert!(!n.victims.is_empty());
                prop_assert!(n.victims.iter().all(|v| v.priority < p.priority), "victim of equal or higher priority");
                let mut node = live.node(&n.node).unwrap().clone();
                for v in &n.victims {
                    node.remove_pod(&v.key);
                }
                prop_assert!(fw.filter_node(&r.state, p, &node, &live).is_ok());
            }
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        for n in &live.nodes {
            prop_assert!(n.pods.len() as i64 <= n.allowed_pods(), "{} holds {} pods", n.name, n.pods.len());
            for (res, want) in &n.requested {
                let have = n.allocatable.get(res).copied().unwrap_or(0);
                prop_assert!(want <= &have, "{} over-committed on {res}: {want} > {have}", n.name);
            }
            for p in &n.pods {
                *seen.entry(p.key.clone()).or_insert(0) += 1;
            }
        }
        prop_assert!(seen.values().all(|c| *c == 1), "{seen:?}");
        for (key, _) in seen {
            prop_assert!(live.placement(&key).is_some());
        }
    }
}
