use serde_json::json;

use super::*;

fn deployment(replicas: i32, image: &str, strategy: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d", "uid": "d1", "generation": 1},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "strategy": strategy,
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}}}}))
    .unwrap()
}

/// The ReplicaSet the Deployment would create, with `replicas` and `available` of them.
fn rs_for(d: &Deployment, rev: i64, replicas: i32, available: i32) -> ReplicaSet {
    let plan = plan(d, &[]);
    let mut v = plan.create.unwrap();
    v["metadata"]["uid"] = format!("rs-{rev}").into();
    v["metadata"]["annotations"][ANN_REVISION] = rev.to_string().into();
    v["spec"]["replicas"] = replicas.into();
    v["status"] =
        json!({"replicas": replicas, "readyReplicas": available, "availableReplicas": available});
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_new_template_gets_a_hashed_replica_set_of_the_next_revision() {
    let d = deployment(3, "nginx:1", json!({}));
    let p = plan(&d, &[]);
    let rs = p.create.unwrap();
    let name = rs["metadata"]["name"].as_str().unwrap();
    let hash = rs["spec"]["template"]["metadata"]["labels"][LABEL_HASH]
        .as_str()
        .unwrap();
    assert_eq!(name, format!("web-{hash}"));
    assert_eq!(rs["spec"]["selector"]["matchLabels"][LABEL_HASH], hash);
    assert_eq!(rs["metadata"]["annotations"][ANN_REVISION], "1");
    assert_eq!(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
    assert_eq!(
        plan(&d, &[]).create.unwrap()["metadata"]["name"],
        name,
        "stable hash"
    );
}

#[test]
fn rolling_update_surges_then_scales_the_old_down_as_pods_become_available() {
    // 4 replicas, 25 %: surge 1, unavailable 1.
    let old_d = deployment(4, "nginx:1", json!({}));
    let old = rs_for(&old_d, 1, 4, 4);
    let d = deployment(4, "nginx:2", json!({}));
    let new0 = rs_for(&d, 2, 0, 0);
    let p = plan(&d, &[&old, &new0]);
    assert!(
        p.scale.contains(&(new0.metadata.name.clone().unwrap(), 1)),
        "{:?}",
        p.scale
    );
    assert!(
        p.scale.contains(&(old.metadata.name.clone().unwrap(), 3)),
        "{:?}",
        p.scale
    );
    // New pods not yet available: the old keep what availability needs.
    let new1 = rs_for(&d, 2, 1, 0);
    let old3 = rs_for(&old_d, 1, 3, 3);
    let p = plan(&d, &[&old3, &new1]);
    assert!(
        p.scale.contains(&(new1.metadata.name.clone().unwrap(), 2)),
        "{:?}",
        p.scale
    );
    assert!(
        !p.scale
            .iter()
            .any(|(n, _)| Some(n) == old3.metadata.name.as_ref()),
        "{:?}",
        p.scale
    );
    // Done: every replica new and available.
    let done = rs_for(&d, 2, 4, 4);
    let gone = rs_for(&old_d, 1, 0, 0);
    let p = plan(&d, &[&gone, &done]);
    assert!(p.scale.is_empty(), "{:?}", p.scale);
    let status = p.status.unwrap();
    assert_eq!(status["updatedReplicas"], 4);
    assert_eq!(status["conditions"][1]["reason"], "NewReplicaSetAvailable");
}

#[test]
fn recreate_scales_the_old_to_zero_before_the_new_comes_up() {
    let r = json!({"type": "Recreate"});
    let old = rs_for(&deployment(2, "nginx:1", r.clone()), 1, 2, 2);
    let d = deployment(2, "nginx:2", r);
    let new = rs_for(&d, 2, 0, 0);
    let p = plan(&d, &[&old, &new]);
    assert_eq!(p.scale, vec![(old.metadata.name.clone().unwrap(), 0)]);
    let old_gone = rs_for(
        &deployment(2, "nginx:1", json!({"type": "Recreate"})),
        1,
        0,
        0,
    );
    let p = plan(&d, &[&old_gone, &new]);
    assert_eq!(p.scale, vec![(new.metadata.name.clone().unwrap(), 2)]);
}

#[test]
fn rollback_to_an_old_template_re_uses_its_replica_set_as_the_newest_revision() {
    let v1 = deployment(1, "nginx:1", json!({}));
    let rs1 = rs_for(&v1, 1, 0, 0);
    let rs2 = rs_for(&deployment(1, "nginx:2", json!({})), 2, 1, 1);
    let p = plan(&v1, &[&rs1, &rs2]);
    assert!(p.create.is_none());
    assert_eq!(p.revision, Some((rs1.metadata.name.clone().unwrap(), 3)));
}

#[test]
fn old_replica_sets_beyond_the_history_limit_go() {
    let d: Deployment = {
        let mut v = serde_json::to_value(deployment(1, "nginx:9", json!({}))).unwrap();
        v["spec"]["revisionHistoryLimit"] = 1.into();
        serde_json::from_value(v).unwrap()
    };
    let olds: Vec<ReplicaSet> = (1..=3)
        .map(|i| rs_for(&deployment(1, &format!("nginx:{i}"), json!({})), i, 0, 0))
        .collect();
    let new = rs_for(&d, 4, 1, 1);
    let mut all: Vec<&ReplicaSet> = olds.iter().collect();
    all.push(&new);
    let p = plan(&d, &all);
    assert_eq!(p.delete.len(), 2);
    assert_eq!(
        p.delete[0],
        olds[0].metadata.name.clone().unwrap(),
        "oldest first"
    );
}

#[test]
fn no_progress_within_the_deadline_is_reported_as_kubectl_expects() {
    let mut d = deployment(2, "nginx:1", json!({}));
    let rs = rs_for(&d, 1, 2, 0);
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(60);
    let long_ago = "2020-01-01T00:00:00Z";
    d.status = Some(
        serde_json::from_value(json!({"replicas": 2, "updatedReplicas": 2, "readyReplicas": 0,
            "availableReplicas": 0, "conditions": [{"type": "Progressing", "status": "True",
            "reason": "ReplicaSetUpdated", "lastUpdateTime": long_ago, "lastTransitionTime": long_ago}]}))
        .unwrap(),
    );
    let status = plan(&d, &[&rs]).status.unwrap();
    let progressing = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap();
    assert_eq!(progressing["status"], "False");
    assert_eq!(progressing["reason"], "ProgressDeadlineExceeded");
    // Progress resets it.
    let moved = rs_for(&d, 1, 2, 1);
    let status = plan(&d, &[&moved]).status.unwrap();
    assert!(
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Progressing" && c["reason"] == "ReplicaSetUpdated")
    );
    // Paused: no deadline.
    d.spec.as_mut().unwrap().paused = Some(true);
    let status = plan(&d, &[&rs]).status;
    assert!(status.is_none_or(|s| !s.to_string().contains("ProgressDeadlineExceeded")));
}
