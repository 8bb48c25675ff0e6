//! The descheduler end to end: the embedded API server with three simulated nodes, the
//! real `koord` binary, NodeMetrics written by the test (no koordlet).
//! A hot node's movable pod gets a PodMigrationJob (ReservationFirst): a Reservation lands
//! on a cold node, the pod is evicted, its replacement takes the reservation, the job
//! succeeds; DaemonSet and system-critical pods are never chosen; one job per node per pass.
//! Dry run: two replicas, one leader, no jobs, and its logged decisions are what
//! `koord explain deschedule` prints for the same objects.

use crate::common;
use crate::scheduler::listed;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Koord, TestApi, eventually, free_port, kubeconfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use koord::api::scheduling::migration::PodMigrationJob;
use koord::api::slo::NodeMetric;
use kube::Api;
use kube::api::{Patch, PostParams};
use serde_json::{Value, json};

fn config(dry_run: bool) -> String {
    format!(
        r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 1s
dryRun: {dry_run}
profiles:
- name: koord-descheduler
  plugins:
    balance: {{enabled: [{{name: LowNodeLoad}}]}}
  pluginConfig:
  - name: MigrationController
    args: {{maxMigratingPerNode: 1, defaultJobTTL: 2m, arbitrationArgs: {{interval: 200ms}}}}
  - name: LowNodeLoad
    args:
      lowThresholds: {{cpu: 45, memory: 55}}
      highThresholds: {{cpu: 75, memory: 80}}
      anomalyCondition: {{consecutiveAbnormalities: 1}}
"#
    )
}

const SCHEDULER: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {enabled: [{name: Reservation}]}
    filter: {enabled: [{name: Reservation}]}
    score: {enabled: [{name: Reservation, weight: 5000}]}
    reserve: {enabled: [{name: Reservation}]}
    preBind: {enabled: [{name: Reservation}]}
"#;

/// `koord explain deschedule` over a List of `items`, with the configuration at `cfg`.
pub(crate) fn explain(dir: &std::path::Path, items: Vec<Value>, cfg: &std::path::Path) -> Value {
    let snap = dir.join("snap.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&snap, list.to_string()).unwrap();
    let out = std::process::Command::new(common::koord_bin())
        .args(["explain", "deschedule", "-f", snap.to_str().unwrap()])
        .args(["--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn pod(name: &str, node: Option<&str>, owner: (&str, &str, &str), priority: Option<&str>) -> Pod {
    let (kind, oname, uid) = owner;
    let api_version = if kind == "DaemonSet" || kind == "ReplicaSet" {
        "apps/v1"
    } else {
        "v1"
    };
    obj(
        json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
        "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": oname, "uid": uid, "controller": true}]},
        "spec": {"schedulerName": "koord-scheduler", "nodeName": node, "priorityClassName": priority,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}),
    )
}

/// NodeMetrics: sim-node-0 at 7 of 8 CPUs (web-b the biggest over-threshold mover), the
/// others at 0.5.
async fn metrics(c: &kube::Client, hot: bool) {
    let api: Api<NodeMetric> = Api::all(c.clone());
    let pm = |name: &str, cpu: &str| json!({"namespace": "default", "name": name, "podUsage": {"resources": {"cpu": cpu, "memory": "1Gi"}}});
    for i in 0..3 {
        let name = format!("sim-node-{i}");
        let m: NodeMetric = obj(
            json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name}, "spec": {}}),
        );
        let _ = api.create(&PostParams::default(), &m).await;
        let (sys, pods) = if i == 0 && hot {
            (
                "1",
                vec![
                    pm("web-a", "2500m"),
                    pm("web-b", "2"),
                    pm("web-c", "500m"),
                    pm("ds", "500m"),
                    pm("critical", "500m"),
                ],
            )
        } else if i == 0 {
            (
                "1",
                vec![
                    pm("web-a", "2500m"),
                    pm("web-c", "500m"),
                    pm("ds", "500m"),
                    pm("critical", "500m"),
                ],
            )
        } else {
            ("500m", vec![])
        };
        let status = json!({"status": {"updateTime": k8s_openapi::jiff::Timestamp::now().to_string(),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": sys, "memory": "1Gi"}}, "systemUsage": {"resources": {"cpu": sys, "memory": "1Gi"}}},
            "podsMetric": pods}});
        api.patch_status(&name, &Default::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }
}

async fn setup(c: &kube::Client) {
    let pp = PostParams::default();
    let rs: ReplicaSet = obj(json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}));
    let rs = Api::<ReplicaSet>::namespaced(c.clone(), "default")
        .create(&pp, &rs)
        .await
        .unwrap();
    let uid = rs.metadata.uid.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let on = Some("sim-node-0");
    for p in [
        pod("web-a", on, ("ReplicaSet", "web", &uid), None),
        pod("web-b", on, ("ReplicaSet", "web", &uid), None),
        pod("web-c", on, ("ReplicaSet", "web", &uid), None),
        pod("ds", on, ("DaemonSet", "agent", "ds-uid"), None),
        pod(
            "critical",
            on,
            ("ReplicaSet", "web", &uid),
            Some("system-node-critical"),
        ),
    ] {
        pods.create(&pp, &p).await.unwrap();
    }
    metrics(c, true).await;
}

pub(crate) async fn api_server(nodes: u32) -> (TestApi, u16) {
    let port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    opts.sim = Some(koord::apiserver::sim::SimNodes {
        count: nodes,
        cpu: "8".into(),
        memory: "16Gi".into(),
        pods: 110,
    });
    (TestApi::start_with(opts).await, port)
}

pub(crate) fn start(
    dir: &std::path::Path,
    port: u16,
    roles: &str,
    desched: &std::path::Path,
    sched: Option<&std::path::Path>,
    name: &str,
) -> Koord {
    let admin = format!("127.0.0.1:{}", free_port());
    let kc = kubeconfig(dir, port);
    let data = dir.join(name);
    std::fs::create_dir_all(&data).unwrap();
    let mut env = vec![
        ("KOORD_DESCHEDULER__CONFIG_FILE", desched.to_str().unwrap()),
        ("KOORD_COMMON__LOG_LEVEL", "koord::descheduler=debug,info"),
    ];
    if let Some(s) = sched {
        env.push(("KOORD_SCHEDULER__CONFIG_FILE", s.to_str().unwrap()));
    }
    Koord::start(
        &[
            &format!("--role={roles}"),
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--admin-addr",
            &admin,
            "--data-dir",
            data.to_str().unwrap(),
            "--node-name",
            name,
        ],
        &env,
        &data,
    )
}

async fn jobs(c: &kube::Client) -> Vec<PodMigrationJob> {
    Api::<PodMigrationJob>::all(c.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
}

fn pod_of(j: &PodMigrationJob) -> String {
    j.spec
        .pod_ref
        .as_ref()
        .and_then(|r| r.name.clone())
        .unwrap_or_default()
}

fn phase_of(j: &PodMigrationJob) -> String {
    j.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_pod_moves_through_a_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_server(3).await;
    let c = api.client.clone();
    setup(&c).await;
    let (dcfg, scfg) = (dir.path().join("d.yaml"), dir.path().join("s.yaml"));
    std::fs::write(&dcfg, config(false)).unwrap();
    std::fs::write(&scfg, SCHEDULER).unwrap();
    let koord = start(
        dir.path(),
        port,
        "scheduler,descheduler",
        &dcfg,
        Some(&scfg),
        "k1",
    );

    // One job, for the pod whose usage best fits the excess: web-b.
    let started = eventually(Duration::from_secs(30), || async {
        !jobs(&c).await.is_empty()
    })
    .await;
    assert!(started, "no PodMigrationJob\n{}", koord.logs());
    let js = jobs(&c).await;
    assert_eq!(js.len(), 1, "one per node per pass: {js:?}");
    assert_eq!(pod_of(&js[0]), "web-b");
    let ann = js[0].metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann.get("koordinator.sh/evict-trigger").map(String::as_str),
        Some("LowNodeLoad")
    );
    assert!(
        ann["koordinator.sh/evict-reason"]
            .starts_with("node is overutilized, node cpu usage(87.50%)>threshold(75.00%)"),
        "{ann:?}"
    );

    // The pod is evicted once its reservation is on a cold node.
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let evicted = eventually(Duration::from_secs(40), || async {
        pods.get_opt("web-b").await.unwrap().is_none()
    })
    .await;
    assert!(
        evicted,
        "web-b not evicted: {:?}\n{}",
        jobs(&c).await,
        koord.logs()
    );
    let job = jobs(&c).await.remove(0);
    let res_node = job
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    assert!(
        res_node == "sim-node-1" || res_node == "sim-node-2",
        "{job:?}"
    );
    // The koordlet would now report the node cooler; the job in flight holds the node's
    // one migration slot until then.
    metrics(&c, false).await;

    // Its replacement (the ReplicaSet controller's job; none runs here) takes the reservation.
    let uid = Api::<ReplicaSet>::namespaced(c.clone(), "default")
        .get("web")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("web-b2", None, ("ReplicaSet", "web", &uid), None),
    )
    .await
    .unwrap();
    let done = eventually(Duration::from_secs(40), || async {
        phase_of(&jobs(&c).await[0]) == "Succeeded"
    })
    .await;
    assert!(done, "{:?}\n{}", jobs(&c).await, koord.logs());
    let b2 = pods.get("web-b2").await.unwrap();
    assert_eq!(
        b2.spec.unwrap().node_name.as_deref(),
        Some(res_node.as_str())
    );

    // DaemonSet and critical pods were never chosen; nothing else moved.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let js = jobs(&c).await;
    assert!(
        js.iter()
            .all(|j| pod_of(j) != "ds" && pod_of(j) != "critical"),
        "{js:?}"
    );
    assert_eq!(js.len(), 1, "{js:?}");
    drop(koord);
    api.stop().await;
}

fn logged_decisions(logs: &str) -> Option<Value> {
    let line = logs
        .lines()
        .rev()
        .find(|l| l.contains("dry run: nothing evicted"))?;
    let at = line.find("decisions")?;
    let rest = &line[at + line[at..].find('{')?..];
    let mut de = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    de.next()?.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_agrees_with_explain_and_one_replica_leads() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_server(3).await;
    let c = api.client.clone();
    setup(&c).await;
    let dcfg = dir.path().join("d.yaml");
    std::fs::write(&dcfg, config(true)).unwrap();
    let a = start(dir.path(), port, "descheduler", &dcfg, None, "r1");
    let b = start(dir.path(), port, "descheduler", &dcfg, None, "r2");
    let logged = eventually(Duration::from_secs(30), || async {
        logged_decisions(&a.logs()).is_some() || logged_decisions(&b.logs()).is_some()
    })
    .await;
    assert!(logged, "no dry-run pass\n{}\n{}", a.logs(), b.logs());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (la, lb) = (logged_decisions(&a.logs()), logged_decisions(&b.logs()));
    assert!(
        la.is_some() != lb.is_some(),
        "exactly one replica runs passes"
    );
    let lease = Api::<Lease>::namespaced(c.clone(), "koordinator-system")
        .get("koord-descheduler")
        .await
        .unwrap();
    let holder = lease.spec.unwrap().holder_identity.unwrap();
    assert!(
        holder.starts_with(if la.is_some() { "r1_" } else { "r2_" }),
        "{holder}"
    );
    assert!(jobs(&c).await.is_empty(), "dry run created jobs");
    assert!(
        Api::<Pod>::namespaced(c.clone(), "default")
            .get_opt("web-b")
            .await
            .unwrap()
            .is_some()
    );

    // The same objects through `koord explain deschedule`.
    let mut items = listed::<Node>(&c).await;
    items.extend(listed::<Pod>(&c).await);
    items.extend(listed::<NodeMetric>(&c).await);
    items.extend(listed::<ReplicaSet>(&c).await);
    let explained = explain(dir.path(), items, &dcfg);
    let live = la.or(lb).unwrap();
    assert_eq!(explained["evictions"], live["evictions"]);
    assert_eq!(explained["skipped"], live["skipped"]);
    assert_eq!(explained["nodes"], live["nodes"]);
    let ev = explained["evictions"].as_array().unwrap();
    assert_eq!(ev.len(), 1, "{explained:#}");
    assert_eq!(ev[0]["pod"], "default/web-b");
    assert_eq!(ev[0]["mode"], "ReservationFirst");
    let skipped = explained["skipped"].to_string();
    assert!(
        skipped.contains("pod is a DaemonSet pod")
            && skipped.contains("pod has system critical priority"),
        "{skipped}"
    );
    drop((a, b));
    api.stop().await;
}
