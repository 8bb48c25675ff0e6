//! Arbitration of hand-made PodMigrationJobs by the real `koord --role=descheduler`: two
//! jobs for pods on one node under `maxMigratingPerNode: 1` — exactly one passes (the one
//! whose pod Koordinator's order gives up first: the batch pod before the prod one), the
//! other waits while the first holds the node's slot (its Reservation stays pending: no
//! scheduler runs).

use crate::descheduler::{api_server, obj, start};

use std::time::Duration;

use common::eventually;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use koord::api::scheduling::migration::PodMigrationJob;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::common;

const CONFIG: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  pluginConfig:
  - name: MigrationController
    args: {maxMigratingPerNode: 1, arbitrationArgs: {interval: 200ms}}
"#;

fn passed(j: &PodMigrationJob) -> bool {
    let a = j.metadata.annotations.as_ref();
    a.and_then(|a| a.get("descheduler.koordinator.sh/passed-arbitration"))
        .is_some_and(|v| v == "true")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_per_node_passes_and_the_batch_pod_goes_first() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_server(3).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let rs: ReplicaSet = obj(json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}));
    let uid = Api::<ReplicaSet>::namespaced(c.clone(), "default")
        .create(&pp, &rs)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for (name, class) in [("high", "koord-prod"), ("low", "koord-batch")] {
        let labels = json!({"app": "web", "koordinator.sh/priority-class": class});
        let p: Pod = obj(
            json!({"metadata": {"name": name, "namespace": "default", "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid, "controller": true}]},
            "spec": {"nodeName": "sim-node-0", "schedulerName": "koord-scheduler",
                "containers": [{"name": "c", "image": "x"}]}}),
        );
        pods.create(&pp, &p).await.unwrap();
    }
    let jobs: Api<PodMigrationJob> = Api::all(c.clone());
    for pod in ["high", "low"] {
        let j: PodMigrationJob = obj(
            json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob",
            "metadata": {"name": format!("move-{pod}")},
            "spec": {"podRef": {"namespace": "default", "name": pod}, "mode": "ReservationFirst", "ttl": "5m"}}),
        );
        jobs.create(&pp, &j).await.unwrap();
    }
    let dcfg = dir.path().join("d.yaml");
    std::fs::write(&dcfg, CONFIG).unwrap();
    let koord = start(dir.path(), port, "descheduler", &dcfg, None, "d1");
    let list = || async { jobs.list(&Default::default()).await.unwrap().items };
    let one = eventually(Duration::from_secs(20), || async {
        list().await.iter().any(passed)
    })
    .await;
    assert!(one, "no job passed arbitration\n{}", koord.logs());
    // Several arbitration rounds later the other still waits: the node's one slot is held.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = list().await;
    let through: Vec<&str> = now
        .iter()
        .filter(|j| passed(j))
        .filter_map(|j| j.metadata.name.as_deref())
        .collect();
    assert_eq!(
        through,
        ["move-low"],
        "{:#?}",
        now.iter()
            .map(|j| (&j.metadata.name, &j.status))
            .collect::<Vec<_>>()
    );
    drop(koord);
    api.stop().await;
}
