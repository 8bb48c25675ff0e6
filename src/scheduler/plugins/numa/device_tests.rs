//! NodeNUMAResource and DeviceShare aligned (Koordinator's topology manager with both hint
//! providers): under SingleNUMANode the GPU follows the NUMA node the CPUs fit on, and the
//! CPUs follow the NUMA node that still has a GPU.

use super::*;

const GPU_CORE: &str = "koordinator.sh/gpu-core";
const GPU_RATIO: &str = "koordinator.sh/gpu-memory-ratio";

/// Node "n1": 16 CPUs on two NUMA nodes (0–7, 8–15), eight GPUs, 0–3 on NUMA node 0.
fn gpu_cluster() -> ClusterState {
    let mut node = node_json("n1", "16", "32Gi");
    let alloc = &mut node["status"]["allocatable"];
    alloc[GPU_CORE] = json!("800");
    alloc[GPU_RATIO] = json!("800");
    alloc["koordinator.sh/gpu-memory"] = json!("640Gi");
    node["status"]["capacity"] = alloc.clone();
    let mut c = cluster(vec![node]);
    let nrt: crate::api::topology::NodeResourceTopology =
        serde_json::from_value(nrt("n1", &entries(1, 2, 4, 2), json!({}))).unwrap();
    c.upsert_topology(&nrt);
    let gpus: Vec<Value> = (0..8)
        .map(|m| {
            json!({"type": "gpu", "minor": m, "id": format!("GPU-{m}"), "health": true,
                "resources": {GPU_CORE: "100", "koordinator.sh/gpu-memory": "80Gi", GPU_RATIO: "100"},
                "topology": {"socketID": 0, "nodeID": m / 4, "pcieID": (m / 2).to_string()}})
        })
        .collect();
    let dev = json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
        "metadata": {"name": "n1"}, "spec": {"devices": gpus}});
    c.upsert_device(&serde_json::from_value(dev).unwrap());
    c
}

fn bound(name: &str, cpu: &str, ann: Value) -> Arc<k8s_openapi::api::core::v1::Pod> {
    Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "d", "uid": name,
            "annotations": ann}, "spec": {"nodeName": "n1", "containers": [{"name": "c",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}),
        )
        .unwrap(),
    )
}

fn gpu_pod(cpu: &str) -> crate::scheduler::framework::PodInfo {
    let spec = json!({"numaTopologyPolicy": "SingleNUMANode"}).to_string();
    pod(
        json!({"metadata": {"name": "p", "namespace": "d", "uid": "p",
        "annotations": {"scheduling.koordinator.sh/numa-topology-spec": spec}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {
            "cpu": cpu, "memory": "1Gi", GPU_CORE: "100", GPU_RATIO: "100"}}}]}}),
    )
}

/// (NUMA nodes of the resource-status, GPU minors) the default profile gives `p`.
fn placed(c: &ClusterState, p: &crate::scheduler::framework::PodInfo) -> (Vec<i64>, Vec<i64>) {
    let ann = bound_on_n1(c, p);
    let status: Value = serde_json::from_str(&ann[ANNOTATION_RESOURCE_STATUS]).unwrap();
    let devices: Value =
        serde_json::from_str(&ann["scheduling.koordinator.sh/device-allocated"]).unwrap();
    let numa = status["numaNodeResources"].as_array().unwrap().iter();
    let gpus = devices["gpu"].as_array().unwrap().iter();
    (
        numa.map(|n| n["node"].as_i64().unwrap()).collect(),
        gpus.map(|g| g["minor"].as_i64().unwrap()).collect(),
    )
}

/// [`gpu_cluster`] with four of NUMA node 0's CPUs given to a NUMA-aware pod.
fn numa0_half_busy() -> ClusterState {
    let mut c = gpu_cluster();
    let numa0_busy =
        json!({"numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "1Gi"}}]});
    let ann = json!({ANNOTATION_RESOURCE_STATUS: numa0_busy.to_string()});
    c.upsert_pod(bound("busy", "4", ann));
    c
}

#[test]
fn the_gpu_follows_the_numa_node_the_cpus_fit_on() {
    let c = numa0_half_busy();
    // Six CPUs fit only on NUMA node 1; unaligned, GPU 0 (NUMA node 0) would be taken.
    assert_eq!(placed(&c, &gpu_pod("6")), (vec![1], vec![4]));
}

#[test]
fn the_cpus_follow_the_numa_node_that_has_a_gpu() {
    let mut c = gpu_cluster();
    let held: Vec<Value> = (0..4)
        .map(|m| json!({"minor": m, "resources": {GPU_CORE: "100", GPU_RATIO: "100", "koordinator.sh/gpu-memory": "80Gi"}}))
        .collect();
    let ann =
        json!({"scheduling.koordinator.sh/device-allocated": json!({"gpu": held}).to_string()});
    c.upsert_pod(bound("gpus", "1", ann));
    // Both NUMA nodes have room for two CPUs; only NUMA node 1 has a free GPU.
    assert_eq!(placed(&c, &gpu_pod("2")), (vec![1], vec![4]));
}

#[test]
fn without_a_numa_policy_devices_are_not_aligned() {
    let c = numa0_half_busy();
    let p = pod(
        json!({"metadata": {"name": "p", "namespace": "d", "uid": "p"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {
            "cpu": "6", "memory": "1Gi", GPU_CORE: "100", GPU_RATIO: "100"}}}]}}),
    );
    let fw = framework();
    let mut r = fw.schedule(
        &p,
        &c,
        crate::scheduler::framework::runtime::Scope::Everything,
    );
    fw.reserve(&mut r.state, &p, "n1", &c).unwrap();
    let m = fw.pre_bind(&r.state, &p, "n1").unwrap().unwrap();
    let ann = m.metadata.annotations.unwrap();
    assert!(!ann.contains_key(ANNOTATION_RESOURCE_STATUS), "{ann:?}");
    let devices: Value =
        serde_json::from_str(&ann["scheduling.koordinator.sh/device-allocated"]).unwrap();
    assert_eq!(devices["gpu"][0]["minor"], 0);
}
