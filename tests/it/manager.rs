//! The manager against the embedded API server: batch/mid resources on nodes, NodeMetric
//! and NodeSLO lifecycle, ConfigMap edits and breakage, stale metrics, `koord explain`
//! agreeing with the live controller, and leader election between two processes.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Koord, TestApi, eventually, free_port, http_get, kubeconfig};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod};
use koord::api::slo::{NodeMetric, NodeSLO};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const NS: &str = "koordinator-system";
const CM: &str = "slo-controller-config";

async fn api_on(port: u16) -> TestApi {
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    TestApi::start_with(opts).await
}

pub fn manager(dir: &std::path::Path, api_port: u16, name: &str) -> (Koord, SocketAddr) {
    manager_with(dir, api_port, name, &[])
}

fn manager_with(
    dir: &std::path::Path,
    api_port: u16,
    name: &str,
    extra: &[&str],
) -> (Koord, SocketAddr) {
    manager_env(dir, api_port, name, extra, &[])
}

/// A manager (resync 2 s, lease 4 s) with more arguments and environment (fault points).
pub(crate) fn manager_env(
    dir: &std::path::Path,
    api_port: u16,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Koord, SocketAddr) {
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let data = dir.join(name);
    std::fs::create_dir_all(&data).unwrap();
    let kc = kubeconfig(&data, api_port);
    let admin_s = admin.to_string();
    let mut args = vec![
        "--role=manager",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--admin-addr",
        &admin_s,
        "--data-dir",
        data.to_str().unwrap(),
        "--node-name",
        name,
    ];
    args.extend_from_slice(extra);
    let base = [
        ("KOORD_MANAGER__RESYNC_SECONDS", "2"),
        (
            "KOORD_MANAGER__LEADER_ELECTION__LEASE_DURATION_SECONDS",
            "4",
        ),
        (
            "KOORD_MANAGER__LEADER_ELECTION__RENEW_DEADLINE_SECONDS",
            "3",
        ),
        ("KOORD_MANAGER__LEADER_ELECTION__RETRY_PERIOD_SECONDS", "1"),
    ];
    let koord = Koord::start(&args, &[&base[..], env].concat(), &data);
    (koord, admin)
}

fn now_rfc3339(offset_secs: i64) -> String {
    (k8s_openapi::jiff::Timestamp::now()
        + k8s_openapi::jiff::SignedDuration::from_secs(offset_secs))
    .to_string()
}

async fn seed(client: &kube::Client, colocation: Value) {
    let pp = PostParams::default();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    let _ = Api::<Namespace>::all(client.clone()).create(&pp, &ns).await;
    set_config(
        client,
        colocation,
        json!({"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 55}}),
    )
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": "n1", "labels": {"pool": "a"}}}))
            .unwrap();
    nodes.create(&pp, &node).await.unwrap();
    let status = json!({"status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
        "allocatable": {"cpu": "15", "memory": "62Gi", "pods": "110"}}});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod =
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]}}))
        .unwrap();
    pods.create(&pp, &pod).await.unwrap();
    pods.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let metrics: Api<NodeMetric> = Api::all(client.clone());
    let m: NodeMetric = serde_json::from_value(json!({"apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric", "metadata": {"name": "n1"}, "spec": {}}))
    .unwrap();
    let _ = metrics.create(&pp, &m).await;
    report(client, 0).await;
}

/// Writes the koordlet's part: a NodeMetric status `age_secs` old.
async fn report(client: &kube::Client, age_secs: i64) {
    let usage = |cpu: &str, mem: &str| json!({"resources": {"cpu": cpu, "memory": mem}});
    let status = json!({"status": {"updateTime": now_rfc3339(-age_secs),
        "nodeMetric": {"nodeUsage": usage("6", "20Gi"), "systemUsage": usage("500m", "1Gi")},
        "podsMetric": [{"namespace": "default", "name": "web", "podUsage": usage("2", "6Gi"), "priority": "koord-prod", "qos": "LS"}]}});
    Api::<NodeMetric>::all(client.clone())
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

async fn set_config(client: &kube::Client, colocation: Value, threshold: Value) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let data = json!({"colocation-config": colocation_text(&colocation), "resource-threshold-config": threshold.to_string()});
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": CM, "namespace": NS}, "data": data}))
            .unwrap();
    if cms.create(&PostParams::default(), &cm).await.is_err() {
        cms.patch(
            CM,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": data})),
        )
        .await
        .unwrap();
    }
}

fn colocation_text(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

async fn allocatable(client: &kube::Client, res: &str) -> Option<String> {
    let n = Api::<Node>::all(client.clone()).get("n1").await.ok()?;
    n.status?.allocatable?.get(res).map(|q| q.0.clone())
}

async fn wait_alloc(client: &kube::Client, res: &str, want: Option<&str>) -> bool {
    eventually(Duration::from_secs(15), || async {
        allocatable(client, res).await.as_deref() == want
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noderesource_nodeslo_nodemetric_follow_config_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = api_on(port).await;
    let c = api.client.clone();
    seed(&c, json!({"enable": true})).await;
    let (mgr, _admin) = manager(dir.path(), port, "m1");

    // 16000 - 16000*40% - max(500, 1000 kubelet) - 2000 used = 6600
    // 64Gi - 64Gi*35% - max(1Gi, 2Gi) - 6Gi = 36077725287
    assert!(
        wait_alloc(&c, "kubernetes.io/batch-cpu", Some("6600")).await,
        "{}",
        mgr.logs()
    );
    assert_eq!(
        allocatable(&c, "kubernetes.io/batch-memory")
            .await
            .as_deref(),
        Some("36077725287")
    );
    assert!(allocatable(&c, "kubernetes.io/mid-cpu").await.is_some());
    // The NodeSLO is written in the same pass as the status, not necessarily before it.
    let slos = Api::<NodeSLO>::all(c.clone());
    let made = eventually(Duration::from_secs(10), || async {
        slos.get_opt("n1").await.ok().flatten().is_some()
    })
    .await;
    assert!(made, "{}", mgr.logs());
    let slo = slos.get("n1").await.unwrap();
    assert_eq!(
        slo.spec
            .resource_used_threshold_with_be
            .unwrap()
            .cpu_suppress_threshold_percent,
        Some(55)
    );

    // The same inputs through `koord explain` give the same numbers.
    let explained = explain(&c, dir.path()).await;
    let node = &explained["nodes"][0];
    assert_eq!(
        node["allocatable"]["kubernetes.io/batch-cpu"], 6600,
        "{explained}"
    );
    assert_eq!(
        node["allocatable"]["kubernetes.io/batch-memory"],
        36077725287i64
    );
    let live_mid = allocatable(&c, "kubernetes.io/mid-memory").await.unwrap();
    assert_eq!(
        node["allocatable"]["kubernetes.io/mid-memory"].to_string(),
        live_mid
    );

    // ConfigMap edits reach node allocatable and NodeSLO.
    set_config(
        &c,
        json!({"enable": true, "cpuReclaimThresholdPercent": 80}),
        json!({"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 45}}),
    )
    .await;
    assert!(
        wait_alloc(&c, "kubernetes.io/batch-cpu", Some("9800")).await,
        "{}",
        mgr.logs()
    );
    let slos: Api<NodeSLO> = Api::all(c.clone());
    assert!(
        eventually(Duration::from_secs(10), || async {
            slos.get("n1").await.ok().and_then(|s| {
                s.spec
                    .resource_used_threshold_with_be?
                    .cpu_suppress_threshold_percent
            }) == Some(45)
        })
        .await
    );

    // A broken ConfigMap keeps the last good values and says so in a Warning Event.
    set_config(
        &c,
        json!("{not json"),
        json!({"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 45}}),
    )
    .await;
    let events: Api<Event> = Api::namespaced(c.clone(), NS);
    assert!(
        eventually(Duration::from_secs(10), || async {
            events.list(&Default::default()).await.is_ok_and(|l| {
                l.items.iter().any(|e| {
                    e.reason.as_deref() == Some("ColocationCfgUnmarshalFailed")
                        && e.type_.as_deref() == Some("Warning")
                })
            })
        })
        .await,
        "{}",
        mgr.logs()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        allocatable(&c, "kubernetes.io/batch-cpu").await.as_deref(),
        Some("9800")
    );

    // A stale NodeMetric removes batch and mid resources.
    report(&c, 16 * 60).await;
    assert!(
        wait_alloc(&c, "kubernetes.io/batch-cpu", None).await,
        "{}",
        mgr.logs()
    );
    assert_eq!(allocatable(&c, "kubernetes.io/mid-cpu").await, None);

    // Deleting the node deletes its NodeMetric and NodeSLO.
    Api::<Node>::all(c.clone())
        .delete("n1", &Default::default())
        .await
        .unwrap();
    let metrics: Api<NodeMetric> = Api::all(c.clone());
    assert!(
        eventually(Duration::from_secs(10), || async {
            metrics.get_opt("n1").await.is_ok_and(|m| m.is_none())
                && slos.get_opt("n1").await.is_ok_and(|s| s.is_none())
        })
        .await
    );
    drop(mgr);
    api.stop().await;
}

/// Dumps the objects as one `kind: List` and runs `koord explain noderesource` on it.
async fn explain(c: &kube::Client, dir: &std::path::Path) -> Value {
    let mut items: Vec<Value> = Vec::new();
    for n in Api::<Node>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
    {
        items.push(serde_json::to_value(n).unwrap());
    }
    for p in Api::<Pod>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
    {
        items.push(serde_json::to_value(p).unwrap());
    }
    for m in Api::<NodeMetric>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
    {
        items.push(serde_json::to_value(m).unwrap());
    }
    type Nrt = koord::api::topology::NodeResourceTopology;
    for t in Api::<Nrt>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
    {
        items.push(serde_json::to_value(t).unwrap());
    }
    let cm = Api::<ConfigMap>::namespaced(c.clone(), NS)
        .get(CM)
        .await
        .unwrap();
    items.push(serde_json::to_value(cm).unwrap());
    // k8s-openapi types always carry apiVersion/kind; make sure the CRD items do too.
    for i in items.iter_mut().filter(|i| i.get("kind").is_none()) {
        i["kind"] = "NodeMetric".into();
        i["apiVersion"] = "slo.koordinator.sh/v1alpha1".into();
    }
    let list = items;
    let file = dir.join("snapshot.json");
    std::fs::write(
        &file,
        json!({"apiVersion": "v1", "kind": "List", "items": list}).to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(common::koord_bin())
        .args([
            "explain",
            "noderesource",
            "-f",
            file.to_str().unwrap(),
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn metric(admin: SocketAddr, line_prefix: &str) -> f64 {
    let (_, body) = http_get(admin, "/metrics").unwrap_or_default();
    body.lines()
        .filter(|l| l.starts_with(line_prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_elect_one_leader_and_fail_over() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = api_on(port).await;
    let c = api.client.clone();
    seed(&c, json!({"enable": true})).await;
    let (mut a, admin_a) = manager(dir.path(), port, "ma");
    let (mut b, admin_b) = manager(dir.path(), port, "mb");
    assert!(
        wait_alloc(&c, "kubernetes.io/batch-cpu", Some("6600")).await,
        "{}\n{}",
        a.logs(),
        b.logs()
    );
    let ready = |admin| http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200);
    assert!(common::wait_until(Duration::from_secs(15), || ready(
        admin_a
    ) && ready(
        admin_b
    )));
    // Give a misbehaving follower a resync period to write.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let leaders =
        || metric(admin_a, "koord_manager_is_leader") + metric(admin_b, "koord_manager_is_leader");
    assert!(common::wait_until(Duration::from_secs(10), || leaders() == 1.0));
    let a_leads = metric(admin_a, "koord_manager_is_leader") == 1.0;
    let (leader, follower, follower_admin) = if a_leads {
        (&mut a, &mut b, admin_b)
    } else {
        (&mut b, &mut a, admin_a)
    };
    // While both run, only the leader writes.
    assert_eq!(
        metric(follower_admin, "koord_manager_writes_total"),
        0.0,
        "{}",
        follower.logs()
    );

    let killed_at = std::time::Instant::now();
    leader.signal("KILL");
    let _ = leader.wait_exit(Duration::from_secs(5));
    assert!(
        common::wait_until(Duration::from_secs(15), || metric(
            follower_admin,
            "koord_manager_is_leader"
        ) == 1.0),
        "no takeover: {}",
        follower.logs()
    );
    assert!(killed_at.elapsed() < Duration::from_secs(15));
    set_config(
        &c,
        json!({"enable": true, "cpuReclaimThresholdPercent": 80}),
        json!({}),
    )
    .await;
    assert!(
        wait_alloc(&c, "kubernetes.io/batch-cpu", Some("9800")).await,
        "{}",
        follower.logs()
    );
    // The counter moves once the write's answer is in; the watch may show the object first.
    assert!(common::wait_until(Duration::from_secs(5), || metric(
        follower_admin,
        "koord_manager_writes_total"
    ) > 0.0));
    drop(a);
    drop(b);
    api.stop().await;
}

/// The colocationprofile controller (gate `ColocationProfileController`): a pending pod
/// created before a controller-managed profile gets the profile's labels and annotations;
/// a pod already scheduled does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colocation_profile_controller_updates_pending_pods() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = api_on(port).await;
    let c = api.client.clone();
    seed(&c, json!({"enable": true})).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pp = PostParams::default();
    for (name, node) in [("late", None), ("placed", Some("n1"))] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "batch"}},
            "spec": {"nodeName": node, "schedulerName": "nobody",
                "containers": [{"name": "c", "image": "x"}]}}))
        .unwrap();
        pods.create(&pp, &pod).await.unwrap();
        let pending = json!({"status": {"phase": "Pending"}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(pending))
            .await
            .unwrap();
    }
    let gate = "--feature-gates=ColocationProfileController=true";
    let (mgr, _admin) = manager_with(dir.path(), port, "m1", &[gate]);
    let profiles: Api<koord::api::config::ClusterColocationProfile> = Api::all(c.clone());
    let profile = serde_json::from_value(json!({
        "apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
        "metadata": {"name": "tag-batch", "labels": {"config.koordinator.sh/controller-managed": "true"}},
        "spec": {"selector": {"matchLabels": {"app": "batch"}},
            "labels": {"team": "batch"}, "annotations": {"note": "from-profile"}}}))
    .unwrap();
    profiles.create(&pp, &profile).await.unwrap();
    let tagged = eventually(Duration::from_secs(20), || async {
        let p = pods.get("late").await.unwrap();
        p.metadata
            .labels
            .unwrap_or_default()
            .get("team")
            .map(String::as_str)
            == Some("batch")
    })
    .await;
    assert!(tagged, "{}", mgr.logs());
    let late = pods.get("late").await.unwrap();
    assert_eq!(
        late.metadata
            .annotations
            .unwrap_or_default()
            .get("note")
            .map(String::as_str),
        Some("from-profile")
    );
    let placed = pods.get("placed").await.unwrap();
    assert!(
        !placed
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("team"),
        "a scheduled pod is left alone"
    );
    drop(mgr);
    api.stop().await;
}

/// Batch resources per NUMA zone written into the node's NodeResourceTopology, as
/// Koordinator's `calculateOnNUMALevel`, and shown by `koord explain` from the same code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noderesource_writes_numa_level_batch_resources_into_the_nrt() {
    use koord::api::topology::NodeResourceTopology;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let api = api_on(port).await;
    let c = api.client.clone();
    seed(&c, json!({"enable": true})).await;
    let r = |n: &str, q: &str| json!({"name": n, "capacity": q, "allocatable": q, "available": q});
    let zone = |i: u32| {
        json!({"name": format!("node-{i}"), "type": "Node",
        "resources": [r("cpu", "8"), r("memory", "32Gi")]})
    };
    let nrt: NodeResourceTopology = serde_json::from_value(json!({
        "apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
        "metadata": {"name": "n1"}, "topologyPolicies": ["None"], "zones": [zone(0), zone(1)]}))
    .unwrap();
    let nrts: Api<NodeResourceTopology> = Api::all(c.clone());
    nrts.create(&PostParams::default(), &nrt).await.unwrap();
    let (mgr, _admin) = manager(dir.path(), port, "m1");

    // Per zone: 8000 - 8000*40% - max(500/2 system, 1000/2 kubelet) - 2000/2 used = 3300;
    // 32Gi - 32Gi*35% - max(512Mi, 1Gi) - 3Gi = 18038862644.
    let batch = |n: &NodeResourceTopology, z: usize, res: &str| {
        n.spec.zones[z]
            .resources
            .iter()
            .flatten()
            .find(|x| x.name == res)
            .map(|x| x.allocatable.0.clone())
    };
    let written = eventually(Duration::from_secs(15), || async {
        let n = nrts.get("n1").await.unwrap();
        (0..2).all(|z| batch(&n, z, "kubernetes.io/batch-cpu").as_deref() == Some("3300"))
    })
    .await;
    assert!(written, "{}", mgr.logs());
    let n = nrts.get("n1").await.unwrap();
    assert_eq!(
        batch(&n, 1, "kubernetes.io/batch-memory").as_deref(),
        Some("18038862644")
    );
    assert_eq!(
        batch(&n, 0, "cpu").as_deref(),
        Some("8"),
        "the koordlet's part kept"
    );

    let explained = explain(&c, dir.path()).await;
    let zones = &explained["nodes"][0]["terms"]["batchZones"];
    assert_eq!(zones[0]["zone"], "node-0", "{explained}");
    assert_eq!(zones[1]["terms"]["result"]["cpu"], 3300);
    assert_eq!(zones[1]["terms"]["result"]["memory"], 18038862644i64);
}
