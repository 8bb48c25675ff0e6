//! DeviceShare as a NUMA hint provider: Koordinator's `TestPlugin_GetPodTopologyHints`
//! and `TestPlugin_Allocate` (topology_hint_test.go) over its fake Device (eight GPUs and
//! four RDMA NICs, half on each NUMA node, two GPUs per PCIe switch), and the default
//! profile placing a GPU on the NUMA node its CPUs were given.

use super::*;
use crate::scheduler::plugins::numa::affinity;
use crate::scheduler::plugins::numa::hints::{Hint, HintMap};
use numa::DEFAULT_NUMA_SCORE as S;

/// Koordinator's `fakeDeviceCR` on node "n1".
fn fake_device() -> Value {
    device(
        &[
            (0, 0, "0"),
            (1, 0, "0"),
            (2, 0, "1"),
            (3, 0, "1"),
            (4, 1, "2"),
            (5, 1, "2"),
            (6, 1, "3"),
            (7, 1, "3"),
        ],
        &[(1, 0, "0"), (2, 0, "1"), (3, 1, "2"), (4, 1, "3")],
    )
}

fn device_pod(name: &str, node: Option<&str>, requests: Value, ann: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": name, "annotations": ann},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": requests}}]}})
}

fn gpu_whole(n: i64) -> Value {
    json!({GPU_CORE: (100 * n).to_string(), GPU_MEMORY_RATIO: (100 * n).to_string()})
}

fn with(a: Value, b: Value) -> Value {
    let mut a = a;
    json_patch::merge(&mut a, &b);
    a
}

fn hint(nodes: &[u32], preferred: bool, score: i64) -> Hint {
    Hint {
        mask: nodes.iter().fold(0, |m, n| m | (1 << n)),
        preferred,
        score,
    }
}

struct Case {
    name: &'static str,
    requests: Value,
    ann: Value,
    assigned: Option<Value>,
    want: Option<Vec<(&'static str, Vec<Hint>)>>,
}

const HINT: &str = "scheduling.koordinator.sh/device-allocate-hint";
const JOINT: &str = "scheduling.koordinator.sh/device-joint-allocate";

fn cases() -> Vec<Case> {
    let rdma2 = json!({RDMA: "2"});
    let gpu_rdma = vec![
        hint(&[0], true, S),
        hint(&[1], true, 0),
        hint(&[0, 1], false, S),
    ];
    let all_500 = vec![
        hint(&[0], true, S),
        hint(&[1], true, S),
        hint(&[0, 1], false, S),
    ];
    let as_count =
        json!({HINT: json!({"rdma": {"allocateStrategy": "RequestsAsCount"}}).to_string()});
    let vf_count = json!({HINT: json!({"rdma": {"vfSelector": {},
        "allocateStrategy": "RequestsAsCount"}}).to_string()});
    vec![
        Case {
            name: "generate gpu&rdma hints",
            requests: with(gpu_whole(1), rdma2.clone()),
            ann: json!({}),
            assigned: None,
            want: Some(vec![("gpu", gpu_rdma.clone()), ("rdma", gpu_rdma.clone())]),
        },
        Case {
            name: "generate gpu&rdma hints but large gpu requests",
            requests: with(gpu_whole(17), rdma2.clone()),
            ann: json!({}),
            assigned: None,
            want: None,
        },
        Case {
            name: "generate gpu hints with assigned devices",
            requests: gpu_whole(4),
            ann: json!({}),
            assigned: Some(json!({"gpu": [{"minor": 0,
                "resources": {GPU_CORE: "100", GPU_MEMORY_RATIO: "100", GPU_MEMORY: "80Gi"}}]})),
            want: Some(vec![(
                "gpu",
                vec![hint(&[1], true, S), hint(&[0, 1], false, S)],
            )]),
        },
        Case {
            name: "generate fpga empty hints",
            requests: json!({"koordinator.sh/fpga": "100"}),
            ann: json!({}),
            assigned: None,
            want: None,
        },
        Case {
            name: "generate 2 rdma hints",
            requests: rdma2.clone(),
            ann: as_count,
            assigned: None,
            want: Some(vec![("rdma", all_500.clone())]),
        },
        Case {
            name: "generate rdma 2 vf hints",
            requests: rdma2.clone(),
            ann: vf_count.clone(),
            assigned: None,
            want: Some(vec![("rdma", all_500)]),
        },
        Case {
            name: "generate rdma 4 vf hints",
            requests: json!({RDMA: "4"}),
            ann: vf_count,
            assigned: None,
            want: Some(vec![("rdma", vec![hint(&[0, 1], true, S)])]),
        },
        Case {
            name: "generate joint-allocate gpu&rdma hints",
            requests: with(rdma2, gpu_whole(1)),
            ann: json!({HINT: json!({"rdma": {"vfSelector": {}}}).to_string(),
                JOINT: json!({"deviceTypes": ["gpu", "rdma"]}).to_string()}),
            assigned: None,
            want: Some(vec![("gpu", gpu_rdma.clone()), ("rdma", gpu_rdma)]),
        },
    ]
}

fn cluster_with(assigned: Option<Value>) -> ClusterState {
    let mut c = cluster(vec![node_json("n1", "96", "512Gi")]);
    c.upsert_device(&serde_json::from_value(fake_device()).unwrap());
    if let Some(a) = assigned {
        let ann = json!({"scheduling.koordinator.sh/device-allocated": a.to_string()});
        let held = device_pod("assigned-pod", Some("n1"), gpu_whole(1), ann);
        c.upsert_pod(Arc::new(serde_json::from_value(held).unwrap()));
    }
    c
}

#[test]
fn test_plugin_get_pod_topology_hints() {
    let p = plugin(false);
    for case in cases() {
        let c = cluster_with(case.assigned);
        let next = pod(device_pod("p", None, case.requests, case.ann));
        let mut state = CycleState::default();
        let (s, _) = p.pre_filter(&mut state, &next, &c);
        assert_eq!(s.code, Code::Success, "{}: {}", case.name, s.message());
        let got = numa::topology_hints(&state, &c.nodes[0], &c);
        let want: Option<HintMap> = case
            .want
            .map(|w| w.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
        match (got, want) {
            (Ok(got), Some(want)) => assert_eq!(got, Some(want), "{}", case.name),
            (Err(_), None) => {}
            (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
        }
    }
}

#[test]
fn test_plugin_allocate() {
    let p = plugin(false);
    let gpu = json!({GPU_CORE: "100", GPU_MEMORY: "8Gi"});
    let rdma2 = json!({RDMA: "2"});
    let numa0 = Some(1u64);
    let cases: Vec<(&str, Value, Value, Option<u64>, bool)> = vec![
        (
            "allocate gpu&rdma by affinity",
            with(gpu.clone(), rdma2.clone()),
            json!({}),
            numa0,
            true,
        ),
        (
            "generate fpga empty hints",
            json!({"koordinator.sh/fpga": "100"}),
            json!({}),
            None,
            false,
        ),
        (
            "generate 2 rdma hints",
            rdma2.clone(),
            json!({HINT: json!({"rdma": {"allocateStrategy": "RequestsAsCount"}}).to_string()}),
            numa0,
            true,
        ),
        (
            "generate rdma 2 vf hints",
            rdma2.clone(),
            json!({HINT: json!({"rdma": {"vfSelector": {}, "allocateStrategy": "RequestsAsCount"}}).to_string()}),
            numa0,
            true,
        ),
        (
            "generate rdma 4 vf hints",
            json!({RDMA: "4"}),
            json!({HINT: json!({"rdma": {"vfSelector": {}, "allocateStrategy": "RequestsAsCount"}}).to_string()}),
            numa0,
            false,
        ),
        (
            "generate joint-allocate gpu&rdma hints",
            with(rdma2, gpu),
            json!({HINT: json!({"rdma": {"vfSelector": {}}}).to_string(),
                JOINT: json!({"deviceTypes": ["gpu", "rdma"]}).to_string()}),
            numa0,
            true,
        ),
    ];
    let c = cluster_with(None);
    for (name, requests, ann, mask, ok) in cases {
        let next = pod(device_pod("p", None, requests, ann));
        let mut state = CycleState::default();
        p.pre_filter(&mut state, &next, &c);
        if let Some(m) = mask {
            affinity::set(&state, "n1", m);
        }
        let s = p.reserve(&mut state, &next, "n1", &c);
        assert_eq!(s.is_success(), ok, "{name}: {}", s.message());
        if ok {
            let a = state.read::<devices::Allocations>(ALLOC_KEY).unwrap();
            for (kind, granted) in a {
                for g in granted {
                    let d = c.devices["n1"].get(kind, g.minor).unwrap();
                    assert_eq!(
                        d.numa,
                        Some(0),
                        "{name}: {kind} {} off NUMA node 0",
                        g.minor
                    );
                }
            }
        }
    }
}

#[test]
fn disabled_alignment_offers_no_hints_and_ignores_the_affinity() {
    let raw = json!({"disableDeviceNUMATopologyAlignment": true});
    let p = DeviceShare::new(serde_json::from_value(raw).unwrap()).unwrap();
    let c = cluster_with(None);
    let next = pod(device_pod("p", None, gpu_whole(1), json!({})));
    let mut state = CycleState::default();
    p.pre_filter(&mut state, &next, &c);
    assert_eq!(numa::topology_hints(&state, &c.nodes[0], &c), Ok(None));
    affinity::init(&mut state);
    affinity::set(&state, "n1", 0b10);
    assert!(p.reserve(&mut state, &next, "n1", &c).is_success());
    let a = state.read::<devices::Allocations>(ALLOC_KEY).unwrap();
    assert_eq!(
        minors(a, "gpu"),
        [0],
        "NUMA node 1 was chosen, but alignment is off"
    );
}
