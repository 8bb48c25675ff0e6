use serde_json::{Value, json};

use super::*;

fn reservation(spec: Value, status: Value, labels: Value) -> ReservationInfo {
    let mut spec = spec;
    if spec.get("template").is_none() {
        spec["template"] = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]}});
    }
    let r: Reservation = serde_json::from_value(json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
        "metadata": {"name": "r1", "uid": "ru1", "labels": labels}, "spec": spec, "status": status}))
    .unwrap();
    ReservationInfo::new(Arc::new(r))
}

fn available(spec: Value) -> ReservationInfo {
    reservation(
        spec,
        json!({"phase": "Available", "nodeName": "n1"}),
        json!({"pool": "a"}),
    )
}

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn web() -> Pod {
    pod(
        json!({"metadata": {"name": "web-1", "namespace": "prod", "uid": "pu1", "labels": {"app": "web"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "rs1", "controller": true}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}),
    )
}

#[test]
fn owner_matching() {
    let p = web();
    // (owners, matches)
    let cases = [
        (
            json!([{"object": {"name": "web-1", "namespace": "prod"}}]),
            true,
        ),
        (
            json!([{"object": {"name": "web-1", "namespace": "dev"}}]),
            false,
        ),
        (json!([{"object": {"uid": "pu1"}}]), true),
        (
            json!([{"controller": {"kind": "ReplicaSet", "name": "web-rs"}}]),
            true,
        ),
        (
            json!([{"controller": {"kind": "ReplicaSet", "name": "web-rs", "namespace": "dev"}}]),
            false,
        ),
        (json!([{"controller": {"kind": "StatefulSet"}}]), false),
        (
            json!([{"controller": {"uid": "rs1", "controller": true}}]),
            true,
        ),
        (
            json!([{"labelSelector": {"matchLabels": {"app": "web"}}}]),
            true,
        ),
        (
            json!([{"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}}]),
            false,
        ),
        // Within an owner every part must hold; owners are ORed.
        (
            json!([{"object": {"name": "web-1"}, "labelSelector": {"matchLabels": {"app": "db"}}}]),
            false,
        ),
        (
            json!([{"labelSelector": {"matchLabels": {"app": "db"}}}, {"object": {"name": "web-1"}}]),
            true,
        ),
        (json!([{}]), false),
    ];
    for (owners, want) in cases {
        let r = available(json!({"owners": owners}));
        assert_eq!(r.owner_matches(&p), want, "{owners}");
    }
}

#[test]
fn matchable_remaining_and_allocate_once() {
    let owners = json!([{"labelSelector": {"matchLabels": {"app": "web"}}}]);
    let mut r = available(json!({"owners": owners}));
    assert!(r.allocate_once, "allocateOnce defaults to true");
    assert_eq!(r.allocatable["cpu"], 4000, "from the template");
    let req: Amounts = [("cpu".to_string(), 2000)].into();
    assert!(matches(&r, &web(), None, &req));
    r.allocated.insert("prod/web-1".into(), req.clone());
    assert_eq!(r.remaining()["cpu"], 2000);
    assert!(!r.matchable(), "allocateOnce: used once, matched no more");
    let mut many =
        available(json!({"owners": owners, "allocateOnce": false, "allocatePolicy": "Restricted"}));
    many.allocated.insert("prod/web-1".into(), req.clone());
    assert!(many.matchable());
    assert_eq!(many.policy, AllocatePolicy::Restricted);
    let pending = reservation(json!({"owners": owners}), json!({}), json!({}));
    assert!(!pending.matchable() && pending.phase == PHASE_PENDING);
}

#[test]
fn affinity_taints_and_exact_match() {
    let owners = json!([{"labelSelector": {"matchLabels": {"app": "web"}}}]);
    let r = available(
        json!({"owners": owners, "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}),
    );
    let req: Amounts = [("cpu".to_string(), 2000)].into();
    let p = web();
    assert!(
        !matches(&r, &p, None, &req),
        "a tainted reservation needs a toleration"
    );
    let tol: ReservationAffinity = serde_json::from_value(
        json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
    )
    .unwrap();
    assert!(matches(&r, &p, Some(&tol), &req));

    let r = available(json!({"owners": owners}));
    let by = |v: Value| -> ReservationAffinity { serde_json::from_value(v).unwrap() };
    assert!(matches(&r, &p, Some(&by(json!({"name": "r1"}))), &req));
    assert!(!matches(&r, &p, Some(&by(json!({"name": "r2"}))), &req));
    assert!(matches(
        &r,
        &p,
        Some(&by(json!({"reservationSelector": {"pool": "a"}}))),
        &req
    ));
    assert!(!matches(
        &r,
        &p,
        Some(&by(json!({"reservationSelector": {"pool": "b"}}))),
        &req
    ));
    let terms = json!({"requiredDuringSchedulingIgnoredDuringExecution": {"reservationSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "c"]}]}]}});
    assert!(matches(&r, &p, Some(&by(terms)), &req));

    let mut exact = web();
    exact.metadata.annotations = Some(
        [(
            ANNOTATION_EXACT_MATCH.to_string(),
            r#"{"resourceNames":["cpu"]}"#.to_string(),
        )]
        .into(),
    );
    assert!(!matches(&r, &exact, None, &req), "2 CPUs asked, 4 reserved");
    let four: Amounts = [("cpu".to_string(), 4000)].into();
    assert!(matches(&r, &exact, None, &four));
}

#[test]
fn the_reserve_pod() {
    let r = reservation(
        json!({"owners": [{"object": {"name": "x"}}], "template": {"metadata": {"namespace": "team", "labels": {"a": "1"}},
            "spec": {"nodeName": "n9", "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}}),
        json!({}),
        json!({"b": "2"}),
    );
    let p = reserve_pod(&r, None);
    assert_eq!(
        (p.metadata.name.as_deref(), p.metadata.namespace.as_deref()),
        (Some("ru1"), Some("team"))
    );
    let ann = p.metadata.annotations.unwrap();
    assert_eq!(ann[ANNOTATION_RESERVE_POD], "true");
    assert_eq!(ann[ANNOTATION_RESERVATION_NODE], "n9");
    let spec = p.spec.unwrap();
    assert_eq!((spec.node_name, spec.priority), (None, Some(i32::MAX)));
    assert_eq!(p.metadata.labels.unwrap().len(), 2);
    let held: Amounts = [("cpu".to_string(), 1500)].into();
    let shrunk = reserve_pod(&r, Some(&held));
    assert_eq!(pod_requests(&shrunk)["cpu"], 1500);
}
