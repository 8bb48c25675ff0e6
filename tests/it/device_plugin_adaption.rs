//! DevicePluginAdaption in the live scheduler (gate on): a Cambricon GPU share is bound with
//! the annotations Cambricon's device plugin reads and the node locked for it; a second
//! share on that node waits (retried with backoff) until the plugin releases the lock.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::TestApi;

use k8s_openapi::api::core::v1::{Node, Pod};
use koord::api::scheduling::device::Device;
use koord::scheduler::features::SCHEDULER_GATES;
use koord::scheduler::live::{Ev, Scheduler};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher::Event::Apply;
use serde_json::json;

const LOCK: &str = "cambricon.com/dsmlu.lock";

fn scheduler(c: &kube::Client) -> Scheduler {
    let mut cfg = koord::scheduler::config::default_config().unwrap();
    let user = BTreeMap::from([("DevicePluginAdaption".to_string(), true)]);
    cfg.set_gates(&SCHEDULER_GATES.from_user(&user));
    Scheduler::new(c.clone(), &cfg, koord::kernel::lease::Leadership::always()).unwrap()
}

fn share(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": "1",
                "koordinator.sh/gpu-core": "5", "koordinator.sh/gpu-memory": "1Gi"}}}]}}))
    .unwrap()
}

async fn node_of(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name).await.unwrap().spec.unwrap().node_name
}

/// Node `mlu` carries Cambricon's lock naming `pod`.
async fn assert_locked_by(nodes: &Api<Node>, pod: &str) {
    let node = nodes.get("mlu").await.unwrap();
    let held = node.metadata.annotations.unwrap_or_default();
    let value = held.get(LOCK).map(String::as_str).unwrap_or_default();
    assert!(value.ends_with(&format!(",default,{pod}")), "{held:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cambricon_share_locks_its_node_until_the_plugin_releases_it() {
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let mut s = scheduler(&c);
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "mlu", "labels": {"kubernetes.io/hostname": "mlu"}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110",
            "koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
            "koordinator.sh/gpu-memory-ratio": "100"}}}))
    .unwrap();
    let nodes: Api<Node> = Api::all(c.clone());
    s.apply(Ev::Node(Apply(nodes.create(&pp, &node).await.unwrap())));
    let device: Device = serde_json::from_value(json!({
        "apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
        "metadata": {"name": "mlu", "labels": {"node.koordinator.sh/gpu-vendor": "cambricon"}},
        "spec": {"devices": [{"type": "gpu", "minor": 0, "id": "MLU-0", "health": true,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                "koordinator.sh/gpu-memory-ratio": "100"}}]}}))
    .unwrap();
    s.apply(Ev::Device(Apply(device)));
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for name in ["a", "b"] {
        s.apply(Ev::Pod(Apply(
            pods.create(&pp, &share(name)).await.unwrap(),
        )));
    }

    assert!(s.schedule_one());
    s.settle().await;
    assert!(s.schedule_one());
    s.settle().await;
    let bound: Vec<(&str, Option<String>)> = vec![
        ("a", node_of(&pods, "a").await),
        ("b", node_of(&pods, "b").await),
    ];
    let (first, second) = match bound[0].1 {
        Some(_) => ("a", "b"),
        None => ("b", "a"),
    };
    assert!(
        bound.iter().filter(|(_, n)| n.is_some()).count() == 1,
        "one share at a time on a locked node: {bound:?}"
    );
    let ann = pods.get(first).await.unwrap().metadata.annotations.unwrap();
    assert_eq!(ann["CAMBRICON_DSMLU_PROFILE"], "0_5_4", "{ann:?}");
    assert_eq!(ann["CAMBRICON_DSMLU_ASSIGHED"], "false");
    assert_eq!(ann["scheduling.koordinator.sh/gpu-minors"], "0");
    let stamp = &ann["scheduling.koordinator.sh/bind-timestamp"];
    assert!(stamp.parse::<i64>().is_ok_and(|t| t > 0), "{stamp}");
    assert_locked_by(&nodes, first).await;

    // Cambricon's plugin allocated for the first pod and removes the lock.
    let released = nodes
        .patch(
            "mlu",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {LOCK: null}}})),
        )
        .await
        .unwrap();
    s.apply(Ev::Node(Apply(released)));
    let mut placed = None;
    for _ in 0..60 {
        // What the run loop does each turn: pods whose backoff ended go back to active.
        s.queue.flush(std::time::Instant::now());
        if s.schedule_one() {
            s.settle().await;
        }
        placed = node_of(&pods, second).await;
        if placed.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        placed.as_deref(),
        Some("mlu"),
        "retried once the lock is gone"
    );
    assert_locked_by(&nodes, second).await;
    api.stop().await;
}
