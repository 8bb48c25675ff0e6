//! The seeded random cluster and the steps each seed creates.

use serde_json::{Value, json};

/// splitmix64: a seed gives the same cluster on every machine.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// 1 socket, `cpus / 2` cores of 2 threads; two NUMA nodes (halves) from 8 CPUs up.
fn topology(name: &str, cpus: u64, mem: u64) -> Value {
    let numa = if cpus >= 8 { 2 } else { 1 };
    let detail: Vec<Value> = (0..cpus)
        .map(|id| json!({"id": id, "core": id / 2, "socket": 0, "node": id * numa / cpus}))
        .collect();
    let cpu = (cpus / numa).to_string();
    let memory = format!("{}Gi", mem / numa);
    let zones: Vec<Value> = (0..numa)
        .map(|n| {
            json!({"name": format!("node-{n}"), "type": "Node", "resources": [
            {"name": "cpu", "capacity": cpu, "allocatable": cpu, "available": cpu},
            {"name": "memory", "capacity": memory, "allocatable": memory, "available": memory}]})
        })
        .collect();
    json!({"kind": "NodeResourceTopology", "metadata": {"name": name, "annotations": {
        "node.koordinator.sh/cpu-topology": json!({"detail": detail}).to_string(),
        "kubelet.koordinator.sh/cpu-manager-policy": "{\"policy\":\"none\"}"}},
        "topologyPolicies": ["None"], "zones": zones})
}

/// `gpus` whole GPUs of 16 GiB, one per NUMA node and PCIe switch; `vendor` on the Device
/// (MetaX's plugin needs the node locked per pod under DevicePluginAdaption).
fn device(name: &str, gpus: u64, vendor: &str) -> Value {
    let devices: Vec<Value> = (0..gpus)
        .map(|minor| json!({"type": "gpu", "id": format!("GPU-{name}-{minor}"), "minor": minor, "health": true,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                "koordinator.sh/gpu-memory-ratio": "100"},
            "topology": {"socketID": 0, "nodeID": minor, "pcieID": format!("pci0000:3{minor}"), "busID": format!("0000:3b:0{minor}.0")}}))
        .collect();
    json!({"kind": "Device", "metadata": {"name": name, "labels": {"node.koordinator.sh/gpu-vendor": vendor}},
        "spec": {"devices": devices}})
}

/// A tainted Huawei Ascend-310P node with one NPU and the templates it is shared by (a
/// share equal to `vir02` is placed named by it; another share is refused at PreFilter).
fn npu_node() -> Vec<Value> {
    let npu = json!({"huawei.com/npu-core": "8", "huawei.com/npu-cpu": "7", "huawei.com/npu-dvpp": "100",
        "koordinator.sh/gpu-memory": "24Gi", "koordinator.sh/gpu-memory-ratio": "100", "koordinator.sh/gpu-core": "100"});
    let mut alloc = npu.clone();
    alloc["cpu"] = "8".into();
    alloc["memory"] = "32Gi".into();
    alloc["pods"] = "110".into();
    alloc["koordinator.sh/gpu.shared"] = "100".into();
    let labels = json!({"node": "npu", "node.koordinator.sh/gpu-vendor": "huawei",
        "node.koordinator.sh/gpu-model": "Ascend-310P"});
    let data = "huawei-Ascend-310P:\n  vir02:\n    huawei.com/npu-core: \"2\"\n    huawei.com/npu-cpu: \"2\"\n    huawei.com/npu-dvpp: \"25\"\n    koordinator.sh/gpu-memory: 6Gi\n";
    vec![
        json!({"kind": "ConfigMap", "metadata": {"name": "gpu-templates", "namespace": "default"},
            "data": {"data.yaml": data}}),
        json!({"kind": "Node", "metadata": {"name": "npu", "labels": labels},
            "spec": {"taints": [{"key": "npu", "effect": "NoSchedule"}]},
            "status": {"allocatable": alloc, "capacity": alloc}}),
        json!({"kind": "Device", "metadata": {"name": "npu", "labels": {"node.koordinator.sh/gpu-vendor": "huawei"}},
            "spec": {"devices": [{"type": "gpu", "minor": 0, "id": "NPU-0", "health": true, "resources": npu}]}}),
    ]
}

/// A share of the NPU node's NPU: `core` NPU cores.
fn npu_pod(name: &str, core: &str) -> Value {
    let r = json!({"cpu": "1", "koordinator.sh/gpu.shared": "1", "huawei.com/npu-core": core,
        "huawei.com/npu-cpu": "2", "huawei.com/npu-dvpp": "25", "koordinator.sh/gpu-memory": "6Gi"});
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "koord-scheduler", "nodeSelector": {"node": "npu"},
            "tolerations": [{"key": "npu", "operator": "Exists"}],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": r, "limits": r}}]}})
}

/// Nodes, their NodeMetrics (a third without `spec`, as some reporters write them) and
/// topologies.
pub fn cluster(rng: &mut Rng) -> Vec<Value> {
    // The PodGroup exists before its members: created with them, its watch event may reach
    // the live scheduler after theirs (another stream), which a snapshot cannot show.
    let gather = [
        r#"{"gatherStrategy":[{"layer":"BlockLayer","strategy":"PreferGather"}]}"#,
        r#"{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"}]}"#,
    ][rng.below(2) as usize];
    let mut out = vec![
        json!({"kind": "ElasticQuota", "metadata": {"name": "q1", "namespace": "default"},
        "spec": {"max": {"cpu": "3", "memory": "24Gi"}, "min": {"cpu": "2", "memory": "4Gi"}}}),
        json!({"kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}),
        json!({"kind": "PodGroup", "metadata": {"name": "t", "namespace": "default", "annotations": {
            "gang.scheduling.koordinator.sh/network-topology-spec": gather}}, "spec": {"minMember": 2}}),
        json!({"kind": "ClusterNetworkTopology", "metadata": {"name": "default"},
            "spec": {"networkTopologySpec": [
                {"labelKey": ["spine"], "topologyLayer": "SpineLayer"},
                {"labelKey": ["block"], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
                {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"}]}}),
    ];
    out.extend(npu_node());
    let nodes = 4 + rng.below(5);
    for i in 0..nodes {
        let name = format!("n{i}");
        let cpus = [4, 8, 16][rng.below(3) as usize];
        let mem = [8, 16, 32][rng.below(3) as usize];
        let batch = rng.below(cpus * 1000);
        let mut alloc = json!({"cpu": cpus.to_string(), "memory": format!("{mem}Gi"), "pods": "110",
            "kubernetes.io/batch-cpu": batch.to_string(), "kubernetes.io/batch-memory": format!("{}Gi", mem / 2)});
        // n1 always has a GPU (without drawing, so the seeds' draws stay as they were).
        let gpus = match rng.chance(40) {
            true => 1 + rng.below(2),
            false => u64::from(i == 1),
        };
        if gpus > 0 {
            alloc["koordinator.sh/gpu-core"] = (gpus * 100).to_string().into();
            alloc["koordinator.sh/gpu-memory-ratio"] = (gpus * 100).to_string().into();
            alloc["koordinator.sh/gpu-memory"] = format!("{}Gi", gpus * 16).into();
            out.push(device(
                &name,
                gpus,
                if i % 4 == 0 { "nvidia" } else { "metax" },
            ));
        }
        let labels = json!({"node": name, "zone": format!("z{}", i % 2), "spine": format!("s{}", i % 2), "block": format!("b{}", i % 4)});
        let mut node = json!({"kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": alloc, "capacity": alloc}});
        if rng.chance(15) {
            node["spec"] = json!({"taints": [{"key": "dedicated", "effect": "NoSchedule"}]});
        }
        out.push(node);
        if rng.chance(85) {
            let used_cpu = rng.below(cpus * 900);
            let used_mem = rng.below(mem * 900);
            let mut m = json!({"kind": "NodeMetric", "metadata": {"name": name},
                "status": {"updateTime": now(), "nodeMetric": {"nodeUsage": {"resources":
                    {"cpu": format!("{used_cpu}m"), "memory": format!("{used_mem}Mi")}}}}});
            if rng.chance(66) {
                m["spec"] = json!({});
            }
            out.push(m);
        }
        if rng.chance(50) {
            out.push(topology(&name, cpus, mem));
        }
    }
    out
}

fn pod(rng: &mut Rng, name: &str, labels: Value) -> Value {
    let (qos, priority, cpu, mem) = match rng.below(4) {
        0 => (
            "LSR",
            "koord-prod",
            format!("{}", 1 + rng.below(4)),
            "1Gi".to_string(),
        ),
        1 => (
            "BE",
            "koord-batch",
            String::new(),
            format!("{}Mi", 256 + rng.below(2048)),
        ),
        _ => (
            "LS",
            "koord-prod",
            format!("{}m", 100 + rng.below(3000)),
            format!("{}Mi", 128 + rng.below(4096)),
        ),
    };
    let mut labels = labels;
    labels["koordinator.sh/qosClass"] = qos.into();
    if rng.chance(50) {
        labels["quota.scheduling.koordinator.sh/name"] = "q1".into();
    }
    let resources = if qos == "BE" {
        let batch = json!({"kubernetes.io/batch-cpu": (100 + rng.below(2000)).to_string(),
            "kubernetes.io/batch-memory": mem});
        json!({"requests": batch, "limits": batch})
    } else {
        let mut r = json!({"cpu": cpu, "memory": mem});
        if qos == "LS" && rng.chance(25) {
            let share = ["50", "100"][rng.below(2) as usize];
            r["koordinator.sh/gpu-memory-ratio"] = share.into();
            // With its core, as MetaX's plugin needs (DevicePluginAdaption).
            r["koordinator.sh/gpu-core"] = share.into();
        }
        json!({"requests": r, "limits": r})
    };
    let mut spec = json!({"schedulerName": "koord-scheduler", "priorityClassName": priority,
        "containers": [{"name": "c", "image": "x", "resources": resources}]});
    if qos == "LS" && rng.chance(20) {
        // Pod-level resources: the pod's own cpu and memory replace its containers' sum.
        let own = json!({"cpu": format!("{}m", 500 + rng.below(2000)), "memory": "2Gi"});
        spec["resources"] = json!({"requests": own, "limits": own});
    }
    let mut annotations = json!({});
    if qos == "LS" && rng.chance(30) {
        // A NUMA topology policy: NodeNUMAResource and DeviceShare agree on NUMA nodes.
        annotations["scheduling.koordinator.sh/numa-topology-spec"] =
            r#"{"numaTopologyPolicy":"SingleNUMANode"}"#.into();
    }
    if rng.chance(30) {
        spec["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
    }
    if rng.chance(20) {
        spec["nodeSelector"] = json!({"zone": format!("z{}", rng.below(2))});
    }
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels,
        "annotations": annotations}, "spec": spec})
}

/// What one step creates: single pods, a gang's two members (together), or a Reservation
/// (the second one pre-allocating the training pod of step 8).
pub fn steps(rng: &mut Rng) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    for i in 0..12 {
        let name = format!("p{i:02}");
        match i {
            4 => out.push(vec![json!({"kind": "Reservation", "metadata": {"name": "r0"}, "spec": {
                "template": {"spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}]}},
                "owners": [{"labelSelector": {"matchLabels": {"app": "owner"}}}], "ttl": "1h"}})]),
            7 => {
                let gang = json!({"pod-group.scheduling.sigs.k8s.io": "g"});
                out.push(vec![pod(rng, "g-a", gang.clone()), pod(rng, "g-b", gang)]);
            }
            10 => {
                let gang = json!({"pod-group.scheduling.sigs.k8s.io": "t"});
                out.push(vec![pod(rng, "t-a", gang.clone()), pod(rng, "t-b", gang)]);
            }
            6 | 9 => out.push(vec![pod(rng, &name, json!({"app": "owner"}))]),
            8 => out.push(vec![json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default",
                "labels": {"app": "train"}}, "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c",
                "image": "x", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}}]}})]),
            11 => out.push(vec![json!({"kind": "Reservation", "metadata": {"name": "r1"}, "spec": {
                "preAllocation": true, "allocatePolicy": "Restricted", "allocateOnce": false,
                "template": {"spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}}]}},
                "owners": [{"labelSelector": {"matchLabels": {"app": "train"}}}], "ttl": "1h"}})]),
            _ => out.push(vec![pod(rng, &name, json!({}))]),
        }
    }
    // Two GPU shares for n1, a MetaX node: the first locks it for MetaX's plugin
    // (DevicePluginAdaption), the second finds it locked.
    for name in ["lock-a", "lock-b"] {
        let r = json!({"cpu": "100m", "koordinator.sh/gpu-core": "10", "koordinator.sh/gpu-memory-ratio": "10"});
        out.push(vec![json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": "koord-scheduler", "nodeSelector": {"node": "n1"},
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "containers": [{"name": "c", "image": "x", "resources": {"requests": r, "limits": r}}]}})]);
    }
    out.push(vec![npu_pod("npu-vir02", "2")]);
    out.push(vec![npu_pod("npu-odd", "3")]);
    // kube v1.35's spreading by the pod's own label values, tainted nodes left out; and a pod
    // of another scheduler taken by koord's profile through the scheduler-name label.
    let spread = json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}}, "matchLabelKeys": ["version"],
        "nodeTaintsPolicy": "Honor"}]);
    let small = json!({"requests": {"cpu": "100m"}});
    out.push(vec![
        json!({"kind": "Pod", "metadata": {"name": "spread-a", "namespace": "default",
        "labels": {"app": "spread", "version": "v1"}},
        "spec": {"schedulerName": "koord-scheduler", "topologySpreadConstraints": spread,
            "containers": [{"name": "c", "image": "x", "resources": small}]}}),
    ]);
    out.push(vec![
        json!({"kind": "Pod", "metadata": {"name": "named", "namespace": "default",
        "labels": {"scheduling.koordinator.sh/scheduler-name": "koord-scheduler"}},
        "spec": {"schedulerName": "other-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": small}]}}),
    ]);
    out
}
