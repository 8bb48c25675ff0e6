use std::sync::Arc;

use crate::manager::features;
use serde_json::{Value, json};

use super::*;
use crate::manager::webhook::lookup::Fixed;
use crate::manager::webhook::test_util::{handlers, handlers_with, request};

fn pod(labels: Value, priority: Option<i32>, requests: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "team", "labels": labels},
        "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"requests": requests}}]}})
}

fn check(h: &Handlers, op: &str, obj: Value, old: Option<Value>) -> Result<(), String> {
    match handle(h, &request("Pod", op, "team", Some(obj), old)) {
        Verdict::Deny { message, .. } => Err(message),
        _ => Ok(()),
    }
}

#[test]
fn qos_and_priority_table() {
    let h = handlers(Fixed::default());
    // (labels, priority, requests, denial containing)
    let cases: Vec<(Value, Option<i32>, Value, Option<&str>)> = vec![
        (
            json!({"koordinator.sh/qosClass": "BE"}),
            Some(5000),
            json!({"kubernetes.io/batch-cpu": "1000"}),
            None,
        ),
        (
            json!({"koordinator.sh/qosClass": "BE"}),
            None,
            json!({}),
            Some("cannot be used in combination"),
        ),
        (
            json!({"koordinator.sh/qosClass": "BE"}),
            Some(9000),
            json!({}),
            Some("priorityClass=koord-prod"),
        ),
        (
            json!({"koordinator.sh/qosClass": "LS"}),
            Some(5000),
            json!({"kubernetes.io/batch-cpu": "1000"}),
            Some("must be koordinator.sh/qosClass=BE"),
        ),
        (
            json!({}),
            None,
            json!({"kubernetes.io/batch-memory": "100"}),
            Some("must be koordinator.sh/qosClass=BE"),
        ),
        (
            json!({}),
            None,
            json!({"kubernetes.io/batch-cpu": "0"}),
            None,
        ),
        (
            json!({"koordinator.sh/qosClass": "LSR"}),
            Some(9000),
            json!({"cpu": "2"}),
            None,
        ),
        (
            json!({"koordinator.sh/qosClass": "LSR"}),
            Some(9000),
            json!({"cpu": "1500m"}),
            Some("whole, non-zero number of CPUs"),
        ),
        (
            json!({"koordinator.sh/qosClass": "LSR"}),
            Some(9000),
            json!({}),
            Some("whole, non-zero"),
        ),
        (
            json!({"koordinator.sh/qosClass": "LSR"}),
            Some(5000),
            json!({"cpu": "1"}),
            Some("cannot be used in combination"),
        ),
        (
            json!({"koordinator.sh/qosClass": "LSE"}),
            Some(9000),
            json!({"cpu": "500m"}),
            Some("LSE pods must request"),
        ),
        (
            json!({"koordinator.sh/qosClass": "LS"}),
            None,
            json!({"cpu": "100m"}),
            None,
        ),
    ];
    for (labels, prio, req, want) in cases {
        let got = check(&h, "CREATE", pod(labels.clone(), prio, req.clone()), None);
        match want {
            None => assert!(got.is_ok(), "{labels} {prio:?} {req}: {got:?}"),
            Some(w) => assert!(
                got.as_ref().is_err_and(|e| e.contains(w)),
                "{labels} {prio:?} {req}: {got:?}"
            ),
        }
    }
}

#[test]
fn immutable_fields_on_update() {
    let h = handlers(Fixed::default());
    let old = pod(
        json!({"koordinator.sh/qosClass": "LS", "koordinator.sh/priority": "1"}),
        Some(9000),
        json!({}),
    );
    let e = check(
        &h,
        "UPDATE",
        pod(
            json!({"koordinator.sh/qosClass": "BE", "koordinator.sh/priority": "1"}),
            Some(5000),
            json!({}),
        ),
        Some(old.clone()),
    )
    .unwrap_err();
    assert!(
        e.contains("koordinator.sh/qosClass")
            && e.contains("immutable")
            && e.contains("spec.priority"),
        "{e}"
    );
    let e = check(
        &h,
        "UPDATE",
        pod(
            json!({"koordinator.sh/qosClass": "LS", "koordinator.sh/priority": "2"}),
            Some(9000),
            json!({}),
        ),
        Some(old.clone()),
    )
    .unwrap_err();
    assert!(e.contains("koordinator.sh/priority"), "{e}");
    let lax = handlers_with(
        Fixed::default(),
        crate::manager::features::defaults()
            .with(features::COLOCATION_PROFILE_SKIP_VALIDATING_PRIORITY, true),
        0,
    );
    assert!(
        check(
            &lax,
            "UPDATE",
            pod(
                json!({"koordinator.sh/qosClass": "LS", "koordinator.sh/priority": "2"}),
                Some(9000),
                json!({})
            ),
            Some(old)
        )
        .is_ok()
    );
}

#[test]
fn reserve_pod_annotation_is_forbidden() {
    let h = handlers(Fixed::default());
    let mut p = pod(json!({}), None, json!({}));
    p["metadata"]["annotations"] = json!({ANNOTATION_RESERVE_POD: "true"});
    assert!(
        check(&h, "CREATE", p, None)
            .unwrap_err()
            .contains("reserve-pod")
    );
}

fn quota(name: &str, labels: Value, annotations: Value) -> Arc<crate::api::quota::ElasticQuota> {
    Arc::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations}, "spec": {}})).unwrap())
}

#[test]
fn pods_may_not_use_parent_quotas() {
    let f = Fixed {
        quotas: vec![
            quota("parent", json!({LABEL_QUOTA_IS_PARENT: "true"}), json!({})),
            quota("team", json!({LABEL_QUOTA_IS_PARENT: "true"}), json!({})),
            quota(
                "leaf",
                json!({LABEL_QUOTA_PARENT: "parent"}),
                json!({ANNOTATION_QUOTA_NAMESPACES: "[\"bound\"]"}),
            ),
        ],
        ..Fixed::default()
    };
    let h = handlers(f.clone());
    let labelled = pod(json!({LABEL_QUOTA_NAME: "parent"}), None, json!({}));
    assert!(
        check(&h, "CREATE", labelled, None)
            .unwrap_err()
            .contains("parent quota")
    );
    assert!(
        check(
            &h,
            "CREATE",
            pod(json!({LABEL_QUOTA_NAME: "leaf"}), None, json!({})),
            None
        )
        .is_ok()
    );
    // The namespace-named quota "team" is a parent.
    assert!(check(&h, "CREATE", pod(json!({}), None, json!({})), None).is_err());
    let no_default = handlers_with(
        f.clone(),
        crate::manager::features::defaults().with(features::DISABLE_DEFAULT_QUOTA, true),
        0,
    );
    assert!(check(&no_default, "CREATE", pod(json!({}), None, json!({})), None).is_ok());
    let allowed = handlers_with(
        f.clone(),
        crate::manager::features::defaults().with(features::SUPPORT_PARENT_QUOTA_SUBMIT_POD, true),
        0,
    );
    assert!(
        check(
            &allowed,
            "CREATE",
            pod(json!({LABEL_QUOTA_NAME: "parent"}), None, json!({})),
            None
        )
        .is_ok()
    );
    let topo = h.quota_topology();
    let p: Pod = serde_json::from_value(pod(json!({}), None, json!({}))).unwrap();
    assert_eq!(quota_name_of(&topo, &p, "bound", true), "leaf");
    assert_eq!(quota_name_of(&topo, &p, "nowhere", true), QUOTA_DEFAULT);
    let old = pod(
        json!({LABEL_QUOTA_PREEMPTIBLE: "true", LABEL_QUOTA_NAME: "leaf"}),
        None,
        json!({}),
    );
    let new = pod(
        json!({LABEL_QUOTA_PREEMPTIBLE: "false", LABEL_QUOTA_NAME: "leaf"}),
        None,
        json!({}),
    );
    assert!(
        check(&h, "UPDATE", new, Some(old))
            .unwrap_err()
            .contains("preemptible")
    );
}

#[test]
fn device_requests_are_checked_only_with_the_gate() {
    let shared_without_memory = json!({"metadata": {"name": "p", "namespace": "team"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"koordinator.sh/gpu.shared": "2"}}}]}});
    let off = handlers(Fixed::default());
    assert_eq!(
        check(&off, "CREATE", shared_without_memory.clone(), None),
        Ok(())
    );
    let gates =
        crate::manager::features::defaults().with(features::VALIDATE_POD_DEVICE_RESOURCE, true);
    let on = handlers_with(Fixed::default(), gates, 0);
    let denied = check(&on, "CREATE", shared_without_memory.clone(), None).unwrap_err();
    assert_eq!(
        denied,
        "pod.spec.containers[*].resources.requests: Forbidden: GPU memory and GPU memory ratio all is zero"
    );
    let update = check(
        &on,
        "UPDATE",
        shared_without_memory.clone(),
        Some(shared_without_memory),
    );
    assert!(update.is_err(), "updates are checked too");
}
