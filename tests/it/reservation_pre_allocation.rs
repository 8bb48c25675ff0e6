//! Reservation pre-allocation end to end: the embedded API server with a simulated 8-CPU
//! node and the real `koord --role=scheduler`. A running training pod fills the node; a
//! Restricted Reservation with `preAllocation` for training pods is placed there anyway by
//! taking that pod over (written `reservation-allocated`), so when the pod finishes the
//! reservation keeps its CPUs: a batch pod still cannot have them, the next training pod
//! can.

use crate::common;
use crate::quota::node_of;
use crate::reservation::{phase, pod};

use std::time::Duration;

use common::eventually;
use k8s_openapi::api::core::v1::Pod;
use koord::api::scheduling::reservation::Reservation;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

fn pre_allocating(name: &str, cpu: &str, app: &str) -> Reservation {
    serde_json::from_value(json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {"ttl": "1h", "preAllocation": true, "allocatePolicy": "Restricted", "allocateOnce": false,
            "owners": [{"labelSelector": {"matchLabels": {"app": app}}}],
            "template": {"metadata": {"namespace": "default"}, "spec": {"schedulerName": "koord-scheduler",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}}))
    .unwrap()
}

async fn allocated_to(pods: &Api<Pod>, name: &str) -> Option<String> {
    let p = pods.get(name).await.ok()?;
    p.metadata
        .annotations?
        .get("scheduling.koordinator.sh/reservation-allocated")
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_takes_over_a_running_pod_and_keeps_its_cpus() {
    let (_dir, mut api, sched, ..) = crate::reservation::one_node().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let rs: Api<Reservation> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");

    pods.create(&pp, &pod("train-1", "8", "train"))
        .await
        .unwrap();
    let bound = eventually(Duration::from_secs(20), || async {
        node_of(&pods, "train-1").await.is_some()
    })
    .await;
    assert!(bound, "{}", sched.logs());

    // The node is full, yet the reservation is placed by taking train-1 over.
    rs.create(&pp, &pre_allocating("train", "8", "train"))
        .await
        .unwrap();
    let available = eventually(Duration::from_secs(20), || async {
        phase(&rs, "train").await == ("Available".into(), "sim-node-0".into())
    })
    .await;
    assert!(
        available,
        "{:?}\n{}",
        phase(&rs, "train").await,
        sched.logs()
    );
    let uid = rs.get("train").await.unwrap().metadata.uid.unwrap();
    let want = json!({"name": "train", "uid": uid}).to_string();
    assert_eq!(allocated_to(&pods, "train-1").await, Some(want));

    // train-1 finishes: the CPUs stay reserved for training pods.
    pods.delete("train-1", &DeleteParams::default())
        .await
        .unwrap();
    crate::reservation::stays_pending(&pods, &pod("batch", "2", "batch"), &sched).await;
    pods.create(&pp, &pod("train-2", "8", "train"))
        .await
        .unwrap();
    let placed = eventually(Duration::from_secs(20), || async {
        allocated_to(&pods, "train-2").await.is_some() && node_of(&pods, "train-2").await.is_some()
    })
    .await;
    assert!(placed, "{}", sched.logs());
    drop(sched);
    api.stop().await;
}
