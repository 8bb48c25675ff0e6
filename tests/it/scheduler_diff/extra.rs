//! Fixed parts every seed adds after its random ones (no draws, so the seeds' random
//! clusters and steps stay as they were): a claim provisioned under CSIStorageCapacity, a
//! node whose devices are taken by `device-allocate-hint` strategies and exclusive
//! policies, a node where a Reservation preempts (ReservationArgs `enablePreemption`), and a
//! pod of a profile scoring by `RequestedToCapacityRatio`.

use serde_json::{Value, json};

/// The profile that scores by `RequestedToCapacityRatio` (bin packing on cpu and memory).
pub const RATIO_PROFILE: &str = "koord-ratio";
pub const PROVISIONER: &str = "csi.example.com";

/// A `WaitForFirstConsumer` class whose driver tracks capacity: 10 GiB in zone z0, 1 GiB in
/// z1, and a claim of 5 GiB (only z0's nodes can provision it).
pub fn storage() -> Vec<Value> {
    let capacity = |zone: &str, size: &str| {
        json!({"kind": "CSIStorageCapacity", "metadata": {"name": format!("fast-{zone}"), "namespace": "default"},
            "storageClassName": "fast", "nodeTopology": {"matchLabels": {"zone": zone}}, "capacity": size})
    };
    vec![
        json!({"kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer"}),
        json!({"kind": "CSIDriver", "metadata": {"name": PROVISIONER}, "spec": {"storageCapacity": true}}),
        capacity("z0", "10Gi"),
        capacity("z1", "1Gi"),
        json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
            "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "5Gi"}}}}),
    ]
}

/// What the external provisioner creates for a claim the scheduler selected `node` for: a
/// PV bound to it, reachable from that node only.
pub fn provisioned(claim: &str, uid: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": format!("pv-{claim}"),
        "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
        "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
            "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim, "uid": uid},
            "csi": {"driver": PROVISIONER, "volumeHandle": format!("vol-{claim}")},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "node", "operator": "In", "values": [node]}]}]}}}})
}

/// A tainted node with two GPUs on two PCIe switches and four RDMA NICs, two per switch
/// (labelled pool a and pool b).
pub fn hint_node() -> Vec<Value> {
    let alloc = json!({"cpu": "8", "memory": "32Gi", "pods": "110", "koordinator.sh/gpu-core": "200",
        "koordinator.sh/gpu-memory-ratio": "200", "koordinator.sh/gpu-memory": "32Gi",
        "koordinator.sh/rdma": "400"});
    let topology = |minor: u64| {
        json!({"socketID": 0, "nodeID": 0, "pcieID": format!("pci0000:3{minor}"),
            "busID": format!("0000:3{minor}:00.0")})
    };
    let mut devices: Vec<Value> = (0..2)
        .map(|minor| {
            json!({"type": "gpu", "id": format!("GPU-hint-{minor}"), "minor": minor, "health": true,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                "koordinator.sh/gpu-memory-ratio": "100"}, "topology": topology(minor)})
        })
        .collect();
    devices.extend((0..4).map(|minor| {
        json!({"type": "rdma", "id": format!("RDMA-hint-{minor}"), "minor": minor, "health": true,
            "labels": {"pool": if minor < 2 { "a" } else { "b" }},
            "resources": {"koordinator.sh/rdma": "100"}, "topology": topology(minor / 2)})
    }));
    vec![
        json!({"kind": "Node", "metadata": {"name": "hint", "labels": {"node": "hint"}},
            "spec": {"taints": [{"key": "hint", "effect": "NoSchedule"}]},
            "status": {"allocatable": alloc, "capacity": alloc}}),
        json!({"kind": "Device", "metadata": {"name": "hint",
            "labels": {"node.koordinator.sh/gpu-vendor": "nvidia"}}, "spec": {"devices": devices}}),
    ]
}

fn on(node: &str, name: &str, requests: Value, annotations: Value) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"schedulerName": "koord-scheduler", "nodeSelector": {"node": node},
            "tolerations": [{"key": node, "operator": "Exists"}],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": requests, "limits": requests}}]}})
}

const HINT: &str = "scheduling.koordinator.sh/device-allocate-hint";

/// Half a GPU, then half a GPU on a PCIe switch of its own (`PCIeLevel`: the other GPU);
/// one RDMA share on every pool-b NIC (`ApplyForAll`), then two whole NICs
/// (`RequestsAsCount` with `DeviceLevel`: pool a's, the only wholly free ones).
pub fn hint_steps() -> Vec<Vec<Value>> {
    let half = json!({"cpu": "100m", "koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"});
    let pcie = json!({"gpu": {"exclusivePolicy": "PCIeLevel"}}).to_string();
    let all = json!({"rdma": {"allocateStrategy": "ApplyForAll", "selector": {"matchLabels": {"pool": "b"}}}});
    let count =
        json!({"rdma": {"allocateStrategy": "RequestsAsCount", "exclusivePolicy": "DeviceLevel"}});
    let rdma = |n: &str| json!({"cpu": "100m", "koordinator.sh/rdma": n});
    [
        on("hint", "hint-share", half.clone(), json!({})),
        on("hint", "hint-pcie", half, json!({ HINT: pcie })),
        on(
            "hint",
            "hint-all",
            rdma("1"),
            json!({ HINT: all.to_string() }),
        ),
        on(
            "hint",
            "hint-count",
            rdma("2"),
            json!({ HINT: count.to_string() }),
        ),
    ]
    .into_iter()
    .map(|p| vec![p])
    .collect()
}

/// A tainted node of 4 CPUs for the Reservation that preempts.
pub fn preemption_node() -> Value {
    let alloc = json!({"cpu": "4", "memory": "8Gi", "pods": "110"});
    json!({"kind": "Node", "metadata": {"name": "pre", "labels": {"node": "pre"}},
        "spec": {"taints": [{"key": "pre", "effect": "NoSchedule"}]},
        "status": {"allocatable": alloc, "capacity": alloc}})
}

/// A mid-priority pod on the node, then a prod Reservation that fits only without it.
pub fn preemption_steps() -> Vec<Vec<Value>> {
    let cpu = json!({"cpu": "3", "memory": "1Gi"});
    let mut victim = on("pre", "pre-victim", cpu.clone(), json!({}));
    victim["spec"]["priorityClassName"] = "koord-mid".into();
    let mut template = on("pre", "ignored", cpu, json!({}))["spec"].clone();
    template["priorityClassName"] = "koord-prod".into();
    template["priority"] = 9000.into();
    let reservation = json!({"kind": "Reservation", "metadata": {"name": "r-pre"}, "spec": {
        "template": {"spec": template}, "owners": [{"labelSelector": {"matchLabels": {"app": "pre"}}}],
        "ttl": "1h"}});
    vec![vec![victim], vec![reservation]]
}

/// A pod claiming the provisioned volume, and a pod of the bin-packing profile.
pub fn last_steps() -> Vec<Vec<Value>> {
    let small = json!({"requests": {"cpu": "100m", "memory": "256Mi"}});
    vec![
        vec![
            json!({"kind": "Pod", "metadata": {"name": "csi-user", "namespace": "default"},
            "spec": {"schedulerName": "koord-scheduler",
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [{"name": "c", "image": "x", "resources": small}]}}),
        ],
        vec![
            json!({"kind": "Pod", "metadata": {"name": "ratio", "namespace": "default"},
            "spec": {"schedulerName": RATIO_PROFILE,
                "containers": [{"name": "c", "image": "x", "resources": small}]}}),
        ],
    ]
}
