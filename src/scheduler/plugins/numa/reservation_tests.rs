//! Reserved CPUs (Koordinator's NodeNUMAResource reservation restore): a Reservation
//! scheduled as an LSR pod holds a cpuset, written on the Reservation; its owners are
//! pinned inside it (only inside it when it is Restricted), everyone else outside it.

use super::*;

fn web_reservation(policy: &str) -> Arc<crate::api::scheduling::reservation::Reservation> {
    let status = json!({"cpuset": "4-7"}).to_string();
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "r1", "uid": "u-r1",
            "annotations": {ANNOTATION_RESOURCE_STATUS: status}},
        "spec": {"allocatePolicy": policy, "allocateOnce": false,
            "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
            "template": {"metadata": {"labels": {"koordinator.sh/qosClass": "LSR"}},
                "spec": {"priority": 9500, "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}},
        "status": {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "4"}}}))
        .unwrap(),
    )
}

fn lsr_app(name: &str, cpu: &str, app: &str) -> crate::scheduler::framework::PodInfo {
    pod(
        json!({"metadata": {"name": name, "namespace": "d", "uid": name,
        "labels": {"koordinator.sh/qosClass": "LSR", "app": app}},
        "spec": {"priority": 9500, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}),
    )
}

/// The cpuset the default profile gives `p` on n1.
fn cpuset_of(c: &ClusterState, p: &crate::scheduler::framework::PodInfo) -> BTreeSet<u32> {
    let ann = bound_on_n1(c, p);
    let status: Value = serde_json::from_str(&ann[ANNOTATION_RESOURCE_STATUS]).unwrap();
    set(status["cpuset"].as_str().unwrap())
}

fn one_node() -> ClusterState {
    let mut c = cluster(vec![node_json("n1", "8", "32Gi")]);
    let nrt: crate::api::topology::NodeResourceTopology =
        serde_json::from_value(nrt("n1", &entries(1, 1, 4, 2), json!({}))).unwrap();
    c.upsert_topology(&nrt);
    c
}

#[test]
fn owners_are_pinned_inside_the_reservation_and_others_outside() {
    let mut c = one_node();
    c.upsert_reservation(web_reservation("Aligned"));
    assert!(cpuset_of(&c, &lsr_app("web-1", "2", "web")).is_subset(&set("4-7")));
    assert!(cpuset_of(&c, &lsr_app("batch-1", "2", "batch")).is_subset(&set("0-3")));
}

#[test]
fn a_restricted_reservation_gives_its_owners_only_its_free_cpus() {
    let mut c = one_node();
    c.upsert_reservation(web_reservation("Restricted"));
    // An owner already holds 4-5.
    let held = json!({"cpuset": "4-5"}).to_string();
    let alloc = json!({"name": "r1", "uid": "u-r1"}).to_string();
    c.upsert_pod(Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": "web-0", "namespace": "d", "uid": "web-0",
            "labels": {"koordinator.sh/qosClass": "LSR", "app": "web"},
            "annotations": {ANNOTATION_RESOURCE_STATUS: held,
                "scheduling.koordinator.sh/reservation-allocated": alloc}},
            "spec": {"nodeName": "n1", "priority": 9500, "containers": [{"name": "c",
                "resources": {"requests": {"cpu": "2"}}}]}}),
        )
        .unwrap(),
    ));
    assert_eq!(cpuset_of(&c, &lsr_app("web-1", "2", "web")), set("6-7"));
}

#[test]
fn a_reservation_scheduled_as_an_lsr_pod_records_its_cpuset() {
    let mut c = one_node();
    let mut r = (*web_reservation("Aligned")).clone();
    r.metadata.annotations = None;
    r.status = None;
    c.upsert_reservation(Arc::new(r));
    let pending = c.reservations["r1"].object.clone();
    let p = crate::scheduler::reservation_live::pending_pod(&pending).unwrap();
    let attempt = crate::scheduler::cycle::run(
        &framework(),
        &p,
        &mut c,
        crate::scheduler::framework::runtime::Scope::Everything,
    );
    assert_eq!(attempt.node(), Some("n1"));
    let placed = &c.reservations["r1"].object;
    let ann = placed.metadata.annotations.clone().unwrap();
    let status: Value = serde_json::from_str(&ann[ANNOTATION_RESOURCE_STATUS]).unwrap();
    assert_eq!(set(status["cpuset"].as_str().unwrap()).len(), 4);
}
