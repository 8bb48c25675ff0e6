use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::test_util::{cluster, node_json, pod};

fn framework() -> Framework {
    let cfg = crate::scheduler::config::default_config().unwrap();
    crate::scheduler::config::framework(&cfg.profiles[0]).unwrap()
}

fn reservation(
    name: &str,
    node: &str,
    extra: Value,
) -> Arc<crate::api::scheduling::reservation::Reservation> {
    let mut v = json!({"metadata": {"name": name, "uid": format!("u-{name}")},
        "spec": {"owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}},
        "status": {"phase": "Available", "nodeName": node, "allocatable": {"cpu": "4"}}});
    json_patch::merge(&mut v, &extra);
    Arc::new(serde_json::from_value(v).unwrap())
}

fn cpu_pod(name: &str, cpu: &str, app: &str) -> crate::scheduler::framework::PodInfo {
    pod(
        json!({"metadata": {"name": name, "namespace": "d", "uid": name, "labels": {"app": app}},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}),
    )
}

#[test]
fn owners_use_reserved_capacity_and_others_cannot() {
    let fw = framework();
    let mut c = cluster(vec![
        node_json("n1", "8", "32Gi"),
        node_json("n2", "8", "32Gi"),
    ]);
    c.upsert_reservation(reservation("r1", "n1", json!({})));

    // An owner goes to its reservation's node, and says so at PreBind.
    let owner = cpu_pod("web-1", "3", "web");
    let mut r = fw.schedule(&owner, &c, Scope::Everything);
    assert_eq!(r.node.as_deref(), Some("n1"), "{:?}", r.verdicts);
    assert_eq!(r.verdicts["n1"].scores[NAME], 100);
    fw.reserve(&mut r.state, &owner, "n1", &c).unwrap();
    let m = fw.pre_bind(&r.state, &owner, "n1").unwrap().unwrap();
    let ann = m.metadata.annotations.clone().unwrap();
    assert_eq!(
        ann[ANNOTATION_RESERVATION_ALLOCATED],
        r#"{"name":"r1","uid":"u-r1"}"#
    );

    // On n1 alone: a non-owner asking more than what is left outside the reservation stays
    // pending; an owner asking the same fits on the reserved capacity.
    let mut one = cluster(vec![node_json("n1", "8", "32Gi")]);
    one.upsert_reservation(reservation("r1", "n1", json!({})));
    let other = cpu_pod("batch", "6", "batch");
    let r = fw.schedule(&other, &one, Scope::Everything);
    assert_eq!(r.node, None);
    assert_eq!(r.verdicts["n1"].reason, "Insufficient cpu");
    let big_owner = cpu_pod("web-2", "6", "web");
    assert_eq!(
        fw.schedule(&big_owner, &one, Scope::Everything)
            .node
            .as_deref(),
        Some("n1")
    );

    // Once the owner is placed, allocateOnce keeps others out and the capacity is counted once.
    one.assume(
        &crate::scheduler::framework::PodInfo::new(Arc::new(m)),
        "n1",
    );
    assert_eq!(
        one.nodes[0]
            .req
            .get(crate::scheduler::framework::res::R_CPU),
        4000
    );
    assert!(!one.reservations["r1"].matchable());
}

#[test]
fn affinity_and_restricted_policy() {
    let fw = framework();
    let mut c = cluster(vec![
        node_json("n1", "8", "32Gi"),
        node_json("n2", "8", "32Gi"),
    ]);
    c.upsert_reservation(reservation(
        "r1",
        "n1",
        json!({"spec": {"allocatePolicy": "Restricted", "allocateOnce": false}}),
    ));
    let mut aff = cpu_pod("web-1", "5", "web");
    let mut p = (*aff.pod).clone();
    p.metadata.annotations = Some(
        [(
            "scheduling.koordinator.sh/reservation-affinity".to_string(),
            r#"{"name":"r1"}"#.to_string(),
        )]
        .into(),
    );
    aff = crate::scheduler::framework::PodInfo::new(Arc::new(p));
    let r = fw.schedule(&aff, &c, Scope::Everything);
    assert_eq!(
        r.node, None,
        "5 CPUs do not fit a Restricted 4-CPU reservation"
    );
    // Koordinator's fitsReservation, detailed as the pod names the reservation.
    assert_eq!(
        r.verdicts["n1"].reason,
        "Reservation(s) Insufficient cpu, requested: 5000, used: 0, capacity: 4000"
    );
    assert_eq!(
        r.verdicts["n2"].reason,
        "node(s) didn't satisfy plugin(s) PreFilter result"
    );
    let mut none = (*aff.pod).clone();
    none.metadata.annotations = Some(
        [(
            "scheduling.koordinator.sh/reservation-affinity".to_string(),
            r#"{"name":"nope"}"#.to_string(),
        )]
        .into(),
    );
    let r = fw.schedule(
        &crate::scheduler::framework::PodInfo::new(Arc::new(none)),
        &c,
        Scope::Everything,
    );
    assert_eq!(r.verdicts["n2"].reason, ERR_AFFINITY);
}

#[test]
fn reservations_of_different_allocate_policies_do_not_share_a_node() {
    let fw = framework();
    let mut c = cluster(vec![
        node_json("n1", "8", "32Gi"),
        node_json("n2", "8", "32Gi"),
    ]);
    c.upsert_reservation(reservation(
        "aligned",
        "n1",
        json!({"spec": {"allocatePolicy": "Aligned"}}),
    ));
    let pending = reservation(
        "new",
        "",
        json!({"spec": {"template": {"spec": {"schedulerName": "koord-scheduler",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}, "status": null}),
    );
    c.upsert_reservation(pending.clone());
    let p = crate::scheduler::reservation_live::pending_pod(&pending).unwrap();
    let r = fw.schedule(&p, &c, Scope::Everything);
    assert_eq!(r.node.as_deref(), Some("n2"), "{:?}", r.verdicts);
    assert_eq!(r.verdicts["n1"].reason, ERR_POLICY_CONFLICT);
}

#[test]
fn preemption_cannot_take_reserved_capacity() {
    let fw = framework();
    let mut c = cluster(vec![node_json("n1", "8", "32Gi")]);
    c.upsert_reservation(reservation("r1", "n1", json!({})));
    let low = json!({"metadata": {"name": "low", "namespace": "d"},
        "spec": {"nodeName": "n1", "priority": 0, "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}});
    c.upsert_pod(Arc::new(serde_json::from_value(low).unwrap()));
    let urgent = |name: &str, cpu: &str, app: &str| {
        pod(
            json!({"metadata": {"name": name, "namespace": "d", "labels": {"app": app}},
            "spec": {"schedulerName": "koord-scheduler", "priority": 100000,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}),
        )
    };
    // Evicting `low` frees 4 CPUs; the 4 reserved stay reserved for a non-owner.
    let other = urgent("other", "6", "batch");
    let r = fw.schedule(&other, &c, Scope::Everything);
    assert_eq!(r.node, None);
    assert!(
        fw.post_filter(&r, &other, &c).is_none(),
        "the reserve pod is no victim"
    );
    // An owner may use both: preempting `low` and the reservation's 4 CPUs.
    let owner = urgent("web", "6", "web");
    let r = fw.schedule(&owner, &c, Scope::Everything);
    let n = fw.post_filter(&r, &owner, &c).expect("nominated");
    assert_eq!(
        n.victims.iter().map(|v| v.key.as_str()).collect::<Vec<_>>(),
        ["d/low"]
    );
}
