use serde_json::json;

use super::*;

fn rs(replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({"metadata": {"name": "web-abc", "namespace": "d", "uid": "rs1", "generation": 2},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
    .unwrap()
}

fn pod(
    name: &str,
    owner: Option<&str>,
    labels: serde_json::Value,
    node: Option<&str>,
    ready: bool,
) -> Pod {
    let owners = owner.map(|u| json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": u, "controller": true}]));
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "d", "labels": labels,
            "ownerReferences": owners, "creationTimestamp": format!("2026-11-27T00:00:0{}Z", name.len() % 10)},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
    .unwrap()
}

#[test]
fn creates_up_to_replicas_and_adopts_matching_orphans() {
    let orphan = pod("lonely", None, json!({"app": "web"}), Some("n1"), true);
    let other = pod("other", None, json!({"app": "db"}), Some("n1"), true);
    let p = plan(&rs(3), &[&orphan, &other]);
    assert_eq!(p.adopt, vec!["lonely"]);
    assert_eq!(p.create, 2);
    assert!(p.delete.is_empty());
}

#[test]
fn deletes_the_surplus_unscheduled_and_unready_first_and_releases_non_matching() {
    let a = pod("a", Some("rs1"), json!({"app": "web"}), Some("n1"), true);
    let b = pod("b", Some("rs1"), json!({"app": "web"}), None, false);
    let c = pod("c", Some("rs1"), json!({"app": "web"}), Some("n1"), false);
    let moved = pod(
        "moved",
        Some("rs1"),
        json!({"app": "other"}),
        Some("n1"),
        true,
    );
    let p = plan(&rs(1), &[&a, &b, &c, &moved]);
    assert_eq!(p.delete, vec!["b", "c"], "unscheduled, then not ready");
    assert_eq!(p.release, vec!["moved"]);
    let status = p.status.unwrap();
    assert_eq!(status["replicas"], 3);
    assert_eq!(status["readyReplicas"], 1);
    assert_eq!(status["observedGeneration"], 2);
}

#[test]
fn new_pods_are_owned_and_named_after_the_replica_set() {
    let v = pod_from(&rs(1)).unwrap();
    assert_eq!(v["metadata"]["generateName"], "web-abc-");
    assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "rs1");
    assert_eq!(v["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(v["metadata"]["labels"]["app"], "web");
}
