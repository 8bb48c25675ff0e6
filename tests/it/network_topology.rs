//! Network-topology-aware gangs end to end, as Koordinator's chart runs them: the real
//! `koord --role=scheduler` with the chart's `koord-scheduler-config` (Coscheduling's
//! `awareNetworkTopology`) and `--enable-network-topology-manager`, eight 16-CPU nodes
//! labelled with spines and blocks, Koordinator's `FakeClusterNetworkTopology` as the
//! ClusterNetworkTopology `default`. A gang of four 16-CPU pods preferring to gather by
//! block and spine is placed whole in spine s1 as Koordinator plans it
//! (`TestPodGroupManager_NetworkTopology`, "scheduled, prefer gather"); one that must
//! gather in a block but needs three nodes is refused with Koordinator's message; the
//! tree's status is written; `koord explain schedule` plans the same.

use crate::common;
use crate::quota::node_of;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use common::{Koord, TestApi, eventually, free_port, kubeconfig};
use k8s_openapi::api::core::v1::{Node, Pod};
use koord::api::quota::PodGroup;
use koord::api::scheduling::network_topology::ClusterNetworkTopology;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

const SPINE: &str = "network.topology.nvidia.com/spine";
const BLOCK: &str = "network.topology.nvidia.com/block";

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// node-8, node-1 in s1/b1; node-7, node-2 in s1/b2; node-6, node-3 in s2/b3; node-5,
/// node-4 in s2/b4 — as the Go test lists them.
fn nodes() -> Vec<Value> {
    let place = [
        ("node-8", "s1", "b1"),
        ("node-1", "s1", "b1"),
        ("node-7", "s1", "b2"),
        ("node-2", "s1", "b2"),
        ("node-6", "s2", "b3"),
        ("node-3", "s2", "b3"),
        ("node-5", "s2", "b4"),
        ("node-4", "s2", "b4"),
    ];
    place
        .iter()
        .map(|(n, s, b)| {
            let alloc = json!({"cpu": "16", "memory": "64Gi", "pods": "110"});
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n, "labels": {SPINE: s, BLOCK: b, "kubernetes.io/hostname": n}},
                "status": {"allocatable": alloc, "capacity": alloc,
                    "conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .collect()
}

fn topology() -> Value {
    json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": [
            {"labelKey": [SPINE], "topologyLayer": "SpineLayer"},
            {"labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"}]}})
}

fn pod_group(name: &str, min: i32, spec: &str) -> Value {
    json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"gang.scheduling.koordinator.sh/network-topology-spec": spec}},
        "spec": {"minMember": min, "scheduleTimeoutSeconds": 60}})
}

fn member(name: &str, group: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default",
            "labels": {"pod-group.scheduling.sigs.k8s.io": group}},
        "spec": {"schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "16"}}}]}})
}

const PREFER: &str = r#"{"gatherStrategy":[{"layer":"BlockLayer","strategy":"PreferGather"},{"layer":"SpineLayer","strategy":"PreferGather"}]}"#;
const MUST_BLOCK: &str = r#"{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}"#;

fn scheduler(dir: &std::path::Path, port: u16, config: &std::path::Path) -> Koord {
    scheduler_with(
        dir,
        port,
        config,
        &format!("127.0.0.1:{}", free_port()),
        &[],
    )
}

fn scheduler_with(
    dir: &std::path::Path,
    port: u16,
    config: &std::path::Path,
    admin: &str,
    extra: &[&str],
) -> Koord {
    let kc = kubeconfig(dir, port);
    let config = format!("--config={}", config.display());
    let mut args = vec![
        "--role=scheduler",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--admin-addr",
        admin,
        "--data-dir",
        dir.to_str().unwrap(),
        &config,
        "--enable-network-topology-manager=true",
    ];
    args.extend(extra);
    Koord::start(
        &args,
        &[("KOORD_COMMON__LOG_LEVEL", "koord::scheduler=debug,info")],
        dir,
    )
}

async fn create(c: &kube::Client, docs: &[Value]) {
    let pp = PostParams::default();
    for d in docs {
        match d["kind"].as_str().unwrap() {
            "Node" => drop(
                Api::<Node>::all(c.clone())
                    .create(&pp, &obj(d.clone()))
                    .await
                    .unwrap(),
            ),
            "Pod" => drop(
                Api::<Pod>::namespaced(c.clone(), "default")
                    .create(&pp, &obj(d.clone()))
                    .await
                    .unwrap(),
            ),
            "PodGroup" => drop(
                Api::<PodGroup>::namespaced(c.clone(), "default")
                    .create(&pp, &obj(d.clone()))
                    .await
                    .unwrap(),
            ),
            "ClusterNetworkTopology" => drop(
                Api::<ClusterNetworkTopology>::all(c.clone())
                    .create(&pp, &obj(d.clone()))
                    .await
                    .unwrap(),
            ),
            k => panic!("{k}"),
        }
    }
}

/// An API server with the eight nodes and the ClusterNetworkTopology, and its port.
async fn with_topology() -> (TestApi, u16) {
    let port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    let api = TestApi::start_with(opts).await;
    let mut setup = nodes();
    setup.push(topology());
    create(&api.client, &setup).await;
    (api, port)
}

/// Waits until every pod of `want` is bound, then checks each is on its node.
async fn placed_as(pods: &Api<Pod>, want: &[(&str, &str)], koord: &Koord) {
    let placed = eventually(Duration::from_secs(30), || async {
        let mut all = true;
        for (p, _) in want {
            all &= node_of(pods, p).await.is_some();
        }
        all
    })
    .await;
    assert!(placed, "{}", koord.logs());
    for (p, n) in want {
        assert_eq!(node_of(pods, p).await.as_deref(), Some(*n), "{p}");
    }
}

/// Koordinator's `--feature-gates=EnableInlineBatchSchedule=true`: the gang's first member's
/// cycle schedules the whole gang on its plan (one inline batch, counted as a success), with
/// the same placement as member by member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_batch_places_the_whole_gang_in_one_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = with_topology().await;
    let c = api.client.clone();
    let (config, _) = crate::dropin::mount_configs(dir.path());
    let admin = format!("127.0.0.1:{}", free_port());
    let gates = ["--feature-gates=EnableInlineBatchSchedule=true"];
    let koord = scheduler_with(dir.path(), port, &config, &admin, &gates);
    let cnts: Api<ClusterNetworkTopology> = Api::all(c.clone());
    let tree = eventually(Duration::from_secs(20), || async {
        let s = cnts.get("default").await.ok().and_then(|c| c.status);
        s.and_then(|s| s.detail_status)
            .is_some_and(|d| d.len() == 7)
    })
    .await;
    assert!(tree, "no tree:\n{}", koord.logs());
    let mut gang = vec![pod_group("gang-a", 4, PREFER)];
    gang.extend((1..=4).map(|i| member(&format!("pending-pod-{i}"), "gang-a")));
    create(&c, &gang).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let want = [
        ("pending-pod-1", "node-1"),
        ("pending-pod-2", "node-8"),
        ("pending-pod-3", "node-2"),
        ("pending-pod-4", "node-7"),
    ];
    placed_as(&pods, &want, &koord).await;
    let (_, text) = common::http_get(admin.parse().unwrap(), "/metrics").expect("metrics");
    let line = "scheduler_inline_batch_schedule_duration_seconds_count{result=\"success\"} 1";
    assert!(text.contains(line), "{}", koord.logs());
    assert!(!text.contains("result=\"failure\""));
    drop(koord);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_placed_whole_in_its_network_topology() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = with_topology().await;
    let c = api.client.clone();
    let (config, _) = crate::dropin::mount_configs(dir.path());
    let koord = scheduler(dir.path(), port, &config);

    // The tree's status, as Koordinator's tree manager writes it.
    let cnts: Api<ClusterNetworkTopology> = Api::all(c.clone());
    let written = eventually(Duration::from_secs(20), || async {
        let s = cnts.get("default").await.ok().and_then(|c| c.status);
        s.and_then(|s| s.detail_status)
            .is_some_and(|d| d.len() == 7 && d[0].node_num == 8)
    })
    .await;
    assert!(written, "no status:\n{}", koord.logs());

    let mut gang = vec![pod_group("gang-a", 4, PREFER)];
    gang.extend((1..=4).map(|i| member(&format!("pending-pod-{i}"), "gang-a")));
    create(&c, &gang).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let want: BTreeMap<&str, &str> = [
        ("pending-pod-1", "node-1"),
        ("pending-pod-2", "node-8"),
        ("pending-pod-3", "node-2"),
        ("pending-pod-4", "node-7"),
    ]
    .into();
    let pairs: Vec<(&str, &str)> = want.iter().map(|(p, n)| (*p, *n)).collect();
    placed_as(&pods, &pairs, &koord).await;

    // Must gather in one block, but needs three of its two nodes.
    let mut too_big = vec![pod_group("gang-b", 3, MUST_BLOCK)];
    too_big.extend((1..=3).map(|i| member(&format!("big-{i}"), "gang-b")));
    create(&c, &too_big).await;
    let refused = eventually(Duration::from_secs(30), || async {
        crate::quota::unschedulable_reason(&pods, "big-1")
            .await
            .contains("no candidate topology nodes can accommodate job, desiredOfferSlot: 3")
    })
    .await;
    assert!(
        refused,
        "{}\n{}",
        crate::quota::unschedulable_reason(&pods, "big-1").await,
        koord.logs()
    );
    drop(koord);
    api.stop().await;

    // The same placement, explained from a snapshot.
    let mut items = nodes();
    items.push(topology());
    items.push(pod_group("gang-a", 4, PREFER));
    items.extend((1..=4).map(|i| member(&format!("pending-pod-{i}"), "gang-a")));
    let snap = dir.path().join("snap.json");
    std::fs::write(
        &snap,
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(common::koord_bin())
        .args(["explain", "schedule", "-f", snap.to_str().unwrap()])
        .args(["--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (p, n) in &want {
        let placed = v["pods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["pod"] == format!("default/{p}"))
            .unwrap_or_else(|| panic!("{p} in {v}"));
        assert_eq!(placed["node"], *n, "{p}: {placed}");
    }
    let first = v["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["pod"] == "default/pending-pod-1")
        .unwrap();
    assert_eq!(
        first["networkTopology"]["domain"], "SpineLayer/s1",
        "{first}"
    );
    assert!(first.get("inlineBatch").is_none(), "the gate is off");
    let gated = std::process::Command::new(common::koord_bin())
        .args(["explain", "schedule", "-f", snap.to_str().unwrap()])
        .args(["--config", config.to_str().unwrap()])
        .arg("--feature-gates=EnableInlineBatchSchedule=true")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&gated.stdout).unwrap();
    let first = &v["pods"][0];
    assert_eq!(first["pod"], "default/pending-pod-1", "{v}");
    assert_eq!(
        first["inlineBatch"],
        json!([
            "default/pending-pod-2",
            "default/pending-pod-3",
            "default/pending-pod-4"
        ])
    );
    for (p, n) in &want {
        let placed = v["pods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["pod"] == format!("default/{p}"));
        assert_eq!(placed.unwrap()["node"], *n, "{p}");
    }
}
