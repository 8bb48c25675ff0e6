//! Reservations end to end: the embedded API server with a simulated node and the real
//! `koord --role=scheduler`.
//! A Reservation becomes Available on a node; a non-owner that would only fit in its
//! capacity stays Pending with kube-scheduler's reason until the TTL expires it (Failed,
//! capacity free); after a scheduler restart an owner lands on a second reservation, which
//! `allocateOnce` then marks Succeeded, and a non-owner still cannot use it.

use crate::common;
use crate::quota::{node_of, unschedulable_reason};

use std::net::SocketAddr;
use std::time::Duration;

use common::{Koord, TestApi, eventually, free_port, kubeconfig};
use k8s_openapi::api::core::v1::Pod;
use koord::api::scheduling::reservation::Reservation;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

pub(crate) const CONFIG: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
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

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

pub(crate) fn reservation(name: &str, cpu: &str, app: &str, ttl: &str) -> Reservation {
    obj(
        json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation", "metadata": {"name": name},
        "spec": {"ttl": ttl, "owners": [{"labelSelector": {"matchLabels": {"app": app}}}],
            "template": {"metadata": {"namespace": "default"}, "spec": {"schedulerName": "koord-scheduler",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}}),
    )
}

pub(crate) fn pod(name: &str, cpu: &str, app: &str) -> Pod {
    obj(
        json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu}}}]}}),
    )
}

pub(crate) fn start(dir: &std::path::Path, port: u16, cfg: &std::path::Path) -> Koord {
    start_with(dir, port, cfg, &[])
}

/// [`start`] with more environment (fault points).
pub(crate) fn start_with(
    dir: &std::path::Path,
    port: u16,
    cfg: &std::path::Path,
    more: &[(&str, &str)],
) -> Koord {
    let admin = format!("127.0.0.1:{}", free_port());
    let kc = kubeconfig(dir, port);
    Koord::start(
        &[
            "--role=scheduler",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--admin-addr",
            &admin,
            "--data-dir",
            dir.to_str().unwrap(),
            "--node-name",
            "s1",
        ],
        &[
            &[
                ("KOORD_SCHEDULER__CONFIG_FILE", cfg.to_str().unwrap()),
                ("KOORD_COMMON__LOG_LEVEL", "koord::scheduler=debug,info"),
            ],
            more,
        ]
        .concat(),
        dir,
    )
}

pub(crate) async fn phase(api: &Api<Reservation>, name: &str) -> (String, String) {
    let r = api.get(name).await.unwrap();
    let s = r.status.unwrap_or_default();
    (s.phase.unwrap_or_default(), s.node_name.unwrap_or_default())
}

/// The embedded API server with one simulated 8-CPU node and the scheduler process on
/// [`CONFIG`]: (its directory, the server, the scheduler, the config file, its port).
pub(crate) async fn one_node() -> (tempfile::TempDir, TestApi, Koord, std::path::PathBuf, u16) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    opts.sim = Some(koord::apiserver::sim::SimNodes {
        count: 1,
        cpu: "8".into(),
        memory: "16Gi".into(),
        pods: 110,
    });
    let api = TestApi::start_with(opts).await;
    let cfg = dir.path().join("sched.yaml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let sched = start(dir.path(), port, &cfg);
    (dir, api, sched, cfg, port)
}

/// Creates `p`, which must stay pending with kube-scheduler's `Insufficient cpu`.
pub(crate) async fn stays_pending(pods: &Api<Pod>, p: &Pod, sched: &Koord) {
    let name = p.metadata.name.clone().unwrap_or_default();
    pods.create(&PostParams::default(), p).await.unwrap();
    let pending = eventually(Duration::from_secs(10), || async {
        unschedulable_reason(pods, &name)
            .await
            .contains("Insufficient cpu")
    })
    .await;
    assert!(
        pending,
        "{:?}\n{}",
        unschedulable_reason(pods, &name).await,
        sched.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_use_expire_and_complete() {
    let (dir, mut api, mut sched, cfg, port) = one_node().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let rs: Api<Reservation> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");

    // A reservation with a short TTL holds 4 of the 8 CPUs.
    rs.create(&pp, &reservation("short", "4", "nobody", "6s"))
        .await
        .unwrap();
    let available = eventually(Duration::from_secs(20), || async {
        phase(&rs, "short").await == ("Available".into(), "sim-node-0".into())
    })
    .await;
    assert!(
        available,
        "{:?}\n{}",
        phase(&rs, "short").await,
        sched.logs()
    );

    // A non-owner asking 5 CPUs would only fit in the reserved capacity.
    stays_pending(&pods, &pod("batch", "5", "batch"), &sched).await;
    assert_eq!(node_of(&pods, "batch").await, None);

    // The TTL expires it (the controller wakes at the expiry, not at its 60 s resync):
    // Failed, and the capacity goes to the waiting pod.
    let created = rs
        .get("short")
        .await
        .unwrap()
        .metadata
        .creation_timestamp
        .unwrap()
        .0;
    let expired = eventually(Duration::from_secs(20), || async {
        phase(&rs, "short").await.0 == "Failed"
    })
    .await;
    let late = k8s_openapi::jiff::Timestamp::now().as_second() - created.as_second() - 6;
    assert!(late <= 3, "expired {late} s after its TTL");
    assert!(expired, "{:?}\n{}", phase(&rs, "short").await, sched.logs());
    let bound = eventually(Duration::from_secs(20), || async {
        node_of(&pods, "batch").await.is_some()
    })
    .await;
    assert!(
        bound,
        "batch not bound after the reservation expired\n{}",
        sched.logs()
    );

    // A reservation for app=web takes the last 3 CPUs; the scheduler restarts.
    rs.create(&pp, &reservation("web", "3", "web", "1h"))
        .await
        .unwrap();
    let available = eventually(Duration::from_secs(20), || async {
        phase(&rs, "web").await.0 == "Available"
    })
    .await;
    assert!(available, "{}", sched.logs());
    drop(sched);
    sched = start(dir.path(), port, &cfg);

    // After the restart, a non-owner still cannot use the reserved CPUs; an owner can.
    pods.create(&pp, &pod("other", "2", "batch")).await.unwrap();
    pods.create(&pp, &pod("web-1", "3", "web")).await.unwrap();
    let placed = eventually(Duration::from_secs(20), || async {
        node_of(&pods, "web-1").await.is_some()
    })
    .await;
    assert!(placed, "{}", sched.logs());
    let web1 = pods.get("web-1").await.unwrap();
    let allocated = web1
        .metadata
        .annotations
        .unwrap_or_default()
        .remove("scheduling.koordinator.sh/reservation-allocated");
    assert!(
        allocated.is_some_and(|a| a.contains("\"name\":\"web\"")),
        "owner placed into the reservation"
    );
    // Event-driven: Succeeded within a couple of seconds of the owner's binding.
    let done = eventually(Duration::from_secs(3), || async {
        phase(&rs, "web").await.0 == "Succeeded"
    })
    .await;
    assert!(
        done,
        "allocateOnce: {:?}\n{}",
        phase(&rs, "web").await,
        sched.logs()
    );
    let owners = rs
        .get("web")
        .await
        .unwrap()
        .status
        .unwrap()
        .current_owners
        .unwrap_or_default();
    assert_eq!(owners.len(), 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        node_of(&pods, "other").await,
        None,
        "no CPU left for a non-owner\n{}",
        sched.logs()
    );
    assert!(
        unschedulable_reason(&pods, "other")
            .await
            .contains("Insufficient cpu")
    );
    drop(sched);
    api.stop().await;
}

/// A Reservation that does not decode (`owners: 5`, stored before its CRD had a schema)
/// is skipped with a log line; the controller's round still expires the others.
#[tokio::test]
async fn one_bad_reservation_stops_no_round() {
    let api = TestApi::start().await;
    let c = api.client.clone();
    let key = (
        "scheduling.koordinator.sh".to_string(),
        "reservations".to_string(),
    );
    let bad = json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
        "metadata": {"name": "bad", "uid": "bad-uid", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"ttl": "1s", "owners": 5, "template": {}}});
    let store = api.server().store();
    store
        .commit::<koord::apiserver::store::StoreError>(&key, "", "bad", |_| {
            Ok(koord::apiserver::store::Change::Put(bad))
        })
        .unwrap();
    store.settle().unwrap();
    let rs: Api<Reservation> = Api::all(c.clone());
    rs.create(
        &PostParams::default(),
        &reservation("short", "1", "nobody", "1s"),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    koord::scheduler::reservation_live::reconcile(&c, Some(86_400))
        .await
        .expect("a round despite the bad object");
    assert_eq!(
        phase(&rs, "short").await.0,
        "Failed",
        "the good one expired"
    );
}
