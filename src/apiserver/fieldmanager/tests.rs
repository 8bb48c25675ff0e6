use serde_json::json;

use super::*;

fn mgr(name: &str) -> Manager {
    Manager {
        name: name.into(),
        subresource: None,
        api_version: "v1".into(),
    }
}

fn managed(obj: &Value) -> Vec<(String, String, Value)> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["operation"].as_str().unwrap().to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

fn deployment(image: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": {"replicas": replicas, "template": {"spec": {"containers": [
               {"name": "web", "image": image, "args": ["a", "b"]}]}}}})
}

#[test]
fn fields_v1_round_trips_with_keyed_items() {
    let set = FieldSet::of_object(&deployment("nginx", 1), true);
    let v1 = set.to_fields_v1();
    assert_eq!(
        v1,
        json!({"f:metadata": {"f:labels": {"f:app": {}}},
               "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                   "k:{\"name\":\"web\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    assert_eq!(FieldSet::from_fields_v1(&v1), set);
}

#[test]
fn create_records_an_update_entry_for_every_field() {
    let mut obj = deployment("nginx", 1);
    record_update(None, &mut obj, &mgr("kubectl-create"), true);
    let m = managed(&obj);
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].0.as_str(), m[0].1.as_str()),
        ("kubectl-create", "Update")
    );
    assert!(m[0].2.pointer("/f:spec/f:replicas").is_some());
}

#[test]
fn a_second_applier_conflicts_until_forced() {
    let a = apply(None, &deployment("nginx", 1), &mgr("alice"), false, true).unwrap();
    // Same values: shared ownership, no conflict.
    let shared = apply(Some(&a), &deployment("nginx", 1), &mgr("bob"), false, true).unwrap();
    assert_eq!(managed(&shared).len(), 2);
    let err = apply(
        Some(&a),
        &deployment("nginx:2", 3),
        &mgr("bob"),
        false,
        true,
    )
    .unwrap_err();
    let msg = err.message();
    assert!(
        msg.starts_with("Apply failed with 2 conflicts: conflicts with \"alice\":"),
        "{msg}"
    );
    assert!(msg.contains("- .spec.replicas"), "{msg}");
    assert!(
        msg.contains(".spec.template.spec.containers[name=\"web\"].image"),
        "{msg}"
    );
    let forced = apply(Some(&a), &deployment("nginx:2", 3), &mgr("bob"), true, true).unwrap();
    assert_eq!(forced["spec"]["replicas"], 3);
    let m = managed(&forced);
    let alice = m.iter().find(|e| e.0 == "alice").unwrap();
    assert!(alice.2.pointer("/f:spec/f:replicas").is_none());
    assert!(alice.2.pointer("/f:metadata/f:labels/f:app").is_some());
}

#[test]
fn fields_an_applier_stops_setting_are_removed_unless_others_own_them() {
    let mut cfg = deployment("nginx", 1);
    cfg["metadata"]["labels"]["tier"] = "front".into();
    let a = apply(None, &cfg, &mgr("alice"), false, true).unwrap();
    let b = apply(
        Some(&a),
        &deployment("nginx", 1),
        &mgr("alice"),
        false,
        true,
    )
    .unwrap();
    assert_eq!(b["metadata"]["labels"], json!({"app": "web"}));
    // Someone else's update keeps its field alive when alice drops it.
    let mut c = b.clone();
    c["metadata"]["labels"]["team"] = "x".into();
    let mut c2 = c.clone();
    record_update(Some(&b), &mut c2, &mgr("kubectl-label"), true);
    let mut cfg2 = deployment("nginx", 1);
    cfg2["metadata"]["labels"]["team"] = "x".into();
    let d = apply(Some(&c2), &cfg2, &mgr("alice"), false, true).unwrap();
    let e = apply(
        Some(&d),
        &deployment("nginx", 1),
        &mgr("alice"),
        false,
        true,
    )
    .unwrap();
    assert_eq!(e["metadata"]["labels"]["team"], "x");
}

#[test]
fn an_update_takes_the_fields_it_changes() {
    let a = apply(None, &deployment("nginx", 1), &mgr("alice"), false, true).unwrap();
    let mut b = a.clone();
    b["spec"]["replicas"] = 5.into();
    record_update(Some(&a), &mut b, &mgr("kubectl-scale"), true);
    let m = managed(&b);
    let scale = m.iter().find(|e| e.0 == "kubectl-scale").unwrap();
    assert_eq!(scale.2, json!({"f:spec": {"f:replicas": {}}}));
    let alice = m.iter().find(|e| e.0 == "alice").unwrap();
    assert!(alice.2.pointer("/f:spec/f:replicas").is_none());
    // Now alice's apply of replicas=1 conflicts with the Update entry.
    let err = apply(
        Some(&b),
        &deployment("nginx", 1),
        &mgr("alice"),
        false,
        true,
    )
    .unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-scale\" using v1: .spec.replicas"
    );
}

#[test]
fn user_agents_name_managers() {
    assert_eq!(
        from_user_agent(Some("kubectl/v1.32.0 (linux/amd64) kubernetes/abc")),
        "kubectl"
    );
    assert_eq!(from_user_agent(None), "unknown");
}
