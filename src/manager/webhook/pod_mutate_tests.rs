use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::manager::webhook::lookup::Fixed;
use crate::manager::webhook::test_util::{handlers, handlers_with, patched, request};

fn profile(name: &str, spec: Value) -> Arc<ClusterColocationProfile> {
    Arc::new(
        serde_json::from_value(json!({"apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile", "metadata": {"name": name}, "spec": spec}))
        .unwrap(),
    )
}

fn pod(labels: Value, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team", "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": resources}]}})
}

fn fixed(profiles: Vec<Arc<ClusterColocationProfile>>) -> Fixed {
    Fixed {
        profiles,
        namespaces: BTreeMap::from([
            (
                "team".to_string(),
                BTreeMap::from([("colocation".to_string(), "on".to_string())]),
            ),
            ("other".to_string(), BTreeMap::new()),
        ]),
        ..Fixed::default()
    }
    .with_koord_priority_classes()
}

fn run(f: Fixed, obj: Value) -> (Verdict, Value) {
    let h = handlers(f);
    let v = handle(
        &h,
        &request("Pod", "CREATE", "team", Some(obj.clone()), None),
    );
    let out = patched(&obj, &v);
    (v, out)
}

const BE_PROFILE: fn() -> Value = || {
    json!({"namespaceSelector": {"matchLabels": {"colocation": "on"}}, "selector": {"matchLabels": {"app": "batch"}},
        "qosClass": "BE", "priorityClassName": "koord-batch", "koordinatorPriority": 1111,
        "schedulerName": "koord-scheduler", "labels": {"l": "v"}, "annotations": {"a": "b"}})
};

#[test]
fn be_profile_turns_a_pod_into_a_batch_pod() {
    let obj = pod(
        json!({"app": "batch"}),
        json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}),
    );
    let (v, out) = run(fixed(vec![profile("be", BE_PROFILE())]), obj);
    assert!(matches!(v, Verdict::Patch(_)));
    assert_eq!(out["metadata"]["labels"]["koordinator.sh/qosClass"], "BE");
    assert_eq!(out["metadata"]["labels"]["koordinator.sh/priority"], "1111");
    assert_eq!(out["metadata"]["labels"]["l"], "v");
    assert_eq!(out["metadata"]["annotations"]["a"], "b");
    assert_eq!(out["spec"]["priorityClassName"], "koord-batch");
    assert_eq!(out["spec"]["priority"], 5000);
    assert_eq!(out["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(out["spec"]["schedulerName"], "koord-scheduler");
    let r = &out["spec"]["containers"][0]["resources"];
    assert_eq!(
        r,
        &json!({"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1073741824"},
        "limits": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2147483648"}})
    );
    let spec: Value = serde_json::from_str(
        out["metadata"]["annotations"][ANNOTATION_EXTENDED_RESOURCE_SPEC]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        spec["containers"]["main"]["requests"]["kubernetes.io/batch-cpu"],
        "500"
    );
}

#[test]
fn selectors_decide_who_matches() {
    let p = profile("be", BE_PROFILE());
    // (namespace, labels, matches)
    for (ns, labels, want) in [
        ("team", json!({"app": "batch"}), true),
        ("team", json!({"app": "web"}), false),
        ("other", json!({"app": "batch"}), false),
        // An unknown namespace counts as a match (Koordinator's failed GET).
        ("ghost", json!({"app": "batch"}), true),
    ] {
        let mut obj = pod(labels.clone(), json!({}));
        obj["metadata"]["namespace"] = ns.into();
        let h = handlers(fixed(vec![p.clone()]));
        let got = !matching_profiles(&h, ns, &obj).is_empty();
        assert_eq!(got, want, "{ns} {labels}");
    }
    let any = profile("any", json!({"selector": {}, "qosClass": "LS"}));
    let (_, out) = run(fixed(vec![any]), pod(json!({}), json!({})));
    assert_eq!(out["metadata"]["labels"]["koordinator.sh/qosClass"], "LS");
}

#[test]
fn profiles_apply_in_name_order_and_later_ones_win() {
    let a = profile(
        "a",
        json!({"qosClass": "LS", "labels": {"x": "from-a"}, "labelKeysMapping": {"app": "copied"}, "labelSuffixes": {"x": "-sfx", "missing": "-no"}}),
    );
    let b = profile(
        "b",
        json!({"qosClass": "BE", "labels": {"x": "from-b"}, "annotationKeysMapping": {"absent": "mapped"}}),
    );
    let (_, out) = run(fixed(vec![b, a]), pod(json!({"app": "web"}), json!({})));
    let labels = &out["metadata"]["labels"];
    assert_eq!(labels["koordinator.sh/qosClass"], "BE");
    assert_eq!(labels["x"], "from-b");
    assert_eq!(labels["copied"], "web");
    assert!(labels.get("missing").is_none());
    assert_eq!(out["metadata"]["annotations"]["mapped"], "");
}

#[test]
fn label_suffix_appends_to_the_label_set_before() {
    let a = profile(
        "a",
        json!({"labels": {"x": "v"}, "labelSuffixes": {"x": "-sfx"}}),
    );
    let (_, out) = run(fixed(vec![a]), pod(json!({}), json!({})));
    assert_eq!(out["metadata"]["labels"]["x"], "v-sfx");
}

#[test]
fn probability_rules() {
    assert_eq!(probability(None), Ok(100));
    assert_eq!(
        probability(Some(&IntOrString::String("30%".into()))),
        Ok(30)
    );
    assert_eq!(probability(Some(&IntOrString::Int(7))), Ok(7));
    assert!(probability(Some(&IntOrString::String("half".into()))).is_err());
    // (probability, roll, applied)
    for (p, roll, applied) in [
        (json!(0), 0, false),
        (json!(100), 99, true),
        (json!("50%"), 50, true),
        (json!("50%"), 51, false),
        (json!(30), 99, false),
    ] {
        let prof = profile("p", json!({"probability": p, "qosClass": "BE"}));
        let h = handlers_with(
            fixed(vec![prof]),
            crate::manager::features::defaults(),
            roll,
        );
        let obj = pod(json!({}), json!({}));
        let v = handle(
            &h,
            &request("Pod", "CREATE", "team", Some(obj.clone()), None),
        );
        let out = patched(&obj, &v);
        assert_eq!(
            out["metadata"]["labels"]
                .get("koordinator.sh/qosClass")
                .is_some(),
            applied,
            "{p} roll {roll}"
        );
    }
    let bad = profile("bad", json!({"probability": "half"}));
    let (v, _) = run(fixed(vec![bad]), pod(json!({}), json!({})));
    assert!(
        matches!(v, Verdict::Deny { code: 500, ref message } if message.contains("bad")),
        "{v:?}"
    );
}

#[test]
fn skip_update_resources_and_unknown_priority_class() {
    let mut p = (*profile(
        "be",
        json!({"qosClass": "BE", "priorityClassName": "koord-batch"}),
    ))
    .clone();
    p.metadata.annotations = Some(BTreeMap::from([(
        ANNOTATION_SKIP_UPDATE_RESOURCES.to_string(),
        "true".to_string(),
    )]));
    let (_, out) = run(
        fixed(vec![Arc::new(p)]),
        pod(json!({}), json!({"requests": {"cpu": "1"}})),
    );
    assert_eq!(
        out["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "1"
    );
    let missing = profile("m", json!({"priorityClassName": "nope"}));
    let (v, _) = run(fixed(vec![missing]), pod(json!({}), json!({})));
    assert!(matches!(v, Verdict::Deny { ref message, .. } if message.contains("nope")));
}

#[test]
fn translation_by_class_with_limits_only_init_containers_and_overhead() {
    let mut obj = pod(
        json!({}),
        json!({"limits": {"cpu": "1500m", "memory": "100Mi"}}),
    );
    obj["spec"]["initContainers"] =
        json!([{"name": "init", "resources": {"requests": {"cpu": "100m"}}}]);
    obj["spec"]["overhead"] = json!({"cpu": "250m", "memory": "64Mi"});
    obj["spec"]["priority"] = json!(7000);
    translate_resources(&mut obj, PriorityClass::Mid);
    let r = &obj["spec"]["containers"][0]["resources"];
    assert_eq!(
        r["limits"],
        json!({"kubernetes.io/mid-cpu": "1500", "kubernetes.io/mid-memory": "104857600"})
    );
    assert_eq!(r["requests"], r["limits"], "request defaults to the limit");
    assert_eq!(
        obj["spec"]["initContainers"][0]["resources"]["requests"],
        json!({"kubernetes.io/mid-cpu": "100"})
    );
    assert_eq!(
        obj["spec"]["overhead"],
        json!({"kubernetes.io/mid-cpu": "250", "kubernetes.io/mid-memory": "67108864"})
    );
    let before = pod(json!({}), json!({"requests": {"cpu": "1"}}));
    for class in [
        PriorityClass::Prod,
        PriorityClass::None,
        PriorityClass::Free,
    ] {
        let mut p = before.clone();
        translate_resources(&mut p, class);
        assert_eq!(p, before, "{class:?} is untouched");
    }
}

#[test]
fn profile_patch_is_a_strategic_merge() {
    let p = profile(
        "p",
        json!({"patch": {"spec": {"tolerations": [{"key": "batch", "operator": "Exists"}]}, "metadata": {"labels": {"patched": "yes"}}}}),
    );
    let (_, out) = run(fixed(vec![p]), pod(json!({}), json!({})));
    assert_eq!(out["spec"]["tolerations"][0]["key"], "batch");
    assert_eq!(out["metadata"]["labels"]["patched"], "yes");
    assert_eq!(
        out["spec"]["containers"][0]["name"], "main",
        "containers kept"
    );
}

#[test]
fn extended_resource_spec_written_only_when_it_differs() {
    let (v, _) = run(
        fixed(vec![]),
        pod(json!({}), json!({"requests": {"cpu": "1"}})),
    );
    assert_eq!(v, Verdict::Allow, "no batch resources, no annotation");
    let obj = pod(
        json!({}),
        json!({"requests": {"kubernetes.io/batch-cpu": "1000"}}),
    );
    let (_, out) = run(fixed(vec![]), obj);
    let ann = out["metadata"]["annotations"][ANNOTATION_EXTENDED_RESOURCE_SPEC]
        .as_str()
        .unwrap();
    assert_eq!(
        ann,
        r#"{"containers":{"main":{"requests":{"kubernetes.io/batch-cpu":"1000"}}}}"#
    );
    let (again, _) = run(fixed(vec![]), out.clone());
    assert_eq!(again, Verdict::Allow, "already up to date");
    let mut stale = pod(json!({}), json!({}));
    stale["metadata"]["annotations"] = json!({ANNOTATION_EXTENDED_RESOURCE_SPEC: ann});
    let (_, out) = run(fixed(vec![]), stale);
    assert_eq!(
        out["metadata"]["annotations"][ANNOTATION_EXTENDED_RESOURCE_SPEC],
        "{}"
    );
}

#[test]
fn device_resource_spec() {
    // (requests, expected requests)
    for (req, want) in [
        (
            json!({"koordinator.sh/gpu": "2"}),
            json!({"koordinator.sh/gpu-core": "2", "koordinator.sh/gpu-memory-ratio": "2", "koordinator.sh/gpu.shared": "1"}),
        ),
        (
            json!({"koordinator.sh/gpu-memory-ratio": "200"}),
            json!({"koordinator.sh/gpu-memory-ratio": "200", "koordinator.sh/gpu.shared": "2"}),
        ),
        (
            json!({"koordinator.sh/gpu-core": "50"}),
            json!({"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu.shared": "1"}),
        ),
        (
            json!({"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu.shared": "3"}),
            json!({"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu.shared": "3"}),
        ),
    ] {
        let (_, out) = run(
            fixed(vec![]),
            pod(json!({}), json!({"requests": req.clone()})),
        );
        assert_eq!(
            out["spec"]["containers"][0]["resources"]["requests"], want,
            "{req}"
        );
    }
}

#[test]
fn update_is_a_no_op_and_bad_pods_are_denied() {
    let h = handlers(fixed(vec![profile("be", BE_PROFILE())]));
    let obj = pod(json!({"app": "batch"}), json!({}));
    assert_eq!(
        handle(
            &h,
            &request("Pod", "UPDATE", "team", Some(obj.clone()), Some(obj))
        ),
        Verdict::Allow
    );
    let bad = json!({"metadata": {"name": "x"}, "spec": {"containers": "nope"}});
    assert!(!handle(&h, &request("Pod", "CREATE", "team", Some(bad), None)).is_allowed());
}
