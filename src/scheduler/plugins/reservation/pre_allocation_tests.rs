//! Reservation pre-allocation, after Koordinator's `Test_filterWithPreAllocatablePods`,
//! `TestPreAllocation*` (modes Default and Cluster, one pod or several) on a 32-CPU node.

use std::sync::Arc;

use serde_json::{Value, json};

use super::pre_allocation::*;
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::framework::{ClusterState, Code};
use crate::scheduler::test_util::{cluster, node_json};

fn framework(args: Value) -> Framework {
    let mut cfg = crate::scheduler::config::default_config().unwrap();
    cfg.profiles[0].args.insert("Reservation".into(), args);
    crate::scheduler::config::framework(&cfg.profiles[0]).unwrap()
}

/// A pending Restricted pre-allocating Reservation of `cpu` CPUs for pods labelled
/// `test-reservation: "true"`.
fn reservation(cpu: &str, extra: Value) -> Arc<crate::api::scheduling::reservation::Reservation> {
    let mut v = json!({"metadata": {"name": "test-pre-allocation-reservation", "uid": "r-uid"},
        "spec": {"preAllocation": true, "allocatePolicy": "Restricted", "allocateOnce": false,
            "owners": [{"labelSelector": {"matchLabels": {"test-reservation": "true"}}}],
            "template": {"spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c",
                "resources": {"requests": {"cpu": cpu, "memory": "4Gi"}}}]}}},
        "status": {"phase": "Pending"}});
    json_patch::merge(&mut v, &extra);
    Arc::new(serde_json::from_value(v).unwrap())
}

/// A running pod on `node` of `cpu` CPUs.
fn running(
    name: &str,
    node: &str,
    cpu: &str,
    labels: Value,
    ann: Value,
) -> Arc<k8s_openapi::api::core::v1::Pod> {
    Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "default", "uid": name,
            "labels": labels, "annotations": ann},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {
                "cpu": cpu, "memory": "1Gi"}}}]}, "status": {"phase": "Running"}}),
        )
        .unwrap(),
    )
}

fn owner() -> Value {
    json!({"test-reservation": "true"})
}

/// One 32-CPU node wholly used, `pods` among what uses it.
fn full_node(pods: Vec<Arc<k8s_openapi::api::core::v1::Pod>>) -> ClusterState {
    let mut c = cluster(vec![node_json("test-node", "32", "64Gi")]);
    let used: i64 = 32
        - pods
            .iter()
            .map(|p| {
                let r = &p.spec.as_ref().unwrap().containers[0].resources;
                let q = &r.as_ref().unwrap().requests.as_ref().unwrap()["cpu"];
                q.0.parse::<i64>().unwrap()
            })
            .sum::<i64>();
    c.upsert_pod(running(
        "filler",
        "test-node",
        &used.to_string(),
        json!({}),
        json!({}),
    ));
    for p in pods {
        c.upsert_pod(p);
    }
    c
}

/// One cycle of the reservation's reserve pod, nothing assumed.
fn schedule(fw: &Framework, c: &ClusterState) -> crate::scheduler::framework::runtime::CycleResult {
    let r = c.reservations["test-pre-allocation-reservation"]
        .object
        .clone();
    let p = crate::scheduler::reservation_live::pending_pod(&r).unwrap();
    fw.schedule(&p, c, Scope::Everything)
}

/// (node, pods taken over) for the reservation's reserve pod, or the node's reason.
fn place(fw: &Framework, c: &mut ClusterState) -> Result<(String, Vec<String>), String> {
    let r = c.reservations["test-pre-allocation-reservation"]
        .object
        .clone();
    let p = crate::scheduler::reservation_live::pending_pod(&r).unwrap();
    let attempt = crate::scheduler::cycle::run(fw, &p, c, Scope::Everything);
    let result = attempt.result.as_ref().unwrap();
    match &attempt.outcome {
        crate::scheduler::cycle::Outcome::Reservation {
            node,
            pre_allocated,
            ..
        } => Ok((
            node.clone(),
            pre_allocated.iter().map(|p| p.name.clone()).collect(),
        )),
        other => Err(result
            .verdicts
            .get("test-node")
            .map(|v| v.reason.to_string())
            .unwrap_or_else(|| format!("{other:?}"))),
    }
}

#[test]
fn filter_with_pre_allocation_pods() {
    let fw = framework(json!({}));
    let mut c = full_node(vec![running("pa-1", "test-node", "4", owner(), json!({}))]);
    c.upsert_reservation(reservation("4", json!({})));
    assert_eq!(
        place(&fw, &mut c),
        Ok(("test-node".into(), vec!["pa-1".into()]))
    );
    // Assumed: the pod is the reservation's owner, so its CPUs are counted once.
    let r = &c.reservations["test-pre-allocation-reservation"];
    assert_eq!(r.allocated.len(), 1);
    assert_eq!(
        r.remaining().get("cpu"),
        Some(&0),
        "{:?} {:?}",
        r.allocatable,
        r.allocated
    );
    let node = c.node("test-node").unwrap();
    assert_eq!(
        node.req.get(crate::scheduler::framework::res::R_CPU),
        32_000
    );
}

#[test]
fn filter_with_pre_allocation_not_required_without_pre_allocatable_pods() {
    let fw = framework(json!({}));
    let mut c = cluster(vec![node_json("test-node", "32", "64Gi")]);
    c.upsert_reservation(reservation("4", json!({})));
    assert_eq!(place(&fw, &mut c), Ok(("test-node".into(), vec![])));
}

#[test]
fn failed_to_filter_with_pre_allocation_not_required_with_pre_allocatable_pods() {
    let fw = framework(json!({}));
    // The only owner asks more than the reservation holds: not taken, and the node is full.
    let mut c = full_node(vec![running("pa-1", "test-node", "8", owner(), json!({}))]);
    c.upsert_reservation(reservation("6", json!({})));
    assert_eq!(place(&fw, &mut c), Err("Insufficient cpu by node".into()));
}

#[test]
fn failed_to_filter_with_pre_allocation_required() {
    let fw = framework(json!({}));
    let required = json!({"metadata": {"labels": {LABEL_REQUIRED: "true"}}});
    // No owner anywhere: refused at PreFilter.
    let mut c = cluster(vec![node_json("test-node", "32", "64Gi")]);
    c.upsert_reservation(reservation("4", required.clone()));
    let s = schedule(&fw, &c);
    assert_eq!(s.node, None);
    assert_eq!(s.pre_filter_msg.as_deref(), Some(ERR_REQUIRED));
    // An owner that does not fit the reservation: the node says why.
    let mut c = cluster(vec![node_json("test-node", "32", "64Gi")]);
    c.upsert_pod(running("pa-1", "test-node", "8", owner(), json!({})));
    c.upsert_reservation(reservation("4", required));
    assert_eq!(
        place(&fw, &mut c),
        Err("Reservation(s) Insufficient cpu".into())
    );
}

#[test]
fn only_restricted_reservations_pre_allocate() {
    let fw = framework(json!({}));
    let mut c = full_node(vec![running("pa-1", "test-node", "4", owner(), json!({}))]);
    c.upsert_reservation(reservation(
        "4",
        json!({"spec": {"allocatePolicy": "Aligned"}}),
    ));
    let s = schedule(&fw, &c);
    assert_eq!(s.node, None);
    assert_eq!(s.pre_filter_msg.as_deref(), Some(ERR_UNSUPPORTED));
    let v = &s.verdicts["test-node"];
    assert_eq!(
        (v.plugin, v.code),
        (Some("Reservation"), Code::UnschedulableAndUnresolvable)
    );
}

#[test]
fn pre_allocation_cluster_mode_multiple_enabled() {
    let cluster_mode =
        json!({"spec": {"preAllocationPolicy": {"mode": "Cluster", "enableMultiple": true}}});
    let label = json!({LABEL_PRE_ALLOCATABLE: "true"});
    let prio = |p: &str| json!({ANNOTATION_PRIORITY: p});
    let pods = || {
        vec![
            running("low", "test-node", "2", label.clone(), prio("1")),
            running("high", "test-node", "2", label.clone(), prio("9")),
            running("mid", "test-node", "2", label.clone(), prio("5")),
        ]
    };
    // Cluster mode must be enabled in ReservationArgs.
    let off = framework(json!({}));
    let mut c = full_node(pods());
    c.upsert_reservation(reservation("4", cluster_mode.clone()));
    let s = schedule(&off, &c);
    assert_eq!(s.pre_filter_msg.as_deref(), Some(ERR_CLUSTER_MODE_DISABLED));
    // Enabled: the two highest-priority pods make room for four CPUs.
    let on = framework(json!({"preAllocationConfig": {"enableClusterMode": true}}));
    let mut c = full_node(pods());
    c.upsert_reservation(reservation("4", cluster_mode));
    assert_eq!(
        place(&on, &mut c),
        Ok(("test-node".into(), vec!["high".into(), "mid".into()]))
    );
}

#[test]
fn pre_allocation_default_mode_multiple_disabled_takes_the_best_filling_pod() {
    let fw = framework(json!({}));
    let mut c = full_node(vec![
        running("pa-2", "test-node", "2", owner(), json!({})),
        running("pa-4", "test-node", "4", owner(), json!({})),
    ]);
    c.upsert_reservation(reservation("4", json!({})));
    assert_eq!(
        place(&fw, &mut c),
        Ok(("test-node".into(), vec!["pa-4".into()]))
    );
}

#[test]
fn prefer_no_pre_allocated_pods_when_the_node_has_room() {
    let fw = framework(json!({"preAllocationConfig": {"preferNoPreAllocatedPods": true}}));
    let mut c = cluster(vec![node_json("test-node", "32", "64Gi")]);
    c.upsert_pod(running("pa-1", "test-node", "4", owner(), json!({})));
    c.upsert_reservation(reservation("4", json!({})));
    assert_eq!(place(&fw, &mut c), Ok(("test-node".into(), vec![])));
    let fw = framework(json!({}));
    let mut c = cluster(vec![node_json("test-node", "32", "64Gi")]);
    c.upsert_pod(running("pa-1", "test-node", "4", owner(), json!({})));
    c.upsert_reservation(reservation("4", json!({})));
    assert_eq!(
        place(&fw, &mut c),
        Ok(("test-node".into(), vec!["pa-1".into()]))
    );
}
