//! Table tests of DeviceShare: request normalisation, allocation (fragmentation, NUMA and
//! PCIe alignment, RDMA pairing, reservations), the annotation, and the plugin over a
//! cluster state rebuilt from annotated pods.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::alloc::{self, Ctx, ERR_JOINT, Scorer};
use super::request::{self, JointAllocate, Need, Request};
use super::*;
use crate::api::pod::Amounts;
use crate::scheduler::framework::Code;
use crate::scheduler::model::devices::{self, DevRes, NodeDevices, Used};
use crate::scheduler::test_util::{cluster, node_json, pod};

const GI: i64 = 1 << 30;

fn amounts(v: Value) -> Amounts {
    let list = serde_json::from_value(v).unwrap();
    crate::api::pod::amounts(Some(&list))
}

fn res(pairs: &[(&str, i64)]) -> DevRes {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn requests_normalised_as_koordinator() {
    let need = |per: &[(&str, i64)], count| Need {
        per: res(per),
        count,
    };
    let cases: Vec<(Value, Option<(Need, bool)>)> = vec![
        (
            json!({"nvidia.com/gpu": "2"}),
            Some((need(&[(GPU_CORE, 100), (GPU_MEMORY_RATIO, 100)], 2), false)),
        ),
        (
            json!({"koordinator.sh/gpu": "50"}),
            Some((need(&[(GPU_CORE, 50), (GPU_MEMORY_RATIO, 50)], 1), true)),
        ),
        (
            json!({"koordinator.sh/gpu-memory-ratio": "50", "koordinator.sh/gpu.shared": "1"}),
            Some((need(&[(GPU_MEMORY_RATIO, 50)], 1), true)),
        ),
        (
            json!({"koordinator.sh/gpu-memory-ratio": "200"}),
            Some((need(&[(GPU_MEMORY_RATIO, 100)], 2), false)),
        ),
        (
            json!({"koordinator.sh/gpu-memory": "8Gi"}),
            Some((need(&[(GPU_MEMORY, 8 * GI)], 1), true)),
        ),
        (
            json!({"koordinator.sh/gpu.shared": "2", "koordinator.sh/gpu-memory-ratio": "100",
                "koordinator.sh/gpu-core": "60"}),
            Some((need(&[(GPU_CORE, 30), (GPU_MEMORY_RATIO, 50)], 2), true)),
        ),
        (json!({"cpu": "2"}), None),
    ];
    for (req, want) in cases {
        let got = request::of_requests(&amounts(req.clone())).unwrap();
        let got = got.map(|r| (r.by_type["gpu"].clone(), r.shared_gpu));
        assert_eq!(got, want, "{req}");
    }
    let rdma = request::of_requests(&amounts(json!({"koordinator.sh/rdma": "100"})))
        .unwrap()
        .unwrap();
    assert_eq!(rdma.by_type["rdma"], need(&[(RDMA, 100)], 1));
    // Koordinator's TestPreFilter "pod has invalid … request" cases and their words.
    let invalid = |names: &str| format!("invalid resource device requests: [{names}]");
    for (bad, want) in [
        (
            json!({"koordinator.sh/fpga": "101"}),
            "invalid resource unit koordinator.sh/fpga: 101".to_string(),
        ),
        (
            json!({"koordinator.sh/gpu": "101"}),
            "invalid resource unit koordinator.sh/gpu: 101".to_string(),
        ),
        (
            json!({"koordinator.sh/gpu-core": "100"}),
            invalid("koordinator.sh/gpu-core"),
        ),
        (
            json!({"koordinator.sh/gpu-memory-ratio": "101"}),
            invalid("koordinator.sh/gpu-memory-ratio"),
        ),
        (
            json!({"huawei.com/npu-core": "8"}),
            invalid("huawei.com/npu-core"),
        ),
        (
            json!({"koordinator.sh/gpu-core": "150"}),
            invalid("koordinator.sh/gpu-core"),
        ),
        (
            json!({"nvidia.com/gpu": "1", "koordinator.sh/gpu-core": "50"}),
            invalid("koordinator.sh/gpu-core nvidia.com/gpu"),
        ),
        (
            json!({"koordinator.sh/gpu.shared": "2", "koordinator.sh/gpu-memory-ratio": "3"}),
            invalid("koordinator.sh/gpu-memory-ratio koordinator.sh/gpu.shared"),
        ),
        (
            json!({"koordinator.sh/rdma": "250"}),
            "invalid resource unit koordinator.sh/rdma: 250".to_string(),
        ),
    ] {
        assert_eq!(
            request::of_requests(&amounts(bad.clone())).map_err(|e| e.to_string()),
            Err(want),
            "{bad}"
        );
    }
}

use crate::api::extension::resources::{GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, RDMA};

/// A Device: `gpus` as (minor, numa, pcie), `rdma` likewise.
fn device(gpus: &[(i32, i32, &str)], rdma: &[(i32, i32, &str)]) -> Value {
    let mut list: Vec<Value> = gpus
        .iter()
        .map(|(m, numa, pcie)| {
            json!({"type": "gpu", "minor": m, "id": format!("GPU-{m}"), "health": true,
                "resources": {GPU_CORE: "100", GPU_MEMORY: "80Gi", GPU_MEMORY_RATIO: "100"},
                "topology": {"socketID": 0, "nodeID": numa, "pcieID": pcie}})
        })
        .collect();
    list.extend(rdma.iter().map(|(m, numa, pcie)| {
        json!({"type": "rdma", "minor": m, "id": format!("0000:{m}f:00.0"), "health": true,
            "resources": {RDMA: "100"},
            "topology": {"socketID": 0, "nodeID": numa, "pcieID": pcie},
            "vfGroups": [{"vfs": [{"minor": 10 + m, "busID": format!("0000:{m}f:00.2")}]}]})
    }));
    json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
        "metadata": {"name": "n1"}, "spec": {"devices": list}})
}

fn node_devices(v: Value) -> NodeDevices {
    NodeDevices::from_device(&serde_json::from_value(v).unwrap())
}

/// (type, minor, amounts held).
type Held<'a> = (&'a str, i32, &'a [(&'a str, i64)]);

fn used(entries: &[Held]) -> Used {
    entries
        .iter()
        .map(|(k, m, r)| ((k.to_string(), *m), res(r)))
        .collect()
}

fn scorer(most: bool) -> Scorer {
    args::Args {
        scoring_strategy: Some(args::ScoringStrategy {
            type_: Some(
                if most {
                    "MostAllocated"
                } else {
                    "LeastAllocated"
                }
                .into(),
            ),
            resources: None,
        }),
        ..Default::default()
    }
    .scorer()
    .unwrap()
}

fn gpu_request(v: Value) -> Request {
    request::of_requests(&amounts(v)).unwrap().unwrap()
}

fn minors(a: &devices::Allocations, kind: &str) -> Vec<i32> {
    a[kind].iter().map(|g| g.minor).collect()
}

/// One allocation over `devs` with `taken` held by others.
fn run(
    devs: &NodeDevices,
    taken: &Used,
    reserved: &Used,
    most: bool,
    req: &Request,
    joint: Option<&JointAllocate>,
) -> Result<devices::Allocations, String> {
    run_hinted(devs, taken, reserved, most, req, joint, &Default::default())
}

/// [`run`] with the pod's `device-allocate-hint`.
fn run_hinted(
    devs: &NodeDevices,
    taken: &Used,
    reserved: &Used,
    most: bool,
    req: &Request,
    joint: Option<&JointAllocate>,
    hints: &super::hint::Hints,
) -> Result<devices::Allocations, String> {
    let s = scorer(most);
    let vfs_used = Default::default();
    let ctx = Ctx {
        devices: devs,
        used: taken,
        reserved,
        scorer: &s,
        hints,
        vfs_used: &vfs_used,
        numa: None,
    };
    alloc::allocate(&ctx, req, joint).map_err(|e| e.to_string())
}

#[test]
fn shared_gpus_spread_or_pack_by_scoring_strategy() {
    let devs = node_devices(device(&[(0, 0, "p0"), (1, 0, "p0"), (2, 1, "p1")], &[]));
    let half = gpu_request(json!({"koordinator.sh/gpu-memory-ratio": "50"}));
    let taken = used(&[("gpu", 0, &[(GPU_MEMORY_RATIO, 50), (GPU_MEMORY, 40 * GI)])]);
    let none = Used::new();
    let packed = run(&devs, &taken, &none, true, &half, None).unwrap();
    assert_eq!(
        minors(&packed, "gpu"),
        [0],
        "MostAllocated fills GPU 0 first"
    );
    let spread = run(&devs, &taken, &none, false, &half, None).unwrap();
    assert_eq!(
        minors(&spread, "gpu"),
        [1],
        "LeastAllocated takes the emptiest, lowest minor"
    );
    let g = &spread["gpu"][0];
    assert_eq!(
        g.resources[GPU_MEMORY],
        40 * GI,
        "memory filled in from the ratio"
    );
    assert_eq!(g.id, "GPU-1");
    let full = used(&[
        ("gpu", 0, &[(GPU_MEMORY_RATIO, 100)]),
        ("gpu", 1, &[(GPU_MEMORY_RATIO, 60)]),
        ("gpu", 2, &[(GPU_MEMORY_RATIO, 51)]),
    ]);
    assert_eq!(
        run(&devs, &full, &none, true, &half, None),
        Err("Insufficient gpu devices".to_string())
    );
}

#[test]
fn whole_gpus_avoid_fragmenting_pcie_switches() {
    // p0 holds GPUs 0,1; p1 holds 2,3,4. GPU 0 is partly used.
    let devs = node_devices(device(
        &[
            (0, 0, "p0"),
            (1, 0, "p0"),
            (2, 1, "p1"),
            (3, 1, "p1"),
            (4, 1, "p1"),
        ],
        &[],
    ));
    let two = gpu_request(json!({"nvidia.com/gpu": "2"}));
    let taken = used(&[("gpu", 0, &[(GPU_CORE, 10), (GPU_MEMORY_RATIO, 10)])]);
    let none = Used::new();
    let a = run(&devs, &taken, &none, false, &two, None).unwrap();
    assert_eq!(minors(&a, "gpu"), [2, 3], "p0 has only one whole GPU left");
    let a = run(&devs, &none, &none, false, &two, None).unwrap();
    assert_eq!(
        minors(&a, "gpu"),
        [0, 1],
        "the tightest switch that fits, leaving p1 whole"
    );
    let four = gpu_request(json!({"nvidia.com/gpu": "4"}));
    let a = run(&devs, &none, &none, false, &four, None).unwrap();
    assert_eq!(minors(&a, "gpu"), [0, 1, 2, 3], "no single group: by order");
}

#[test]
fn multi_gpu_requests_stay_on_one_numa_node() {
    let devs = node_devices(device(
        &[(0, 0, "p0"), (1, 0, "p1"), (2, 1, "p2"), (3, 1, "p3")],
        &[],
    ));
    let two = gpu_request(json!({"nvidia.com/gpu": "2"}));
    let taken = used(&[("gpu", 1, &[(GPU_CORE, 100), (GPU_MEMORY_RATIO, 100)])]);
    let a = run(&devs, &taken, &Used::new(), false, &two, None).unwrap();
    assert_eq!(
        minors(&a, "gpu"),
        [2, 3],
        "NUMA 0 has one free GPU; NUMA 1 has two"
    );
}

#[test]
fn rdma_is_paired_with_the_gpus_pcie_switch() {
    let devs = node_devices(device(
        &[(0, 0, "p0"), (1, 0, "p0"), (2, 1, "p1"), (3, 1, "p1")],
        &[(0, 0, "p0"), (1, 1, "p1")],
    ));
    let req = gpu_request(json!({"nvidia.com/gpu": "1", "koordinator.sh/rdma": "100"}));
    let joint = JointAllocate {
        device_types: vec!["gpu".into(), "rdma".into()],
        required_scope: Some("SamePCIe".into()),
    };
    let busy_p0 = used(&[
        ("gpu", 0, &[(GPU_CORE, 100), (GPU_MEMORY_RATIO, 100)]),
        ("gpu", 1, &[(GPU_CORE, 100), (GPU_MEMORY_RATIO, 100)]),
    ]);
    let none = Used::new();
    let a = run(&devs, &busy_p0, &none, false, &req, Some(&joint)).unwrap();
    assert_eq!(minors(&a, "gpu"), [2]);
    assert_eq!(minors(&a, "rdma"), [1], "the NIC on the GPU's switch");
    assert!(a["rdma"][0].vfs.is_empty(), "no vfSelector: the PF, no VF");
    // Two GPUs on two switches get one NIC on each.
    let spread = used(&[
        ("gpu", 1, &[(GPU_CORE, 100), (GPU_MEMORY_RATIO, 100)]),
        ("gpu", 3, &[(GPU_CORE, 100), (GPU_MEMORY_RATIO, 100)]),
    ]);
    let two = gpu_request(json!({"nvidia.com/gpu": "2", "koordinator.sh/rdma": "100"}));
    let a = run(&devs, &spread, &none, false, &two, Some(&joint)).unwrap();
    assert_eq!(minors(&a, "gpu"), [0, 2]);
    assert_eq!(minors(&a, "rdma"), [0, 1]);
    // The NIC on p1 is taken: SamePCIe cannot be met.
    let nic_taken = {
        let mut u = busy_p0.clone();
        u.insert(("rdma".into(), 1), res(&[(RDMA, 100)]));
        u
    };
    assert_eq!(
        run(&devs, &nic_taken, &none, false, &req, Some(&joint)),
        Err(ERR_JOINT.to_string())
    );
    let loose = JointAllocate {
        required_scope: None,
        ..joint
    };
    let a = run(&devs, &nic_taken, &none, false, &req, Some(&loose)).unwrap();
    assert_eq!(
        minors(&a, "rdma"),
        [0],
        "without SamePCIe the other NIC will do"
    );
}

#[test]
fn reserved_devices_are_taken_first() {
    let devs = node_devices(device(&[(0, 0, "p0"), (1, 0, "p0")], &[]));
    let half = gpu_request(json!({"koordinator.sh/gpu-memory-ratio": "50"}));
    let reserved = used(&[("gpu", 1, &[(GPU_MEMORY_RATIO, 100), (GPU_MEMORY, 80 * GI)])]);
    let a = run(&devs, &Used::new(), &reserved, false, &half, None).unwrap();
    assert_eq!(
        minors(&a, "gpu"),
        [1],
        "the reservation's GPU, not the emptiest"
    );
}

#[test]
fn annotation_round_trips_in_koordinators_shape() {
    let devs = node_devices(device(&[(0, 0, "p0")], &[]));
    let half = gpu_request(
        json!({"koordinator.sh/gpu-memory-ratio": "50", "koordinator.sh/gpu-core": "50"}),
    );
    let a = run(&devs, &Used::new(), &Used::new(), false, &half, None).unwrap();
    let text = devices::format(&a);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v,
        json!({"gpu": [{"minor": 0, "id": "GPU-0", "resources": {
            GPU_CORE: "50", GPU_MEMORY: "40Gi", GPU_MEMORY_RATIO: "50"}}]})
    );
    assert_eq!(devices::parse(&text), Some(a));
    assert_eq!(devices::parse("not json"), None);
}

fn gpu_pod(name: &str, node: Option<&str>, ratio: &str, allocated: Option<Value>) -> Value {
    let mut ann = json!({});
    if let Some(a) = allocated {
        ann = json!({"scheduling.koordinator.sh/device-allocated": a.to_string()});
    }
    json!({"metadata": {"name": name, "namespace": "default", "uid": name, "annotations": ann},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {
            "koordinator.sh/gpu-memory-ratio": ratio, "koordinator.sh/gpu.shared": "1"}}}]}})
}

fn plugin(most: bool) -> DeviceShare {
    let raw = json!({"scoringStrategy": {"type": if most { "MostAllocated" } else { "LeastAllocated" }},
        "gpuShareUnsupportedModels": [{"vendor": "huawei", "model": "Ascend-310P3-300I-DUO"}]});
    DeviceShare::new(serde_json::from_value(raw).unwrap()).unwrap()
}

#[test]
fn plugin_allocates_from_what_pods_carry_and_writes_the_annotation() {
    let mut c = cluster(vec![node_json("n1", "8", "32Gi")]);
    c.upsert_device(&serde_json::from_value(device(&[(0, 0, "p0"), (1, 0, "p0")], &[])).unwrap());
    // A pod bound before a restart: its annotation is all that says GPU 0 is half used.
    let held =
        json!({"gpu": [{"minor": 0, "resources": {GPU_MEMORY_RATIO: "50", GPU_MEMORY: "40Gi"}}]});
    c.upsert_pod(Arc::new(
        serde_json::from_value(gpu_pod("a", Some("n1"), "50", Some(held))).unwrap(),
    ));
    let p = plugin(true);
    let next = pod(gpu_pod("b", None, "50", None));
    let mut state = CycleState::default();
    assert_eq!(p.pre_filter(&mut state, &next, &c).0.code, Code::Success);
    assert!(p.filter(&state, &next, &c.nodes[0], &c).is_success());
    assert!(p.reserve(&mut state, &next, "n1", &c).is_success());
    let mut draft = PodDraft::new(&next.pod);
    assert!(p.pre_bind(&state, &next, "n1", &mut draft).is_success());
    let bound = draft.changed().expect("the allocation is written");
    let ann =
        &bound.metadata.annotations.as_ref().unwrap()["scheduling.koordinator.sh/device-allocated"];
    let v: Value = serde_json::from_str(ann).unwrap();
    assert_eq!(v["gpu"][0]["minor"], 0, "packed next to pod a: {ann}");
    assert_eq!(reserved_devices(&state), Some(v));
    // Counted once assumed: a third half-GPU pod goes to GPU 1.
    c.assume(&PodInfo::new(Arc::new(bound)), "n1");
    let third = pod(gpu_pod("c", None, "50", None));
    let mut state = CycleState::default();
    p.pre_filter(&mut state, &third, &c);
    assert!(p.reserve(&mut state, &third, "n1", &c).is_success());
    assert_eq!(
        minors(
            state.read::<devices::Allocations>(ALLOC_KEY).unwrap(),
            "gpu"
        ),
        [1]
    );
    // A whole-GPU pod no longer fits.
    let whole = pod(json!({"metadata": {"name": "w", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}));
    let mut state = CycleState::default();
    p.pre_filter(&mut state, &whole, &c);
    let s = p.filter(&state, &whole, &c.nodes[0], &c);
    assert_eq!(
        (s.code, s.message()),
        (Code::Unschedulable, "Insufficient gpu devices".into())
    );
}

#[test]
fn plugin_skips_pods_without_devices_and_refuses_unsupported_share() {
    let mut c = cluster(vec![
        node_json("n0", "8", "32Gi"),
        json!({"metadata": {"name": "n1", "labels": {
            "node.koordinator.sh/gpu-vendor": "huawei", "node.koordinator.sh/gpu-model": "Ascend-310P3-300I-DUO"}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}),
    ]);
    let p = plugin(false);
    let plain = pod(json!({"metadata": {"name": "x", "namespace": "default"},
        "spec": {"containers": [{"name": "c"}]}}));
    let mut state = CycleState::default();
    assert_eq!(p.pre_filter(&mut state, &plain, &c).0.code, Code::Skip);
    let shared = pod(gpu_pod("s", None, "50", None));
    let mut state = CycleState::default();
    p.pre_filter(&mut state, &shared, &c);
    assert!(
        p.filter(&state, &shared, &c.nodes[0], &c).is_success(),
        "no Device: NodeResourcesFit guards the totals"
    );
    c.upsert_device(&serde_json::from_value(device(&[(0, 0, "p0")], &[])).unwrap());
    let s = p.filter(&state, &shared, &c.nodes[1], &c);
    assert_eq!(s.code, Code::UnschedulableAndUnresolvable);
    assert!(
        s.message().contains("does not support GPU Share"),
        "{}",
        s.message()
    );
    let bad = pod(json!({"metadata": {"name": "b", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"koordinator.sh/gpu-core": "150"}}}]}}));
    let mut state = CycleState::default();
    let (s, _) = p.pre_filter(&mut state, &bad, &c);
    assert_eq!(
        (s.code, s.message()),
        (
            Code::UnschedulableAndUnresolvable,
            "invalid resource device requests: [koordinator.sh/gpu-core]".into()
        )
    );
}

#[test]
fn a_reservations_devices_are_held_until_its_owner_takes_them() {
    let mut c = cluster(vec![node_json("n1", "8", "32Gi")]);
    c.upsert_device(&serde_json::from_value(device(&[(0, 0, "p0")], &[])).unwrap());
    let resv_alloc =
        json!({"gpu": [{"minor": 0, "resources": {GPU_MEMORY_RATIO: "100", GPU_MEMORY: "80Gi"}}]});
    let r: crate::api::scheduling::reservation::Reservation = serde_json::from_value(json!({
        "metadata": {"name": "r1", "uid": "ru1",
            "annotations": {"scheduling.koordinator.sh/device-allocated": resv_alloc.to_string()}},
        "spec": {"owners": [{"object": {"name": "a"}}],
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {
                "koordinator.sh/gpu-memory-ratio": "100"}}}]}}},
        "status": {"phase": "Available", "nodeName": "n1", "allocatable": {"koordinator.sh/gpu-memory-ratio": "100"}}}))
    .unwrap();
    c.upsert_reservation(Arc::new(r));
    let (held, _) = super::used::used_on(&c.nodes[0], &[]);
    assert_eq!(
        held[&("gpu".to_string(), 0)][GPU_MEMORY_RATIO],
        100,
        "held by r1"
    );
    let (held, mine) = super::used::used_on(&c.nodes[0], &["r1".to_string()]);
    assert!(held.is_empty() && mine[&("gpu".to_string(), 0)][GPU_MEMORY_RATIO] == 100);
    // The owner takes half: the reservation holds the other half, counted once.
    let owner = {
        let mut v = gpu_pod(
            "a",
            Some("n1"),
            "50",
            Some(json!({"gpu": [{"minor": 0,
            "resources": {GPU_MEMORY_RATIO: "50"}}]})),
        );
        v["metadata"]["annotations"]["scheduling.koordinator.sh/reservation-allocated"] =
            json!({"name": "r1", "uid": "ru1"}).to_string().into();
        v
    };
    c.upsert_pod(Arc::new(serde_json::from_value(owner).unwrap()));
    let (held, _) = super::used::used_on(&c.nodes[0], &[]);
    assert_eq!(held[&("gpu".to_string(), 0)][GPU_MEMORY_RATIO], 100);
    let set: BTreeSet<i32> = c.devices["n1"].by_type["gpu"]
        .iter()
        .map(|d| d.minor)
        .collect();
    assert_eq!(set, BTreeSet::from([0]));
}

#[test]
fn a_ratio_request_is_scored_as_given() {
    // LeastAllocated over gpu-memory-ratio, gpu-memory, rdma, fpga: a free 80 Gi GPU asked
    // for half by ratio scores 50 on the ratio and 100 on memory (not asked) → 75.
    let devs = node_devices(device(&[(0, 0, "p0")], &[]));
    let req = gpu_request(
        json!({"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}),
    );
    let s = scorer(false);
    let (none, vfs) = (Used::new(), Default::default());
    let hints = Default::default();
    let ctx = Ctx {
        devices: &devs,
        used: &none,
        reserved: &none,
        scorer: &s,
        hints: &hints,
        vfs_used: &vfs,
        numa: None,
    };
    assert_eq!(alloc::node_score(&ctx, &req), 75);
}

#[path = "hint_tests.rs"]
mod hint_tests;
#[path = "numa_tests.rs"]
mod numa_tests;
