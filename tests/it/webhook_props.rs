//! Property tests: whatever arrives as an AdmissionReview, and whatever pod goes through
//! the mutator, every webhook answers without panicking: 400 with a message for malformed
//! reviews, otherwise a well-formed AdmissionReview whose patch applies to the object.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use koord::manager::webhook::Handlers;
use koord::manager::webhook::lookup::Fixed;
use proptest::prelude::*;
use serde_json::{Value, json};

const PATHS: &[&str] = &[
    "/mutate-pod",
    "/validate-pod",
    "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
    "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
    "/mutate-node-status",
    "/validate-node",
    "/validate-configmap",
];

fn handlers() -> Handlers {
    let profile = json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
        "qosClass": "BE", "priorityClassName": "koord-batch", "labels": {"x": "y"}, "patch": {"metadata": {"labels": {"z": "1"}}}}});
    let fixed = Fixed {
        profiles: vec![Arc::new(serde_json::from_value(profile).unwrap())],
        namespaces: BTreeMap::from([("ns".to_string(), BTreeMap::new())]),
        ..Fixed::default()
    }
    .with_koord_priority_classes();
    use koord::manager::features::{
        CONFIG_MAP_VALIDATING_WEBHOOK, NODE_MUTATING_WEBHOOK, NODE_VALIDATING_WEBHOOK,
    };
    let gates = [
        NODE_MUTATING_WEBHOOK,
        NODE_VALIDATING_WEBHOOK,
        CONFIG_MAP_VALIDATING_WEBHOOK,
    ]
    .into_iter()
    .fold(koord::manager::features::defaults(), |g, n| g.with(n, true));
    Handlers::new(
        gates,
        Arc::new(fixed),
        ("koordinator-system".into(), "slo-controller-config".into()),
    )
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9./%-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z/.-]{1,10}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[0-9]{1,6}(m|Mi|Gi|k|)".prop_map(Value::from),
        "[a-z0-9.%-]{0,6}".prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
    ]
}

fn resources() -> impl Strategy<Value = Value> {
    let names = prop::sample::select(vec![
        "cpu",
        "memory",
        "kubernetes.io/batch-cpu",
        "koordinator.sh/gpu",
        "koordinator.sh/gpu-memory-ratio",
        "nvidia.com/gpu",
    ]);
    prop::collection::btree_map(names, quantity(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
}

fn pod() -> impl Strategy<Value = Value> {
    let labels = prop::collection::btree_map(
        prop::sample::select(vec![
            "app",
            "koordinator.sh/qosClass",
            "koordinator.sh/priority",
            "quota.scheduling.koordinator.sh/name",
        ]),
        prop::sample::select(vec!["a", "BE", "LSR", "LS", "x"]),
        0..4,
    );
    let container = (resources(), resources())
        .prop_map(|(r, l)| json!({"name": "c", "resources": {"requests": r, "limits": l}}));
    (labels, prop::collection::vec(container, 0..3), prop::option::of(any::<i32>()), json_value())
        .prop_map(|(labels, containers, priority, extra)| {
            json!({"metadata": {"name": "p", "namespace": "ns", "labels": labels, "annotations": {"k": extra.to_string()}},
                "spec": {"containers": containers, "priority": priority, "overhead": {"cpu": "1"}}})
        })
}

fn review(op: &str, obj: Value, old: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": op, "namespace": "ns", "name": "p",
            "object": obj, "oldObject": old}}))
    .unwrap()
}

/// The answer is a valid AdmissionReview, and any patch applies to `obj`.
fn check(code: u16, out: &Value, obj: Option<&Value>) -> Result<(), TestCaseError> {
    if code == 400 {
        prop_assert!(out["error"].as_str().is_some_and(|s| !s.is_empty()));
        return Ok(());
    }
    prop_assert_eq!(code, 200);
    prop_assert_eq!(&out["kind"], "AdmissionReview");
    prop_assert_eq!(&out["response"]["uid"], "u");
    prop_assert!(out["response"]["allowed"].is_boolean());
    if let Some(p) = out["response"]["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        let mut target = obj.cloned().unwrap_or(Value::Null);
        prop_assert!(json_patch::patch(&mut target, &patch).is_ok());
    }
    if out["response"]["allowed"] == false {
        prop_assert!(out["response"]["status"]["message"].as_str().is_some());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_and_json(bytes in prop::collection::vec(any::<u8>(), 0..200), v in json_value()) {
        let h = handlers();
        for path in PATHS {
            let (code, out) = h.serve(path, &bytes);
            check(code, &out, None)?;
            let body = serde_json::to_vec(&v).unwrap();
            let (code, out) = h.serve(path, &body);
            check(code, &out, None)?;
            let wrapped = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": v})).unwrap();
            let (code, out) = h.serve(path, &wrapped);
            check(code, &out, v.get("object"))?;
        }
    }

    #[test]
    fn arbitrary_objects_through_every_webhook(p in pod(), old in pod(), any_obj in json_value()) {
        let h = handlers();
        for path in PATHS {
            for (op, obj, prev) in [("CREATE", &p, &Value::Null), ("UPDATE", &p, &old), ("DELETE", &Value::Null, &old), ("CREATE", &any_obj, &Value::Null)] {
                let (code, out) = h.serve(path, &review(op, obj.clone(), prev.clone()));
                check(code, &out, Some(obj))?;
            }
        }
    }
}
