use super::*;

fn set(replicas: i32, extra: Value) -> StatefulSet {
    let v = json!({
        "metadata": {"name": "db", "namespace": "d", "uid": "u-db", "generation": 1},
        "spec": {
            "replicas": replicas,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        }
    });
    let extra = extra.to_string();
    let v = crate::api::patch::apply(crate::api::patch::PatchType::Merge, &v, extra.as_bytes());
    serde_json::from_value(v.unwrap()).unwrap()
}

fn pod(s: &StatefulSet, ord: i32, phase: &str, is_ready: bool) -> Pod {
    let mut v = pod_for(s, ord, &update_revision(s), None).unwrap();
    v["status"] = json!({"phase": phase,
        "conditions": [{"type": "Ready", "status": if is_ready { "True" } else { "False" }}]});
    serde_json::from_value(v).unwrap()
}

fn created(p: &Plan) -> Vec<String> {
    p.create
        .iter()
        .map(|(p, _)| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn ordered_ready_creates_one_at_a_time_with_its_claims_and_identity() {
    let s = set(3, json!({}));
    let p = plan(&s, &[], &[]);
    assert_eq!(created(&p), ["db-0"]);
    let (first, claims) = &p.create[0];
    assert_eq!(first["spec"]["hostname"], "db-0");
    assert_eq!(first["spec"]["subdomain"], "db");
    assert_eq!(first["metadata"]["labels"][LABEL_POD_NAME], "db-0");
    assert_eq!(first["metadata"]["labels"][LABEL_POD_INDEX], "0");
    assert_eq!(
        first["spec"]["volumes"],
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}])
    );
    assert_eq!(claims[0]["metadata"]["name"], "data-db-0");
    assert_eq!(claims[0]["metadata"]["labels"]["app"], "db");
    assert_eq!(
        first["metadata"]["ownerReferences"][0]["kind"],
        "StatefulSet"
    );

    // db-0 not ready yet: nothing more.
    let p0 = pod(&s, 0, "Running", false);
    assert!(plan(&s, &[&p0], &[]).create.is_empty());
    let p0 = pod(&s, 0, "Running", true);
    assert_eq!(created(&plan(&s, &[&p0], &[])), ["db-1"]);
}

#[test]
fn parallel_creates_all_and_scales_down_all() {
    let s = set(3, json!({"spec": {"podManagementPolicy": "Parallel"}}));
    assert_eq!(created(&plan(&s, &[], &[])), ["db-0", "db-1", "db-2"]);
    let one = set(1, json!({"spec": {"podManagementPolicy": "Parallel"}}));
    let pods: Vec<Pod> = (0..3).map(|o| pod(&s, o, "Pending", false)).collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    assert_eq!(plan(&one, &refs, &[]).delete, ["db-2", "db-1"]);
}

#[test]
fn ordered_scale_down_removes_the_highest_ordinal_first() {
    let s = set(3, json!({}));
    let pods: Vec<Pod> = (0..3).map(|o| pod(&s, o, "Running", true)).collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let one = set(1, json!({}));
    let p = plan(&one, &refs, &[]);
    assert_eq!(p.delete, ["db-2"]);
    assert!(p.create.is_empty());
}

#[test]
fn rolling_update_from_the_top_down_to_the_partition() {
    let old = set(3, json!({}));
    let pods: Vec<Pod> = (0..3).map(|o| pod(&old, o, "Running", true)).collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let new = set(
        3,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:17"}]}}}}),
    );
    assert_eq!(plan(&new, &refs, &[]).delete, ["db-2"]);
    let partitioned = set(
        3,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:17"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 3}}}}),
    );
    assert!(plan(&partitioned, &refs, &[]).delete.is_empty());
    let on_delete = set(
        3,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:17"}]}},
            "updateStrategy": {"type": "OnDelete"}}}),
    );
    assert!(plan(&on_delete, &refs, &[]).delete.is_empty());
    let status = plan(&new, &refs, &[]).status.unwrap();
    assert_eq!(status["updatedReplicas"], 0);
    assert_eq!(status["readyReplicas"], 3);
    assert_eq!(status["updateRevision"], json!(update_revision(&new)));
}

#[test]
fn failed_pods_are_replaced_and_status_settles_on_the_update_revision() {
    let s = set(2, json!({}));
    let p0 = pod(&s, 0, "Failed", false);
    let p = plan(&s, &[&p0], &[]);
    assert_eq!(p.delete, ["db-0"]);
    assert!(p.create.is_empty(), "recreated once gone");
    let pods: Vec<Pod> = (0..2).map(|o| pod(&s, o, "Running", true)).collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let status = plan(&s, &refs, &[]).status.unwrap();
    assert_eq!(status["currentRevision"], status["updateRevision"]);
    assert_eq!(status["currentReplicas"], 2);
    assert_eq!(status["observedGeneration"], 1);
}

#[test]
fn a_pod_below_the_partition_comes_back_at_the_current_revision() {
    let old = set(2, json!({}));
    let mut new = set(
        2,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:17"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}}),
    );
    let current = update_revision(&old);
    new.status =
        Some(serde_json::from_value(json!({"replicas": 2, "currentRevision": current})).unwrap());
    let kept = ControllerRevision {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(current.clone()),
            ..Default::default()
        },
        data: Some(k8s_openapi::apimachinery::pkg::runtime::RawExtension(
            crate::controllers::revisions::data_of(&old.spec.as_ref().unwrap().template),
        )),
        revision: 1,
    };
    // db-0 (below the partition) is missing: it comes back as it was.
    let p1 = pod(&new, 1, "Running", true);
    let p = plan(&new, &[&p1], &[&kept]);
    let (pod0, _) = &p.create[0];
    assert_eq!(pod0["metadata"]["labels"][LABEL_REVISION], json!(current));
    assert_eq!(pod0["spec"]["containers"][0]["image"], "postgres:16");
    // Without the history it can only use the new template.
    let p = plan(&new, &[&p1], &[]);
    assert_eq!(
        p.create[0].0["spec"]["containers"][0]["image"],
        "postgres:17"
    );
}

#[test]
fn claim_owners_follow_the_retention_policy() {
    let claim = |ord: i32| -> PersistentVolumeClaim {
        serde_json::from_value(
            json!({"metadata": {"name": format!("data-db-{ord}"), "namespace": "d"}}),
        )
        .unwrap()
    };
    let (c0, c1) = (claim(0), claim(1));
    let owners = |policy: Value| {
        let s = set(
            1,
            json!({"spec": {"persistentVolumeClaimRetentionPolicy": policy}}),
        );
        let mut pods: Vec<Pod> = (0..2).map(|o| pod(&s, o, "Running", true)).collect();
        pods[1].metadata.uid = Some("pod-1".into());
        let refs: Vec<&Pod> = pods.iter().collect();
        claim_owners(&s, &refs, &[&c0, &c1])
            .into_iter()
            .map(|(n, o)| {
                let kinds: Vec<String> = o
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["kind"].as_str().unwrap().to_string())
                    .collect();
                format!("{n}:{}", kinds.join(","))
            })
            .collect::<Vec<_>>()
    };
    let retain = json!({"whenDeleted": "Retain", "whenScaled": "Retain"});
    assert!(owners(retain).is_empty());
    let on_delete = json!({"whenDeleted": "Delete", "whenScaled": "Retain"});
    assert_eq!(
        owners(on_delete),
        ["data-db-0:StatefulSet", "data-db-1:StatefulSet"]
    );
    // db-1 is beyond replicas 1: its claim goes with its pod.
    let on_scale = json!({"whenDeleted": "Retain", "whenScaled": "Delete"});
    assert_eq!(owners(on_scale), ["data-db-1:Pod"]);
    let both = json!({"whenDeleted": "Delete", "whenScaled": "Delete"});
    assert_eq!(owners(both), ["data-db-0:StatefulSet", "data-db-1:Pod"]);
}
