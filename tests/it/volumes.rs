//! Volumes, as kube-scheduler places them: `koord explain schedule` on a snapshot with a
//! local `WaitForFirstConsumer` PV, a zoned PV, a missing claim and a ReplicaSet (default
//! topology spreading) gives kube-scheduler's answers and words; the live scheduler agrees,
//! and binds the local claim's pod to the node its PV names, writing the PV's `claimRef` at
//! PreBind and binding the pod only once the PV controller (the embedded API server's
//! `pvbinder`) has completed the claim.

use crate::common;

use std::time::Duration;

use common::TestApi;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use koord::scheduler::live::Ev;
use koord::scheduler::live_watch::{Owner, Storage};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

const SNAP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/volume-snapshot.yaml"
);

fn explain() -> Value {
    common::explain_schedule(SNAP)
}

#[test]
fn explain_places_claims_where_their_volumes_are() {
    let v = explain();
    let pods = v["pods"].as_array().unwrap();
    let by = |name: &str| {
        pods.iter()
            .find(|p| p["pod"] == format!("default/{name}"))
            .unwrap()
            .clone()
    };
    let local = by("local-user");
    assert_eq!(local["node"], "n2", "{local}");
    assert_eq!(local["nodes"]["n1"]["plugin"], "VolumeBinding");
    assert_eq!(
        local["nodes"]["n1"]["reason"],
        "node(s) didn't find available persistent volumes to bind"
    );
    assert_eq!(
        local["volumes"],
        json!({"bind": [{"claim": "default/data-local", "volume": "local-pv"}], "provision": []})
    );
    let zoned = by("zoned-user");
    assert_eq!(zoned["node"], "n1", "{zoned}");
    assert_eq!(zoned["nodes"]["n2"]["plugin"], "VolumeZone");
    assert_eq!(
        zoned["nodes"]["n2"]["reason"],
        "node(s) had no available volume zone"
    );
    let third = by("web-5d9-c");
    assert_eq!(third["node"], "n2", "{third}");
    let spread = |n: &str| {
        third["nodes"][n]["scores"]["PodTopologySpread"]
            .as_i64()
            .unwrap()
    };
    assert!(spread("n2") > spread("n1"), "{third}");
    let orphan = by("orphan");
    assert!(orphan["node"].is_null(), "{orphan}");
    for (_, n) in orphan["nodes"].as_object().unwrap() {
        assert_eq!(
            n["reason"], r#"persistentvolumeclaim "nope" not found"#,
            "{n}"
        );
    }
}

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The snapshot's objects, created in the API server (statuses as the PV controller
/// would have set them).
async fn create_objects(c: &kube::Client) {
    let text = std::fs::read_to_string(SNAP).unwrap();
    let pp = PostParams::default();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(doc).unwrap();
        let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
        let status = v.get("status").cloned();
        let name = v["metadata"]["name"].as_str().unwrap().to_string();
        match v["kind"].as_str().unwrap() {
            "StorageClass" => drop(
                Api::<StorageClass>::all(c.clone())
                    .create(&pp, &obj(v))
                    .await
                    .unwrap(),
            ),
            "Node" => drop(
                Api::<Node>::all(c.clone())
                    .create(&pp, &obj(v))
                    .await
                    .unwrap(),
            ),
            "PersistentVolume" => {
                let api = Api::<PersistentVolume>::all(c.clone());
                api.create(&pp, &obj(v)).await.unwrap();
                let s = json!({"status": status});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(s))
                    .await
                    .unwrap();
            }
            "PersistentVolumeClaim" => {
                let api = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
                api.create(&pp, &obj(v)).await.unwrap();
            }
            "ReplicaSet" => drop(
                Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(c.clone(), ns)
                    .create(&pp, &obj(v))
                    .await
                    .unwrap(),
            ),
            "Pod" => drop(
                Api::<Pod>::namespaced(c.clone(), ns)
                    .create(&pp, &obj(v))
                    .await
                    .unwrap(),
            ),
            k => panic!("unexpected kind {k}"),
        }
    }
}

/// Every object the scheduler reads, applied as its watches would.
async fn feed(s: &mut koord::scheduler::live::Scheduler, c: &kube::Client) {
    for n in Api::<Node>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
    {
        s.apply(Ev::Node(Event::Apply(n)));
    }
    for o in Api::<StorageClass>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
    {
        s.apply(Ev::Storage(Box::new(Storage::Class(Event::Apply(o)))));
    }
    for o in Api::<PersistentVolume>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
    {
        s.apply(Ev::Storage(Box::new(Storage::Pv(Event::Apply(o)))));
    }
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default");
    for o in claims.list(&Default::default()).await.unwrap() {
        s.apply(Ev::Storage(Box::new(Storage::Pvc(Event::Apply(o)))));
    }
    let sets = Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(c.clone(), "default");
    for o in sets.list(&Default::default()).await.unwrap() {
        s.apply(Ev::Owner(Box::new(Owner::ReplicaSet(Event::Apply(o)))));
    }
    let pods = Api::<Pod>::namespaced(c.clone(), "default");
    for o in pods.list(&Default::default()).await.unwrap() {
        let name = o.metadata.name.as_deref().unwrap_or_default();
        if name == "local-user" || name.starts_with("web-") {
            s.apply(Ev::Pod(Event::Apply(o)));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_scheduler_prebinds_the_local_pv_then_binds_the_pod() {
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    create_objects(&c).await;
    let cfg = koord::scheduler::config::default_config().unwrap();
    let leader = koord::kernel::lease::Leadership::always();
    let mut s = koord::scheduler::live::Scheduler::new(c.clone(), &cfg, leader).unwrap();
    feed(&mut s, &c).await;
    assert!(s.schedule_one() && s.schedule_one());
    assert_eq!(
        s.cluster.placement("default/web-5d9-c"),
        Some("n2"),
        "spread from its siblings"
    );
    assert_eq!(
        s.cluster.placement("default/local-user"),
        Some("n2"),
        "assumed on the PV's node"
    );
    let taken = s.cluster.volumes.pv("local-pv").unwrap();
    assert!(
        taken.spec.as_ref().unwrap().claim_ref.is_some(),
        "the PV is taken in the cache before the API shows it"
    );
    tokio::time::timeout(Duration::from_secs(30), s.settle())
        .await
        .expect("binding cycle finished");
    let written = Api::<PersistentVolume>::all(c.clone())
        .get("local-pv")
        .await
        .unwrap();
    let r = written.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
    let claim = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default")
        .get("data-local")
        .await
        .unwrap();
    assert_eq!(r.name.as_deref(), Some("data-local"));
    assert_eq!(r.uid, claim.metadata.uid, "claimRef names the claim by uid");
    assert_eq!(
        written.metadata.annotations.as_ref().unwrap()["pv.kubernetes.io/bound-by-controller"],
        "yes"
    );
    let pod = Api::<Pod>::namespaced(c.clone(), "default")
        .get("local-user")
        .await
        .unwrap();
    assert_eq!(
        pod.spec.unwrap().node_name.as_deref(),
        Some("n2"),
        "bound after the claim was complete"
    );
    let explained = explain();
    let local = explained["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pod"] == "default/local-user")
        .unwrap()["node"]
        .clone();
    assert_eq!(local, "n2", "explain agrees with the live scheduler");
    api.stop().await;
}

/// kube's storage object in-use protection: a claim gets `kubernetes.io/pvc-protection`
/// when created; deleted while a scheduled pod mounts it, it stays (Terminating) until
/// the pod is gone, then goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_in_use_stays_until_its_pod_is_gone() {
    use kube::api::DeleteParams;
    let api = TestApi::start().await;
    let c = api.client.clone();
    let nodes: Api<Node> = Api::all(c.clone());
    let node = json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node).unwrap(),
        )
        .await
        .unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), "default");
    let claim = json!({"metadata": {"name": "held"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}});
    let made = claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(claim).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        made.metadata.finalizers.as_deref(),
        Some(&["kubernetes.io/pvc-protection".to_string()][..])
    );
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod = json!({"metadata": {"name": "holder"}, "spec": {"nodeName": "n1",
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "held"}}]}});
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    claims
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = claims
        .get_opt("held")
        .await
        .unwrap()
        .expect("held by its pod");
    assert!(still.metadata.deletion_timestamp.is_some());
    pods.delete("holder", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let gone = async {
        while claims.get_opt("held").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(15), gone)
        .await
        .expect("the claim goes once no pod uses it");
}
