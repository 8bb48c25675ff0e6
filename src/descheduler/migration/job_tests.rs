use serde_json::json;

use super::*;

fn job(extra: serde_json::Value) -> PodMigrationJob {
    let mut v = json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob",
        "metadata": {"name": "j", "uid": "job-uid", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"ttl": "5m", "mode": "ReservationFirst", "podRef": {"namespace": "default", "name": "p", "uid": "u1"}},
        "status": {"phase": "Running"}});
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

fn pod(uid: &str, node: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default", "uid": uid, "labels": {"app": "web"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}})).unwrap()
}

fn reservation(phase: &str, node: Option<&str>) -> Reservation {
    serde_json::from_value(
        json!({"metadata": {"name": "job-uid"}, "spec": {"owners": []},
        "status": {"phase": phase, "nodeName": node}}),
    )
    .unwrap()
}

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn seen<'a>(
    pod: Option<&'a Pod>,
    r: Option<&'a Reservation>,
    bound: Option<&'a PodView>,
) -> Seen<'a> {
    Seen {
        pod,
        reservation: r,
        bound,
        now_ms: T0 + 10_000,
    }
}

#[test]
fn reservation_first_walks_its_phases() {
    let p = pod("u1", "n0");
    let pending = job(json!({"status": {"phase": "Pending"}}));
    assert_eq!(
        step(&pending, &seen(Some(&p), None, None), "ReservationFirst"),
        Step::Start("u1".into())
    );
    let j = job(json!({}));
    assert_eq!(
        step(&j, &seen(Some(&p), None, None), "ReservationFirst"),
        Step::CreateReservation
    );
    let reserved =
        job(json!({"spec": {"reservationOptions": {"reservationRef": {"name": "job-uid"}}}}));
    assert_eq!(
        step(&reserved, &seen(Some(&p), None, None), "x"),
        Step::Fail("MissingReservation", "the job's Reservation is gone".into())
    );
    let waiting = reservation("Pending", None);
    assert!(
        matches!(step(&reserved, &seen(Some(&p), Some(&waiting), None), "x"), Step::Wait(c) if c.type_ == "ReservationScheduled")
    );
    let same_node = reservation("Available", Some("n0"));
    assert!(matches!(
        step(&reserved, &seen(Some(&p), Some(&same_node), None), "x"),
        Step::Fail("ForbiddenMigratePod", _)
    ));
    let ok = reservation("Available", Some("n1"));
    assert_eq!(
        step(&reserved, &seen(Some(&p), Some(&ok), None), "x"),
        Step::Scheduled("n1".into())
    );
    let scheduled = job(
        json!({"spec": {"reservationOptions": {"reservationRef": {"name": "job-uid"}}},
        "status": {"conditions": [{"type": "ReservationScheduled", "status": "True"}]}}),
    );
    assert_eq!(
        step(&scheduled, &seen(Some(&p), Some(&ok), None), "x"),
        Step::Evict
    );
    assert!(
        matches!(step(&scheduled, &seen(None, Some(&ok), None), "x"), Step::Wait(c) if c.reason == "WaitForPodBindReservation")
    );
    let mut newp = pod("u2", "n1");
    newp.metadata.name = Some("p2".into());
    let view = PodView::from(&newp);
    assert!(
        matches!(step(&scheduled, &seen(None, Some(&ok), Some(&view)), "x"), Step::Wait(c) if c.reason == "WaitForBoundPodReady")
    );
    newp.status =
        serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True"}]}))
            .unwrap();
    let view = PodView::from(&newp);
    assert_eq!(
        step(&scheduled, &seen(None, Some(&ok), Some(&view)), "x"),
        Step::Succeed(Some("p2".into()))
    );
    // A pod that came back under the same name with a new UID counts as gone.
    let again = pod("u9", "n0");
    assert!(matches!(
        step(&scheduled, &seen(Some(&again), Some(&ok), None), "x"),
        Step::Wait(_)
    ));
}

#[test]
fn ttl_missing_pods_and_evict_directly() {
    let p = pod("u1", "n0");
    let mut old = seen(Some(&p), None, None);
    old.now_ms = T0 + 301_000;
    assert!(matches!(
        step(&job(json!({})), &old, "x"),
        Step::Fail("Timeout", _)
    ));
    let pending = job(json!({"status": {"phase": "Pending"}}));
    assert!(matches!(
        step(&pending, &seen(None, None, None), "x"),
        Step::Fail("MissingPod", _)
    ));
    let no_ref = job(json!({"spec": {"podRef": null}}));
    assert!(matches!(
        step(&no_ref, &seen(None, None, None), "x"),
        Step::Fail("InvalidPodRef", _)
    ));
    let direct = job(json!({"spec": {"mode": "EvictDirectly"}}));
    assert_eq!(step(&direct, &seen(Some(&p), None, None), "x"), Step::Evict);
    assert_eq!(
        step(&direct, &seen(None, None, None), "x"),
        Step::Succeed(None)
    );
    let unset = job(json!({"spec": {"mode": null}}));
    assert_eq!(
        step(&unset, &seen(Some(&p), None, None), "EvictDirectly"),
        Step::Evict,
        "the default mode"
    );
}

#[test]
fn the_reservation_skips_the_current_node_and_is_owned_by_the_workload() {
    let j = job(json!({}));
    let r = reservation_for(&j, &pod("u1", "n0"), Some(Duration::from_secs(300)), 42);
    assert_eq!(r.metadata.name.as_deref(), Some("job-uid"));
    let labels = r.metadata.labels.clone().unwrap();
    assert_eq!(labels["app.kubernetes.io/created-by"], "koord-descheduler");
    assert_eq!(labels["scheduling.koordinator.sh/reservation-order"], "42");
    assert_eq!(r.spec.allocate_once, Some(true));
    assert_eq!(r.spec.ttl.as_deref(), Some("300s"));
    assert_eq!(
        r.spec.owners[0].controller.as_ref().unwrap().uid.as_deref(),
        Some("rs-1")
    );
    let t = serde_json::to_value(&r.spec.template).unwrap();
    assert_eq!(t["spec"]["nodeName"], serde_json::Value::Null);
    let term = &t["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0];
    assert_eq!(
        term["matchFields"][0],
        json!({"key": "metadata.name", "operator": "NotIn", "values": ["n0"]})
    );
    let nj = new_job(
        "name",
        &PodView::from(&pod("u1", "n0")),
        "LowNodeLoad",
        "hot",
        &MigrationArgs::parse(&serde_json::Value::Null).unwrap(),
        "me",
    );
    let a = nj.metadata.annotations.unwrap();
    assert_eq!(
        (
            a["koordinator.sh/evict-trigger"].as_str(),
            a["koordinator.sh/job-created-by"].as_str()
        ),
        ("LowNodeLoad", "me")
    );
    assert_eq!(nj.spec.mode.as_deref(), Some("ReservationFirst"));
    assert_eq!(nj.spec.ttl.as_deref(), Some("300s"));
}

/// A pod the scheduler could not place: Pending, PodScheduled False.
fn pending_pod() -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default", "uid": "u1",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}]}})).unwrap()
}

#[test]
fn reservation_owners_follow_koordinator() {
    // A pending, unplaced pod owns its Reservation itself; a running one, its controller;
    // a bare running pod, nobody.
    let j = job(json!({}));
    let own = reservation_for(&j, &pending_pod(), None, 0).spec.owners;
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].object.as_ref().unwrap().name.as_deref(), Some("p"));
    assert!(own[0].controller.is_none());
    let mut bare = pod("u1", "n0");
    bare.metadata.owner_references = None;
    assert!(reservation_for(&j, &bare, None, 0).spec.owners.is_empty());
}

#[test]
fn a_pending_pod_job_succeeds_once_the_pod_is_scheduled() {
    let j = job(
        json!({"spec": {"reservationOptions": {"reservationRef": {"name": "job-uid"}}},
        "status": {"conditions": [{"type": "ReservationScheduled", "status": "True"}]}}),
    );
    let mut r = reservation("Available", Some("n2"));
    r.spec.owners = reservation_for(&j, &pending_pod(), None, 0).spec.owners;
    let waiting = pending_pod();
    match step(
        &j,
        &seen(Some(&waiting), Some(&r), None),
        "ReservationFirst",
    ) {
        Step::Wait(c) => {
            assert_eq!(
                (c.type_, c.status, c.reason),
                ("PodScheduled", "False", "Unschedulable")
            );
            assert_eq!(c.message, "0/3 nodes are available");
        }
        other => panic!("{other:?}"),
    }
    let mut placed = pending_pod();
    placed.spec.as_mut().unwrap().node_name = Some("n2".into());
    placed.status = serde_json::from_value(
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}),
    )
    .unwrap();
    assert_eq!(
        step(&j, &seen(Some(&placed), Some(&r), None), "ReservationFirst"),
        Step::Assigned("n2".into()),
        "no eviction: the pending pod itself takes the room"
    );
}

#[test]
fn an_unschedulable_reservation_fails_the_job_and_an_expired_one_says_so() {
    let j = job(json!({"spec": {"reservationOptions": {"reservationRef": {"name": "job-uid"}}}}));
    let p = pod("u1", "n0");
    let failed = |reason: &str, cond_type: &str| -> Reservation {
        serde_json::from_value(json!({"metadata": {"name": "job-uid"}, "spec": {"owners": []},
            "status": {"phase": "Failed", "conditions": [{"type": cond_type, "status": "False", "reason": reason, "message": "no node fits"}]}}))
        .unwrap()
    };
    let r = failed("Unschedulable", "Scheduled");
    assert_eq!(
        step(&j, &seen(Some(&p), Some(&r), None), "ReservationFirst"),
        Step::Fail("Unschedulable", "no node fits".into())
    );
    let r = failed("Expired", "Ready");
    assert!(matches!(
        step(&j, &seen(Some(&p), Some(&r), None), "ReservationFirst"),
        Step::Fail("ReservationExpired", _)
    ));
}

#[test]
fn the_scavenger_takes_jobs_past_their_ttl_and_five_minutes() {
    let minute = 60_000;
    let with_ttl = job(json!({})); // ttl 5m, created at T0
    assert!(!scavengeable(&with_ttl, T0 + 9 * minute));
    assert!(scavengeable(&with_ttl, T0 + 10 * minute), "TTL 5m + 5m");
    let no_ttl = job(json!({"spec": {"ttl": null}}));
    assert!(!scavengeable(&no_ttl, T0 + 29 * minute));
    assert!(
        scavengeable(&no_ttl, T0 + 30 * minute),
        "30 minutes without a TTL"
    );
}
