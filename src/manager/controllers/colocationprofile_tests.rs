//! Koordinator's `Test_listPodsForProfile` and `Test_updatePodByClusterColocationProfile`
//! (colocationprofile_util_test.go), with their names.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;

fn pod(v: serde_json::Value) -> Arc<Pod> {
    Arc::new(serde_json::from_value(v).unwrap())
}

fn profile(v: serde_json::Value) -> ClusterColocationProfile {
    serde_json::from_value(v).unwrap()
}

fn pending(name: &str, ns: &str, labels: serde_json::Value) -> Arc<Pod> {
    pod(
        json!({"metadata": {"name": name, "namespace": ns, "uid": name, "labels": labels},
        "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}),
    )
}

fn namespaces(ns: &str) -> Option<BTreeMap<String, String>> {
    match ns {
        "colocation" => Some(
            [(
                "enable-koordinator-colocation".to_string(),
                "true".to_string(),
            )]
            .into(),
        ),
        "default" => Some(BTreeMap::new()),
        _ => None,
    }
}

fn names(pods: Vec<&Pod>) -> Vec<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn list_pods_for_profile() {
    let pods = vec![
        pending(
            "test-pod-1",
            "default",
            json!({"koordinator-colocation-pod": "true"}),
        ),
        pending(
            "test-pod-2",
            "colocation",
            json!({"koordinator-colocation-pod": "true"}),
        ),
        pending("test-pod-3", "default", json!({"other": "x"})),
        pod(
            json!({"metadata": {"name": "scheduled", "namespace": "default",
            "labels": {"koordinator-colocation-pod": "true"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}),
        ),
        pod(
            json!({"metadata": {"name": "running", "namespace": "default",
            "labels": {"koordinator-colocation-pod": "true"}},
            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running"}}),
        ),
    ];
    let select = json!({"matchLabels": {"koordinator-colocation-pod": "true"}});
    let cases = [
        ("select no pod", json!({}), Vec::<&str>::new()),
        (
            "select matched pods",
            json!({"selector": select}),
            vec!["test-pod-1", "test-pod-2"],
        ),
        (
            "select matched pods with namespace selector",
            json!({"selector": select,
                "namespaceSelector": {"matchLabels": {"enable-koordinator-colocation": "true"}}}),
            vec!["test-pod-2"],
        ),
        (
            "no pods match namespace selector",
            json!({"selector": select, "namespaceSelector": {"matchLabels": {"absent": "true"}}}),
            vec![],
        ),
    ];
    for (name, spec, want) in cases {
        let p = profile(json!({"metadata": {"name": "test-profile"}, "spec": spec}));
        let got = names(candidates(&p, &pods, &mut namespaces));
        assert_eq!(got, want, "{name}");
    }
}

/// "mutate advanced attributes": every field the controller writes, and what it leaves
/// alone (the scheduler name label is only a label; resources are not translated).
#[test]
fn mutate_advanced_attributes() {
    let p = profile(json!({
        "metadata": {"name": "test-profile", "labels": {LABEL_CONTROLLER_MANAGED: "true"}},
        "spec": {
            "namespaceSelector": {"matchLabels": {"enable-koordinator-colocation": "true"}},
            "selector": {"matchLabels": {"koordinator-colocation-pod": "true"}},
            "labels": {"testLabelA": "valueA", "koordinator.sh/scheduler-name": "koordinator-scheduler"},
            "labelKeysMapping": {"label-key-to-load": "label-key-to-store",
                "label-key-to-load-not-exist": "label-key-to-store-not-exist"},
            "annotations": {"testAnnotationA": "valueA"},
            "annotationKeysMapping": {"annotation-key-to-load": "annotation-key-to-store"},
            "qosClass": "BE",
            "koordinatorPriority": 1111,
            "patch": {"metadata": {"labels": {"test-patch-label": "patch-a"},
                "annotations": {"test-patch-annotation": "patch-b"}}}
        }
    }));
    assert!(managed(&p));
    let before = pod(json!({
        "metadata": {"namespace": "default", "name": "test-pod-1", "resourceVersion": "1000",
            "labels": {"koordinator-colocation-pod": "true", "label-key-to-load": "test-label-value"},
            "annotations": {"annotation-key-to-load": "test-annotation-value"}},
        "spec": {"containers": [{"name": "test-container-a", "resources": {
            "limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "4Gi"}}}],
            "overhead": {"cpu": "1", "memory": "2Gi"}}
    }));
    let patch = patch_for(&p, &before).unwrap().expect("a change");
    let mut after = serde_json::to_value(before.as_ref()).unwrap();
    json_patch::patch(&mut after, &patch).unwrap();
    assert_eq!(
        after["metadata"]["labels"],
        json!({
            "koordinator-colocation-pod": "true",
            "testLabelA": "valueA",
            "test-patch-label": "patch-a",
            "label-key-to-load": "test-label-value",
            "label-key-to-store": "test-label-value",
            "label-key-to-store-not-exist": "",
            "koordinator.sh/qosClass": "BE",
            "koordinator.sh/priority": "1111",
            "koordinator.sh/scheduler-name": "koordinator-scheduler",
        })
    );
    assert_eq!(
        after["metadata"]["annotations"],
        json!({
            "testAnnotationA": "valueA",
            "test-patch-annotation": "patch-b",
            "annotation-key-to-load": "test-annotation-value",
            "annotation-key-to-store": "test-annotation-value",
        })
    );
    assert_eq!(
        after["spec"],
        serde_json::to_value(before.as_ref()).unwrap()["spec"]
    );
    // Applied once, the profile changes nothing more.
    let again: Pod = serde_json::from_value(after).unwrap();
    assert_eq!(patch_for(&p, &again).unwrap(), None);
}

#[test]
fn only_labelled_profiles_are_managed() {
    let unlabelled = profile(json!({"metadata": {"name": "p"}, "spec": {}}));
    let off = profile(
        json!({"metadata": {"name": "p", "labels": {LABEL_CONTROLLER_MANAGED: "false"}}, "spec": {}}),
    );
    assert!(!managed(&unlabelled) && !managed(&off));
}

#[test]
fn the_bucket_allows_a_burst_then_the_rate() {
    let mut b = Bucket {
        tokens: BURST,
        at: Instant::now(),
    };
    let allowed = (0..150).filter(|_| b.allow()).count();
    // The burst, then only what the elapsed microseconds refill.
    assert!((100..=101).contains(&allowed), "{allowed}");
}
