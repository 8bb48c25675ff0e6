//! Coscheduling's job preemption under Koordinator's chart configuration
//! (`enablePreemption: true`, DefaultPreemption left out of postFilter): the first member
//! of a gang preempts for the whole gang — explain shows the nomination of every member,
//! the live scheduler marks and deletes the victims on both nodes, nominates both members
//! and binds the gang once the victims are gone.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::common::{self, TestApi, eventually};

const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/job-preemption-snapshot.yaml"
);

/// The chart's scheduler ConfigMap, mounted as its Deployment mounts it.
fn chart_config(dir: &std::path::Path) -> std::path::PathBuf {
    crate::dropin::mount_configs(dir).0
}

#[test]
fn explain_nominates_the_whole_gang() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = chart_config(dir.path());
    let v = common::explain_schedule_with(SNAPSHOT, &["--config", cfg.to_str().unwrap()]);
    let pods = v["pods"].as_array().unwrap();
    let first = &pods[0];
    assert_eq!(first["pod"], "default/job-1");
    assert!(first["node"].is_null(), "{first}");
    assert_eq!(
        first["preemption"],
        json!({"node": "node-0", "victims": ["default/batch-a", "default/batch-b"],
            "nominated": {"default/job-2": "node-1"}}),
        "both members placed on the cheapest nodes, one batch pod evicted on each"
    );
    let second = &pods[1];
    assert_eq!(second["pod"], "default/job-2");
    assert!(
        second["node"].is_null() && second.get("preemption").is_none(),
        "{second}"
    );
}

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn member(name: &str) -> Pod {
    obj(json!({"metadata": {"name": name, "namespace": "default",
            "annotations": {"gang.scheduling.koordinator.sh/name": "job",
                "gang.scheduling.koordinator.sh/min-available": "2"}},
        "spec": {"schedulerName": "koord-scheduler", "priorityClassName": "koord-prod",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]}}))
}

fn batch(name: &str) -> Pod {
    obj(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "koord-scheduler", "priorityClassName": "koord-batch",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]}}))
}

/// A kubelet for pods being deleted: it notes whether the scheduler marked each with
/// kube-scheduler's DisruptionTarget condition, then removes it.
fn kubelet(pods: Api<Pod>, marked: Arc<Mutex<BTreeSet<String>>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        loop {
            let list = pods.list(&ListParams::default()).await;
            for p in list.iter().flat_map(|l| &l.items) {
                if p.metadata.deletion_timestamp.is_none() {
                    continue;
                }
                let name = p.metadata.name.clone().unwrap_or_default();
                let conditions = p.status.as_ref().and_then(|s| s.conditions.clone());
                if conditions.unwrap_or_default().iter().any(|c| {
                    c.type_ == "DisruptionTarget"
                        && c.reason.as_deref() == Some("PreemptionByScheduler")
                }) {
                    marked.lock().unwrap().insert(name.clone());
                }
                let _ = pods.delete(&name, &now).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

async fn node_of(pods: &Api<Pod>, name: &str) -> Option<String> {
    let p = pods.get_opt(name).await.ok()??;
    p.spec?.node_name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_scheduler_preempts_for_the_gang() {
    let dir = tempfile::tempdir().unwrap();
    let sched = chart_config(dir.path());
    let (mut api, port) = TestApi::with_nodes(&["node-0", "node-1"]).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let env = [("KOORD_SCHEDULER__CONFIG_FILE", sched.to_str().unwrap())];
    let admin: std::net::SocketAddr = format!("127.0.0.1:{}", common::free_port())
        .parse()
        .unwrap();
    let koord = crate::scheduler::start_scheduler_at(dir.path(), port, &env, &admin.to_string());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for b in ["batch-a", "batch-b"] {
        pods.create(&pp, &batch(b)).await.unwrap();
    }
    let both = eventually(Duration::from_secs(20), || async {
        node_of(&pods, "batch-a").await.is_some() && node_of(&pods, "batch-b").await.is_some()
    })
    .await;
    assert!(both, "{}", koord.logs());
    let marked = Arc::new(Mutex::new(BTreeSet::new()));
    let stand_in = kubelet(pods.clone(), marked.clone());
    for m in ["job-1", "job-2"] {
        pods.create(&pp, &member(m)).await.unwrap();
    }
    let bound = eventually(Duration::from_secs(40), || async {
        node_of(&pods, "job-1").await.is_some() && node_of(&pods, "job-2").await.is_some()
    })
    .await;
    assert!(bound, "{}", koord.logs());
    stand_in.abort();
    let nodes: BTreeSet<Option<String>> =
        [node_of(&pods, "job-1").await, node_of(&pods, "job-2").await]
            .into_iter()
            .collect();
    assert_eq!(nodes.len(), 2, "one member per node: {nodes:?}");
    for b in ["batch-a", "batch-b"] {
        assert!(pods.get_opt(b).await.unwrap().is_none(), "{b} preempted");
    }
    assert_eq!(
        *marked.lock().unwrap(),
        BTreeSet::from(["batch-a".to_string(), "batch-b".to_string()]),
        "each victim carried DisruptionTarget before it went"
    );
    // Koordinator's job preemption series, under the gang group and its reason.
    let (_, text) = common::http_get(admin, "/metrics").expect("metrics");
    let preempted = "scheduler_job_preemption_duration_seconds_count{jobName=\"default/job\",result=\"preempt success, alreadyWaitingForBound: %d/%d\"}";
    assert!(text.contains(preempted), "{text}");
    drop(koord);
    api.stop().await;
}
