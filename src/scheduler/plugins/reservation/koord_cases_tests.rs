//! Koordinator's Reservation plugin cases (plugin_test.go: Test_filterWithReservations,
//! TestFilter's reserve-pod node check, TestScore / scoring_test.go's order preference),
//! rebuilt on a cluster state that gives the same numbers: a 32-CPU node whose other pods
//! and reservations request 30 CPUs.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::test_util::{cluster, node_json, pod};

fn framework() -> Framework {
    let cfg = crate::scheduler::config::default_config().unwrap();
    crate::scheduler::config::framework(&cfg.profiles[0]).unwrap()
}

fn reservation(name: &str, node: &str, policy: &str, allocatable: Value, extra: Value) -> Value {
    let mut v = json!({"metadata": {"name": name, "uid": format!("u-{name}"), "labels": {"r": name}},
        "spec": {"allocatePolicy": policy, "allocateOnce": false,
            "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": allocatable.clone()}}]}}},
        "status": {"phase": "Available", "nodeName": node, "allocatable": allocatable}});
    json_patch::merge(&mut v, &extra);
    v
}

/// A pod of app=web asking `cpu` (and 8 Gi), required to use reservation `r` when
/// `affinity` (by selector, so reasons are not detailed).
fn owner(name: &str, cpu: &str, affinity: bool) -> crate::scheduler::framework::PodInfo {
    let mut p = json!({"metadata": {"name": name, "namespace": "d", "uid": name, "labels": {"app": "web"}},
        "spec": {"schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "8Gi"}}}]}});
    if affinity {
        p["metadata"]["annotations"] = json!({"scheduling.koordinator.sh/reservation-affinity":
            r#"{"reservationSelector": {"r": "test-r"}}"#});
    }
    pod(p)
}

fn placed(c: &mut ClusterState, name: &str, cpu: &str, extra: Value) {
    let mut p = json!({"metadata": {"name": name, "namespace": "d", "uid": name},
        "spec": {"nodeName": "test-node", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}});
    json_patch::merge(&mut p, &extra);
    c.upsert_pod(Arc::new(serde_json::from_value(p).unwrap()));
}

/// `test-node` (32 CPUs, 32 Gi, 100 pods) with reservation `r` and other pods requesting
/// `others` CPUs.
fn node_with(r: Value, others: &str) -> ClusterState {
    let mut c = cluster(vec![node_json("test-node", "32", "32Gi")]);
    c.nodes[0]
        .alloc
        .set(crate::scheduler::framework::res::R_PODS, 100);
    c.upsert_reservation(Arc::new(serde_json::from_value(r).unwrap()));
    placed(&mut c, "others", others, json!({}));
    c
}

/// The Reservation plugin's own Filter on `test-node` (as Koordinator's table calls
/// `filterWithReservations`): its reasons, or "ok".
fn reason_on(c: &ClusterState, p: &crate::scheduler::framework::PodInfo) -> String {
    reason_with(&ReservationPlugin::default(), c, p)
}

fn reason_with(
    pl: &dyn Plugin,
    c: &ClusterState,
    p: &crate::scheduler::framework::PodInfo,
) -> String {
    let mut state = CycleState::default();
    let (pre, _) = pl.pre_filter(&mut state, p, c);
    assert!(pre.is_success(), "{pre:?}");
    let s = pl.filter(&state, p, &c.nodes[0], c);
    if s.is_success() {
        "ok".into()
    } else {
        s.message()
    }
}

#[test]
fn filter_with_reservations() {
    let six = json!({"cpu": "6"});
    let aligned = |others| {
        node_with(
            reservation("test-r", "test-node", "Aligned", six.clone(), json!({})),
            others,
        )
    };
    let restricted = |others| {
        node_with(
            reservation("test-r", "test-node", "Restricted", six.clone(), json!({})),
            others,
        )
    };
    // (case, cluster, pod, want)
    let cases: Vec<(
        &str,
        ClusterState,
        crate::scheduler::framework::PodInfo,
        &str,
    )> = vec![
        (
            "filter aligned reservation with nodeInfo",
            aligned("24"),
            owner("p", "8", true),
            "ok",
        ),
        (
            "failed to filter aligned reservation with nodeInfo",
            aligned("26"),
            owner("p", "8", true),
            "Insufficient cpu by node",
        ),
        (
            "filter restricted reservation with nodeInfo",
            restricted("24"),
            owner("p", "6", false),
            "ok",
        ),
        (
            "filter restricted reservation with affinity",
            restricted("24"),
            owner("p", "6", true),
            "ok",
        ),
        (
            "failed to filter restricted reservation with nodeInfo",
            restricted("24"),
            owner("p", "8", true),
            "Reservation(s) Insufficient cpu",
        ),
    ];
    for (name, c, p, want) in cases {
        assert_eq!(reason_on(&c, &p), want, "{name}");
    }
}

#[test]
fn restricted_reservation_counts_pods_and_holds_back_its_reserved_annotation() {
    // testRInfo: 7 CPUs and 2 pods, 1 CPU held back (node.koordinator.sh/reservation), two
    // owners of 1 CPU each already in it.
    let r = reservation(
        "test-r",
        "test-node",
        "Restricted",
        json!({"cpu": "7", "pods": "2"}),
        json!({"metadata": {"annotations": {"node.koordinator.sh/reservation": r#"{"resources": {"cpu": "1"}}"#}}}),
    );
    let mut c = node_with(r, "23");
    let allocated = json!({"metadata": {"labels": {"app": "web"}, "annotations": {
        "scheduling.koordinator.sh/reservation-allocated": r#"{"name":"test-r","uid":"u-test-r"}"#}}});
    placed(&mut c, "test-pod-a", "1", allocated.clone());
    placed(&mut c, "test-pod-b", "1", allocated);
    assert_eq!(
        reason_on(&c, &owner("p", "3", true)),
        "Reservation(s) Too many pods",
        "failed to filter restricted reservation since exceeding max pods"
    );
    let info = &c.reservations["test-r"];
    assert_eq!(info.available()["cpu"], 4000, "7 − 1 held back − 2 used");
    assert_eq!(
        info.insufficient(&owner("p", "5", true).requests, false, &Default::default()),
        [
            "Reservation(s) Too many pods",
            "Reservation(s) Insufficient cpu"
        ]
    );
}

#[test]
fn a_pod_sharing_no_resource_with_a_reservation_is_not_placed_into_it() {
    let gpu = reservation(
        "test-r",
        "test-node",
        "Default",
        json!({"nvidia.com/gpu": "1"}),
        json!({}),
    );
    let c = node_with(gpu, "2");
    let fw = framework();
    let p = owner("p", "1", false);
    let mut r = fw.schedule(&p, &c, Scope::Everything);
    assert_eq!(r.node.as_deref(), Some("test-node"));
    fw.reserve(&mut r.state, &p, "test-node", &c).unwrap();
    assert_eq!(
        chosen(&r.state),
        None,
        "asks no GPU: not nominated into the GPU reservation"
    );
}

#[test]
fn reserve_pods_elsewhere_fail_at_filter() {
    let fw = framework();
    let mut c = cluster(vec![
        node_json("n1", "8", "32Gi"),
        node_json("n2", "8", "32Gi"),
    ]);
    let pending: Arc<crate::api::scheduling::reservation::Reservation> = Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "pinned", "uid": "u-pinned"},
            "spec": {"owners": [{"object": {"name": "x"}}], "template": {"spec": {"nodeName": "n2",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}}))
        .unwrap(),
    );
    c.upsert_reservation(pending.clone());
    let p = crate::scheduler::reservation_live::pending_pod(&pending).unwrap();
    let r = fw.schedule(&p, &c, Scope::Everything);
    assert_eq!(r.node.as_deref(), Some("n2"));
    assert_eq!(r.verdicts["n1"].plugin, Some(NAME));
    assert_eq!(r.verdicts["n1"].reason, ERR_NODE_NOT_MATCH);
}

#[test]
fn scores_follow_koordinator() {
    let fw = framework();
    let mut c = cluster(vec![
        node_json("n1", "8", "32Gi"),
        node_json("n2", "8", "32Gi"),
        node_json("n3", "8", "32Gi"),
    ]);
    for (name, node, order) in [
        ("r1", "n1", None),
        ("r2", "n2", Some("2")),
        ("r3", "n3", Some("1")),
    ] {
        let mut r = reservation(name, node, "Default", json!({"cpu": "4"}), json!({}));
        if let Some(o) = order {
            r["metadata"]["labels"]["scheduling.koordinator.sh/reservation-order"] = o.into();
        }
        c.upsert_reservation(Arc::new(serde_json::from_value(r).unwrap()));
    }
    let p = owner("p", "1", false);
    let r = fw.schedule(&p, &c, Scope::Everything);
    // The node holding the lowest order scores 1000 (100 normalized); the others keep
    // their reservation's fit (1 of 4 CPUs: 25; memory is not reserved) scaled by 1000.
    assert_eq!(r.node.as_deref(), Some("n3"));
    let score = |n: &str| r.verdicts[n].scores[NAME];
    assert_eq!((score("n1"), score("n2"), score("n3")), (2, 2, 100));
    // A tiny request scores 0, not 1.
    let mut one = cluster(vec![
        node_json("n1", "8", "32Gi"),
        node_json("n2", "8", "32Gi"),
    ]);
    one.upsert_reservation(Arc::new(
        serde_json::from_value(reservation(
            "r1",
            "n1",
            "Default",
            json!({"cpu": "4"}),
            json!({}),
        ))
        .unwrap(),
    ));
    let tiny = owner("tiny", "10m", false);
    let r = fw.schedule(&tiny, &one, Scope::Everything);
    assert_eq!(
        r.verdicts["n1"].scores[NAME], 0,
        "100 × 10 / 4000 rounds down to 0"
    );
}

/// `TestScoreWithOrder`: four nodes, each with a reservation of 4 CPUs and 8 Gi the pod
/// fills exactly; test-node-4's carries `reservation-order: 123456`. Koordinator scores
/// test-node-4 `mostPreferredScore` (1000) and the others `MaxNodeScore` (100), which
/// normalize to 100 and 10; the pod goes to test-node-4.
#[test]
fn score_with_order() {
    let fw = framework();
    let nodes = (1..=4).map(|i| node_json(&format!("test-node-{i}"), "32", "64Gi"));
    let mut c = cluster(nodes.collect());
    let fill = json!({"cpu": "4", "memory": "8Gi"});
    for i in 1..=4 {
        let mut r = reservation(
            &format!("test-reservation-{i}"),
            &format!("test-node-{i}"),
            "Default",
            fill.clone(),
            json!({}),
        );
        if i == 4 {
            r["metadata"]["labels"]["scheduling.koordinator.sh/reservation-order"] =
                "123456".into();
        }
        c.upsert_reservation(Arc::new(serde_json::from_value(r).unwrap()));
    }
    let p = owner("test-pod-1", "4", false);
    let r = fw.schedule(&p, &c, Scope::Everything);
    let score = |n: &str| r.verdicts[n].scores[NAME];
    let scores: Vec<i64> = (1..=4).map(|i| score(&format!("test-node-{i}"))).collect();
    assert_eq!(scores, [10, 10, 10, 100]);
    assert_eq!(r.node.as_deref(), Some("test-node-4"));
}

/// `ignoredResources` / `ignoredResourceGroups`: an extended resource neither the node nor
/// the Restricted reservation holds stops the owner, unless the args ignore it (by name or
/// by its group); and Koordinator's ValidateReservationArgs cases for them.
#[test]
fn ignored_resources_leave_the_fit_checks() {
    let gpu = json!({"cpu": "6", "example.com/gpu": "1"});
    let c = node_with(
        reservation("test-r", "test-node", "Restricted", gpu, json!({})),
        "24",
    );
    let mut p = json!({"metadata": {"name": "p", "namespace": "d", "uid": "p", "labels": {"app": "web"},
            "annotations": {"scheduling.koordinator.sh/reservation-affinity": r#"{"reservationSelector": {"r": "test-r"}}"#}},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "resources":
            {"requests": {"cpu": "2", "example.com/gpu": "2"}}}]}});
    let owner = pod(p.take());
    assert_eq!(
        reason_on(&c, &owner),
        "Insufficient example.com/gpu by node, Reservation(s) Insufficient example.com/gpu"
    );
    let build = |args: Value| crate::scheduler::plugins::build("Reservation", Some(&args));
    for args in [
        json!({"ignoredResources": ["example.com/gpu"]}),
        json!({"ignoredResourceGroups": ["example.com"]}),
    ] {
        let pl = build(args.clone()).unwrap();
        assert_eq!(reason_with(&*pl, &c, &owner), "ok", "{args}");
    }
    for (name, args, ok) in [
        (
            "valid ignoredResourceGroups",
            json!({"ignoredResources": ["example.com/gpu"], "ignoredResourceGroups": ["example.com"]}),
            true,
        ),
        (
            "ignoredResourceGroups contains slash",
            json!({"ignoredResourceGroups": ["example.com/invalid"]}),
            false,
        ),
        (
            "ignoredResources with invalid label name",
            json!({"ignoredResources": ["-invalid/gpu"]}),
            false,
        ),
        (
            "ignoredResourceGroups with invalid label name",
            json!({"ignoredResourceGroups": ["-invalid"]}),
            false,
        ),
        (
            "empty ignoredResources and ignoredResourceGroups",
            json!({"ignoredResources": [], "ignoredResourceGroups": []}),
            true,
        ),
        (
            "native resource cpu rejected from ignoredResources",
            json!({"ignoredResources": ["cpu"]}),
            false,
        ),
        (
            "native resource memory rejected from ignoredResources",
            json!({"ignoredResources": ["memory"]}),
            false,
        ),
        (
            "native resource pods rejected from ignoredResources",
            json!({"ignoredResources": ["pods"]}),
            false,
        ),
        (
            "native resource ephemeral-storage rejected from ignoredResources",
            json!({"ignoredResources": ["ephemeral-storage"]}),
            false,
        ),
        (
            "hugepages-2Mi rejected from ignoredResources",
            json!({"ignoredResources": ["hugepages-2Mi"]}),
            false,
        ),
        (
            "kubernetes.io-prefixed name rejected from ignoredResources",
            json!({"ignoredResources": ["kubernetes.io/gpu"]}),
            false,
        ),
        (
            "kubernetes.io rejected as ignoredResourceGroup",
            json!({"ignoredResourceGroups": ["kubernetes.io"]}),
            false,
        ),
    ] {
        assert_eq!(build(args).is_ok(), ok, "{name}");
    }
}
