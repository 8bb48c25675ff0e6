//! Preemption as kube-scheduler's DefaultPreemption: `koord explain schedule` nominates the
//! node whose victims no PodDisruptionBudget protects and shows the nomination.

use crate::common;

use serde_json::json;

#[test]
fn explain_nominates_the_node_whose_victims_no_pdb_protects() {
    let snap = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/preemption-pdb-snapshot.yaml"
    );
    let v = common::explain_schedule(snap);
    let urgent = &v["pods"][0];
    assert!(urgent["node"].is_null(), "{urgent}");
    assert_eq!(
        urgent["preemption"],
        json!({"node": "node-b", "victims": ["default/batch-0"]}),
        "node-a's pod is protected by its PDB; without it node-a would win (its victim started later)"
    );
}

/// The live scheduler on the same cluster: it deletes the unprotected victim, leaves the
/// PDB-protected pod alone and binds the preemptor where explain nominated it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_scheduler_spares_the_pdb_protected_pod() {
    use common::{TestApi, eventually};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::Api;
    use kube::api::{Patch, PatchParams, PostParams};
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = TestApi::with_nodes(&["node-a", "node-b"]).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "default");
    let pdb: PodDisruptionBudget =
        obj_of(json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}));
    pdbs.create(&pp, &pdb).await.unwrap();
    // What the disruption controller would report: nothing may go.
    let status = json!({"status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
    pdbs.patch_status("web", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod = |name: &str, app: &str, node: Option<&str>, class: &str, cpu: &str| -> Pod {
        obj_of(
            json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"schedulerName": "koord-scheduler", "nodeName": node, "priorityClassName": class,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}),
        )
    };
    pods.create(
        &pp,
        &pod("web-0", "web", Some("node-a"), "koord-batch", "4"),
    )
    .await
    .unwrap();
    pods.create(
        &pp,
        &pod("batch-0", "batch", Some("node-b"), "koord-batch", "4"),
    )
    .await
    .unwrap();
    let sched = crate::scheduler::start_scheduler(dir.path(), port, &[]);
    let kubelet = crate::scheduler::kubelet_stand_in(pods.clone());
    pods.create(&pp, &pod("urgent", "urgent", None, "koord-prod", "3"))
        .await
        .unwrap();
    let bound = eventually(Duration::from_secs(30), || async {
        pods.get_opt("urgent")
            .await
            .ok()
            .flatten()
            .and_then(|p| p.spec?.node_name)
            .as_deref()
            == Some("node-b")
    })
    .await;
    assert!(bound, "{}", sched.logs());
    kubelet.abort();
    // The victim is gone (the stand-in kubelet removed it once the preemption deleted it).
    let going = |p: Option<Pod>| p.is_none_or(|p| p.metadata.deletion_timestamp.is_some());
    assert!(going(pods.get_opt("batch-0").await.unwrap()), "the victim");
    assert!(
        !going(pods.get_opt("web-0").await.unwrap()),
        "protected by its PDB"
    );
    drop(sched);
    api.stop().await;
}

fn obj_of<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}
