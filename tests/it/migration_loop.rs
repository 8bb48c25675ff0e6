//! The colocation loop closed in `koord --role=all --embedded` with simulated nodes and
//! nothing hand-made but the load: a Deployment's replicas on one node, that node hot by
//! its NodeMetric, LowNodeLoad → PodMigrationJob (ReservationFirst) → a Reservation on a
//! cool node → eviction → the ReplicaSet controller's replacement scheduled into the
//! reservation → the job Succeeded.

use crate::common;

use std::time::Duration;

use common::{Koord, eventually};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use koord::api::scheduling::migration::PodMigrationJob;
use koord::api::slo::NodeMetric;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const DESCHEDULER: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 1s
profiles:
- name: koord-descheduler
  plugins:
    balance: {enabled: [{name: LowNodeLoad}]}
  pluginConfig:
  - name: MigrationController
    args: {maxMigratingPerNode: 1, defaultJobTTL: 2m, arbitrationArgs: {interval: 200ms}}
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 45, memory: 55}
      highThresholds: {cpu: 75, memory: 80}
      anomalyCondition: {consecutiveAbnormalities: 1}
"#;

async fn client(kubeconfig: &std::path::Path) -> Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

async fn cordon(c: &Client, node: &str, on: bool) {
    let p = json!({"spec": {"unschedulable": on}});
    Api::<Node>::all(c.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
}

async fn web_pods(c: &Client) -> Vec<Pod> {
    let lp = ListParams::default().labels("app=web");
    let pods = Api::<Pod>::namespaced(c.clone(), "default").list(&lp).await;
    let live = pods.unwrap().items.into_iter();
    live.filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// What a koordlet would report: sim-node-0 at 7 of its 8 CPUs (its four replicas at 1.5
/// each, the system 1), the others at half a CPU.
async fn report_load(c: &Client, hot_pods: &[String]) {
    let api: Api<NodeMetric> = Api::all(c.clone());
    for i in 0..3 {
        let name = format!("sim-node-{i}");
        let m = json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": name}, "spec": {}});
        let _ = api
            .create(&PostParams::default(), &serde_json::from_value(m).unwrap())
            .await;
        let (node, pods): (&str, Vec<_>) = if i == 0 {
            let pods = hot_pods.iter().map(|p| {
                json!({"namespace": "default", "name": p,
                "podUsage": {"resources": {"cpu": "1500m", "memory": "1Gi"}}})
            });
            ("7", pods.collect())
        } else {
            ("500m", vec![])
        };
        let status = json!({"status": {"updateTime": k8s_openapi::jiff::Timestamp::now().to_string(),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": node, "memory": "4Gi"}},
                "systemUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}},
            "podsMetric": pods}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }
}

fn start(dir: &std::path::Path, faults: &[(&str, &str)]) -> Koord {
    let desched = dir.join("descheduler.yaml");
    std::fs::write(&desched, DESCHEDULER).unwrap();
    Koord::embedded(
        dir,
        &[
            "--sim-nodes=3",
            "--sim-node-cpu=8",
            "--sim-node-memory=16Gi",
        ],
        &[
            ("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false"),
            ("KOORD_EMBEDDED__REGISTER_LOCAL_NODE", "false"),
            ("KOORD_DESCHEDULER__CONFIG_FILE", desched.to_str().unwrap()),
            ("KOORD_COMMON__LOG_LEVEL", "koord::descheduler=debug,info"),
        ]
        .iter()
        .chain(faults)
        .copied()
        .collect::<Vec<_>>(),
    )
}

const WEB: &str = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
 "metadata": {"name": "web", "namespace": "default"},
 "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
  "template": {"metadata": {"labels": {"app": "web"}},
   "spec": {"schedulerName": "koord-scheduler",
    "containers": [{"name": "web", "image": "nginx",
     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_replica_moves_off_a_hot_node_through_a_reservation() {
    let _cpu = common::cpu_exclusive();
    moves_off_a_hot_node(&[]).await;
}

/// The same loop with the whole process killed right after the job created its
/// Reservation (before the job records it): restarted, the job finds its Reservation
/// (one, not a second) and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_killed_after_creating_its_reservation_completes_with_one() {
    let _cpu = common::cpu_exclusive();
    let fault = [(koord::kernel::fault::ENV, "descheduler.after-reservation")];
    moves_off_a_hot_node(&fault).await;
}

async fn ready(koord: &Koord, kubeconfig: &std::path::Path) -> Client {
    let ready = eventually(Duration::from_secs(30), || async {
        kubeconfig.exists() && {
            let c = client(kubeconfig).await;
            Api::<Node>::all(c)
                .list(&Default::default())
                .await
                .is_ok_and(|l| l.items.len() == 3)
        }
    })
    .await;
    assert!(ready, "{}", koord.logs());
    client(kubeconfig).await
}

async fn moves_off_a_hot_node(faults: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let mut koord = start(dir.path(), faults);
    let kubeconfig = dir.path().join("data/kubeconfig");
    let mut c = ready(&koord, &kubeconfig).await;

    // Every replica on sim-node-0: the others are cordoned while the Deployment rolls out.
    cordon(&c, "sim-node-1", true).await;
    cordon(&c, "sim-node-2", true).await;
    let web: Deployment = serde_json::from_str(WEB).unwrap();
    Api::<Deployment>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    let placed = eventually(Duration::from_secs(40), || async {
        let pods = web_pods(&c).await;
        pods.len() == 4
            && pods
                .iter()
                .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("sim-node-0"))
    })
    .await;
    assert!(placed, "{:?}\n{}", web_pods(&c).await, koord.logs());
    let before: Vec<String> = web_pods(&c)
        .await
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    cordon(&c, "sim-node-1", false).await;
    cordon(&c, "sim-node-2", false).await;
    report_load(&c, &before).await;
    if !faults.is_empty() {
        let killed = koord.wait_exit(Duration::from_secs(60)).is_some();
        assert!(killed, "the fault point was not reached\n{}", koord.logs());
        koord = start(dir.path(), &[]);
        c = ready(&koord, &kubeconfig).await;
    }

    // LowNodeLoad: one PodMigrationJob for one of the replicas.
    let jobs_api: Api<PodMigrationJob> = Api::all(c.clone());
    let jobs = || async { jobs_api.list(&Default::default()).await.unwrap().items };
    let started = eventually(Duration::from_secs(40), || async {
        !jobs().await.is_empty()
    })
    .await;
    assert!(started, "no PodMigrationJob\n{}", koord.logs());
    let job = jobs().await.remove(0);
    let moved = job
        .spec
        .pod_ref
        .as_ref()
        .and_then(|r| r.name.clone())
        .unwrap();
    assert!(before.contains(&moved), "{moved} is one of {before:?}");

    // Reservation on a cool node, eviction, replacement into the reservation, success.
    let succeeded = eventually(Duration::from_secs(60), || async {
        let j = jobs().await;
        j[0].status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
    })
    .await;
    let job = jobs().await.remove(0);
    assert!(succeeded, "{job:?}\n{}", koord.logs());
    let status = job.status.clone().unwrap_or_default();
    let res_node = status.node_name.clone().unwrap_or_default();
    assert!(
        res_node == "sim-node-1" || res_node == "sim-node-2",
        "{job:?}"
    );
    let pods = web_pods(&c).await;
    assert!(
        pods.iter()
            .all(|p| p.metadata.name.as_deref() != Some(moved.as_str())),
        "the migrated replica is gone"
    );
    let fresh: Vec<&Pod> = pods
        .iter()
        .filter(|p| !before.contains(p.metadata.name.as_ref().unwrap()))
        .collect();
    assert_eq!(fresh.len(), 1, "one replacement: {pods:?}");
    let fresh = fresh[0];
    assert_eq!(
        fresh.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(res_node.as_str()),
        "the replacement is on the reservation's node"
    );
    let allocated = fresh
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("scheduling.koordinator.sh/reservation-allocated"));
    let reservation = job
        .spec
        .reservation_options
        .as_ref()
        .and_then(|o| o.reservation_ref.as_ref())
        .and_then(|r| r.name.clone())
        .unwrap_or_default();
    assert!(!reservation.is_empty(), "ReservationFirst: {job:?}");
    eprintln!("moved {moved} to {res_node} through {reservation}: {allocated:?}");
    assert!(
        allocated.is_some_and(|a| a.contains(&reservation)),
        "placed into reservation {reservation}: {allocated:?}"
    );
    assert_eq!(pods.len(), 4, "the Deployment is whole again");
    let all = Api::<koord::api::scheduling::reservation::Reservation>::all(c.clone());
    let names: Vec<String> = all
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    assert_eq!(
        names,
        vec![reservation.clone()],
        "one Reservation for the job"
    );
    drop(koord);
}
