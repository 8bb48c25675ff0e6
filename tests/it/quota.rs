//! ElasticQuota end to end: the embedded API server with two simulated 4-CPU nodes and
//! the real `koord --role=scheduler` on its built-in (Koordinator) profile.
//! A quota at its max keeps its next pod Pending with Koordinator's reason until usage
//! drops; the scheduler writes `status.used` and the runtime annotation; a quota asking
//! for its min takes it back from a quota that borrowed the whole cluster.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Koord, TestApi, eventually, free_port, kubeconfig};
use k8s_openapi::api::core::v1::Pod;
use koord::api::quota::ElasticQuota;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

pub fn quota(name: &str, min: &str, max: &str) -> ElasticQuota {
    obj(
        json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"min": {"cpu": min, "memory": "16Gi"}, "max": {"cpu": max, "memory": "32Gi"}}}),
    )
}

pub fn quota_pod(name: &str, quota: &str, cpu: &str) -> Pod {
    obj(json!({"metadata": {"name": name, "namespace": "default",
            "labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu}}}]}}))
}

pub fn start_scheduler(dir: &std::path::Path, port: u16) -> Koord {
    start_scheduler_with(dir, port, &[])
}

/// [`start_scheduler`] with more environment (fault points).
pub fn start_scheduler_with(dir: &std::path::Path, port: u16, more: &[(&str, &str)]) -> Koord {
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
            &[("KOORD_COMMON__LOG_LEVEL", "koord::scheduler=debug,info")],
            more,
        ]
        .concat(),
        dir,
    )
}

pub async fn two_nodes(port: u16) -> TestApi {
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    opts.sim = Some(koord::apiserver::sim::SimNodes {
        count: 2,
        cpu: "4".into(),
        memory: "16Gi".into(),
        pods: 110,
    });
    TestApi::start_with(opts).await
}

pub async fn node_of(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name).await.ok()?.spec?.node_name
}

pub async fn unschedulable_reason(pods: &Api<Pod>, name: &str) -> String {
    let Ok(p) = pods.get(name).await else {
        return String::new();
    };
    p.status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.message)
        .unwrap_or_default()
}

pub async fn delete(pods: &Api<Pod>, name: &str) {
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
}

pub async fn used_cpu(quotas: &Api<ElasticQuota>, name: &str) -> Option<String> {
    let q = quotas.get(name).await.ok()?;
    Some(q.status?.used?.get("cpu")?.0.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_at_max_waits_and_min_is_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = two_nodes(port).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let quotas: Api<ElasticQuota> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    quotas
        .create(&pp, &quota("team-a", "4", "4"))
        .await
        .unwrap();
    quotas
        .create(&pp, &quota("team-b", "4", "8"))
        .await
        .unwrap();
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.clone());
    let _ = ns
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "koordinator-system"}})),
        )
        .await;
    let sched = start_scheduler(dir.path(), port);

    // Koordinator's plugin creates the root, system and default quotas when absent.
    let system: Api<ElasticQuota> = Api::namespaced(c.clone(), "koordinator-system");
    let builtin = eventually(Duration::from_secs(20), || async {
        let mut found = 0;
        for n in [
            "koordinator-root-quota",
            "koordinator-system-quota",
            "koordinator-default-quota",
        ] {
            found += system.get_opt(n).await.ok().flatten().is_some() as usize;
        }
        found == 3
    })
    .await;
    assert!(builtin, "{}", sched.logs());

    // team-a's max is 4 CPUs: the third 2-CPU pod waits on the quota, not on the nodes.
    for n in ["a1", "a2", "a3"] {
        pods.create(&pp, &quota_pod(n, "team-a", "2"))
            .await
            .unwrap();
    }
    let placed = eventually(Duration::from_secs(20), || async {
        node_of(&pods, "a1").await.is_some() && node_of(&pods, "a2").await.is_some()
    })
    .await;
    assert!(placed, "{}", sched.logs());
    let waits = eventually(Duration::from_secs(10), || async {
        unschedulable_reason(&pods, "a3")
            .await
            .contains("Insufficient quotas, quotaName: team-a, runtime: cpu:4")
    })
    .await;
    assert!(
        waits,
        "{:?}\n{}",
        unschedulable_reason(&pods, "a3").await,
        sched.logs()
    );
    assert_eq!(node_of(&pods, "a3").await, None);
    // The status writer: used and the runtime annotation.
    let written = eventually(Duration::from_secs(10), || async {
        used_cpu(&quotas, "team-a").await.as_deref() == Some("4")
    })
    .await;
    assert!(written, "{:?}", quotas.get("team-a").await.unwrap());
    let ann = quotas
        .get("team-a")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default();
    assert_eq!(
        ann.get("quota.scheduling.koordinator.sh/runtime")
            .map(String::as_str),
        Some("{\"cpu\":\"4\"}"),
        "{ann:?}"
    );

    // Usage drops: the waiting pod runs.
    delete(&pods, "a1").await;
    let runs = eventually(Duration::from_secs(20), || async {
        node_of(&pods, "a3").await.is_some()
    })
    .await;
    assert!(runs, "{}", sched.logs());

    // team-a goes idle; team-b borrows the whole cluster.
    delete(&pods, "a2").await;
    delete(&pods, "a3").await;
    for n in ["b1", "b2", "b3", "b4"] {
        pods.create(&pp, &quota_pod(n, "team-b", "2"))
            .await
            .unwrap();
    }
    let borrowed = eventually(Duration::from_secs(20), || async {
        let mut all = true;
        for n in ["b1", "b2", "b3", "b4"] {
            all &= node_of(&pods, n).await.is_some();
        }
        all
    })
    .await;
    assert!(borrowed, "{}", sched.logs());

    // team-a asks for 2 of its min 4: one of team-b's pods gives way.
    pods.create(&pp, &quota_pod("a4", "team-a", "2"))
        .await
        .unwrap();
    let reclaimed = eventually(Duration::from_secs(30), || async {
        node_of(&pods, "a4").await.is_some()
    })
    .await;
    assert!(
        reclaimed,
        "{:?}\n{}",
        unschedulable_reason(&pods, "a4").await,
        sched.logs()
    );
    let left = pods.list(&ListParams::default()).await.unwrap();
    let b_left = left
        .items
        .iter()
        .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with('b'))
        .count();
    assert_eq!(b_left, 3, "exactly one of team-b's pods preempted");
    drop(sched);
    api.stop().await;
}

/// The manager's ElasticQuotaProfile controller creates the profile's root quota with the
/// selected nodes' allocatable as min.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_creates_its_root_quota() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = two_nodes(port).await;
    let c = api.client.clone();
    let profiles: Api<koord::api::quota::ElasticQuotaProfile> =
        Api::namespaced(c.clone(), "default");
    let p = obj(
        json!({"apiVersion": "quota.koordinator.sh/v1alpha1", "kind": "ElasticQuotaProfile",
        "metadata": {"name": "pool", "namespace": "default"},
        "spec": {"quotaName": "pool-root", "resourceRatio": "0.5", "nodeSelector": {}}}),
    );
    profiles.create(&PostParams::default(), &p).await.unwrap();
    let (mgr, _) = crate::manager::manager(dir.path(), port, "m1");
    let quotas: Api<ElasticQuota> = Api::namespaced(c.clone(), "default");
    let made = eventually(Duration::from_secs(30), || async {
        quotas
            .get("pool-root")
            .await
            .ok()
            .and_then(|q| q.spec.min)
            .and_then(|m| m.get("cpu").cloned())
            .is_some_and(|q| q.0 == "4")
    })
    .await;
    assert!(made, "{}", mgr.logs());
    let q = quotas.get("pool-root").await.unwrap();
    let labels = q.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("quota.scheduling.koordinator.sh/is-root")
            .map(String::as_str),
        Some("true")
    );
    assert!(
        q.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("quota.scheduling.koordinator.sh/total-resource")
    );
    drop(mgr);
    api.stop().await;
}

const REVOKE_CONFIG: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {enabled: [{name: ElasticQuota}]}
    postFilter: {enabled: [{name: ElasticQuota}]}
    reserve: {enabled: [{name: ElasticQuota}]}
  pluginConfig:
  - name: ElasticQuota
    args: {quotaGroupNamespace: default, monitorAllQuotas: true, delayEvictTime: 1s, revokePodInterval: 1s}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_used_quota_gives_back_its_least_important_pod() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = two_nodes(port).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let quotas: Api<ElasticQuota> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    quotas
        .create(&pp, &quota("team-a", "1", "2"))
        .await
        .unwrap();
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(c.clone());
    for (name, value) in [("high", 100), ("low", 1)] {
        let pc = obj(json!({"metadata": {"name": name}, "value": value}));
        classes.create(&pp, &pc).await.unwrap();
    }
    // Placed by someone else: 4 CPUs in a quota whose max is 2.
    for (name, class) in [("keep", "high"), ("lose", "low")] {
        let mut p = quota_pod(name, "team-a", "2");
        let spec = p.spec.as_mut().unwrap();
        spec.node_name = Some("sim-node-0".into());
        spec.priority_class_name = Some(class.into());
        pods.create(&pp, &p).await.unwrap();
    }
    let cfg = dir.path().join("sched.yaml");
    std::fs::write(&cfg, REVOKE_CONFIG).unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let kc = kubeconfig(dir.path(), port);
    let sched = Koord::start(
        &[
            "--role=scheduler",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--admin-addr",
            &admin,
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--node-name",
            "s1",
        ],
        &[("KOORD_SCHEDULER__CONFIG_FILE", cfg.to_str().unwrap())],
        dir.path(),
    );
    let revoked = eventually(Duration::from_secs(20), || async {
        pods.get_opt("lose").await.ok().flatten().is_none()
    })
    .await;
    assert!(revoked, "{}", sched.logs());
    assert!(
        pods.get_opt("keep").await.unwrap().is_some(),
        "the quota fits again"
    );
    drop(sched);
    api.stop().await;
}
