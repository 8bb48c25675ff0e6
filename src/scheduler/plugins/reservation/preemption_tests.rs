//! Reservation preemption (`ReservationArgs.enablePreemption`, Koordinator's
//! `PreemptionMgr`): a pending Reservation that fits nowhere evicts lower-priority pods,
//! never one labelled `scheduling.koordinator.sh/disable-preemptible: "true"`; without the
//! arg it waits.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::scheduler::cycle::Outcome;
use crate::scheduler::framework::ClusterState;
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::test_util::{cluster, node_json};

fn framework(args: Value) -> Framework {
    let mut cfg = crate::scheduler::config::default_config().unwrap();
    cfg.profiles[0].args.insert("Reservation".into(), args);
    crate::scheduler::config::framework(&cfg.profiles[0]).unwrap()
}

fn running(name: &str, cpu: &str, labels: Value) -> Arc<k8s_openapi::api::core::v1::Pod> {
    Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "default", "uid": name,
            "labels": labels},
            "spec": {"nodeName": "n1", "priority": 100, "containers": [{"name": "c",
                "resources": {"requests": {"cpu": cpu}}}]}, "status": {"phase": "Running"}}),
        )
        .unwrap(),
    )
}

/// n1 (8 CPUs) full: a protected 4-CPU pod and two 2-CPU pods; a pending 4-CPU Reservation.
fn full() -> ClusterState {
    let mut c = cluster(vec![node_json("n1", "8", "32Gi")]);
    let protected = json!({"scheduling.koordinator.sh/disable-preemptible": "true"});
    c.upsert_pod(running("keep", "4", protected));
    c.upsert_pod(running("a", "2", json!({})));
    c.upsert_pod(running("b", "2", json!({})));
    let r = json!({"metadata": {"name": "r1", "uid": "u-r1"},
        "spec": {"owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
            "template": {"spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c",
                "resources": {"requests": {"cpu": "4"}}}]}}}});
    c.upsert_reservation(Arc::new(serde_json::from_value(r).unwrap()));
    c
}

fn attempt(fw: &Framework, c: &mut ClusterState) -> Outcome {
    let r = c.reservations["r1"].object.clone();
    let p = crate::scheduler::reservation_live::pending_pod(&r).unwrap();
    crate::scheduler::cycle::run(fw, &p, c, Scope::Everything).outcome
}

#[test]
fn a_pending_reservation_preempts_lower_priority_pods_but_not_protected_ones() {
    let mut c = full();
    let Outcome::Unschedulable { nomination, .. } =
        attempt(&framework(json!({"enablePreemption": true})), &mut c)
    else {
        panic!("the node is full");
    };
    let n = nomination.expect("a nomination");
    assert_eq!(n.node, "n1");
    let mut victims: Vec<&str> = n.victims.iter().map(|v| v.name.as_str()).collect();
    victims.sort();
    assert_eq!(victims, ["a", "b"], "keep is not preemptible");
    // Nominated: the reserve pod holds n1 while its victims leave.
    assert!(c.nominated.node_of("Reservation/r1").is_some());
}

#[test]
fn without_enable_preemption_a_reservation_waits() {
    let mut c = full();
    let Outcome::Unschedulable { nomination, .. } = attempt(&framework(json!({})), &mut c) else {
        panic!("the node is full");
    };
    assert!(nomination.is_none());
}
