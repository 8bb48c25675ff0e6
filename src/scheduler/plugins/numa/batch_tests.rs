//! NUMA-bound batch pods: fitted per NUMA node against the zones' `batch-cpu` and
//! `batch-memory` (the manager's NUMA-level batch resources), as Koordinator's
//! NodeNUMAResource does with every resource of a zone.

use super::*;

/// Two NUMA nodes of four CPUs; batch-cpu 3000 on node 0 and 4000 on node 1 when `batch`.
fn node_and_nrt(batch: bool) -> ClusterState {
    let mut c = cluster(vec![json!({
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1",
            LABEL_NODE_NUMA_TOPOLOGY_POLICY: "SingleNUMANode"}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110",
            "kubernetes.io/batch-cpu": "7000", "kubernetes.io/batch-memory": "16Gi"}}})]);
    let mut raw = nrt("n1", &entries(1, 2, 2, 2), json!({}));
    if batch {
        for (zone, cpu) in raw["zones"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .zip(["3000", "4000"])
        {
            let list = zone["resources"].as_array_mut().unwrap();
            list.push(json!({"name": "kubernetes.io/batch-cpu", "capacity": cpu,
                "allocatable": cpu, "available": cpu}));
            list.push(
                json!({"name": "kubernetes.io/batch-memory", "capacity": "8Gi",
                "allocatable": "8Gi", "available": "8Gi"}),
            );
        }
    }
    c.upsert_topology(&serde_json::from_value(raw).unwrap());
    c
}

fn be(name: &str, batch_cpu: &str) -> crate::scheduler::framework::PodInfo {
    pod(
        json!({"metadata": {"name": name, "namespace": "d", "uid": name,
            "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {"priority": 5000, "containers": [{"name": "c", "resources": {"requests": {
            "kubernetes.io/batch-cpu": batch_cpu, "kubernetes.io/batch-memory": "1Gi"}}}]}}),
    )
}

/// The pod's `numaNodeResources` once placed on n1 (and assumed there).
fn place(c: &mut ClusterState, p: &crate::scheduler::framework::PodInfo) -> Value {
    let ann = bound_on_n1(c, p);
    let status: Value = serde_json::from_str(&ann[ANNOTATION_RESOURCE_STATUS]).unwrap();
    let mut placed = p.pod.as_ref().clone();
    placed.metadata.annotations = Some(ann);
    c.assume(
        &crate::scheduler::framework::PodInfo::new(Arc::new(placed)),
        "n1",
    );
    status["numaNodeResources"].clone()
}

#[test]
fn numa_bound_batch_pods_fit_per_numa_node_against_the_zones_batch_resources() {
    let mut c = node_and_nrt(true);
    let o = c.topology("n1").unwrap();
    assert_eq!(o.numa[&0].0, [4000, 16 << 30, 3000, 8 << 30]);
    // 3.5 batch cores fit NUMA node 1 only.
    assert_eq!(
        place(&mut c, &be("a", "3500")),
        json!([{"node": 1, "resources": {
            "kubernetes.io/batch-cpu": "3500", "kubernetes.io/batch-memory": "1073741824"}}])
    );
    // Node 1 has 500 left: the next goes to node 0, as the first pod's status is counted.
    assert_eq!(
        place(&mut c, &be("b", "1000"))[0]["node"],
        json!(0),
        "a placed pod's NUMA batch-cpu counts against its NUMA node"
    );
    // 2000 left on node 0, 500 on node 1: 2.5 cores fit neither alone.
    let r = framework().schedule(
        &be("c", "2500"),
        &c,
        crate::scheduler::framework::runtime::Scope::Everything,
    );
    assert_eq!(r.node, None);
    assert!(
        r.verdicts["n1"].reason.contains("kubernetes.io/batch-cpu"),
        "{:?}",
        r.verdicts["n1"]
    );
}

#[test]
fn zones_without_batch_resources_do_not_align_them() {
    let mut c = node_and_nrt(false);
    assert_eq!(
        c.topology("n1").unwrap().numa_listed,
        [true, true, false, false]
    );
    let status = place(&mut c, &be("a", "3500"));
    assert!(status.is_null(), "nothing to place per NUMA node: {status}");
}
