//! Coscheduling end to end: the embedded API server with two simulated 4-CPU nodes and
//! the real `koord --role=scheduler` on its built-in profile. A gang of 4 two-CPU pods
//! with room for 3 places none; once room appears all 4 bind. Strict releases the
//! members waiting at Permit (they carry Koordinator's rejection message); NonStrict
//! keeps them waiting. A PodGroup's status is written.

use crate::common;
use crate::quota::{delete, node_of, start_scheduler_with, two_nodes, unschedulable_reason};

use std::time::Duration;

use common::{eventually, free_port};
use k8s_openapi::api::core::v1::Pod;
use koord::api::quota::PodGroup;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn plain(name: &str, cpu: &str) -> Pod {
    obj(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu}}}]}}))
}

fn annotated(name: &str, gang: &str, mode: &str) -> Pod {
    let mut p = plain(name, "2");
    p.metadata.annotations = Some(
        [
            ("gang.scheduling.koordinator.sh/name", gang),
            ("gang.scheduling.koordinator.sh/min-available", "4"),
            ("gang.scheduling.koordinator.sh/mode", mode),
            ("gang.scheduling.koordinator.sh/waiting-time", "60s"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    p
}

fn grouped(name: &str, pg: &str) -> Pod {
    let mut p = plain(name, "2");
    p.metadata.labels = Some(
        [(
            "pod-group.scheduling.sigs.k8s.io".to_string(),
            pg.to_string(),
        )]
        .into(),
    );
    p
}

async fn bound(pods: &Api<Pod>, names: &[String]) -> usize {
    let mut n = 0;
    for name in names {
        n += node_of(pods, name).await.is_some() as usize;
    }
    n
}

async fn rejected(pods: &Api<Pod>, names: &[String]) -> usize {
    let mut n = 0;
    for name in names {
        n += unschedulable_reason(pods, name)
            .await
            .contains("gets rejected due to member Pod") as usize;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_places_all_or_none_strict_and_nonstrict() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = two_nodes(port).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let groups: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    // Koordinator's scheduling timeout, short: members waiting at Permit pass it.
    let timeout = [
        ("KOORD_SCHEDULER__SCHEDULING_TIMEOUT_SECONDS", "1"),
        ("KOORD_SCHEDULER__MONITOR_PERIOD_SECONDS", "1"),
    ];
    let sched = start_scheduler_with(dir.path(), port, &timeout);

    // A blocker leaves room for three 2-CPU pods.
    pods.create(&pp, &plain("blocker", "2")).await.unwrap();
    assert!(
        eventually(Duration::from_secs(20), || async {
            node_of(&pods, "blocker").await.is_some()
        })
        .await
    );

    // Strict: none of the four binds; the members that waited are released with the reason.
    let strict: Vec<String> = (0..4).map(|i| format!("strict-{i}")).collect();
    for n in &strict {
        pods.create(&pp, &annotated(n, "strict", "Strict"))
            .await
            .unwrap();
    }
    let released = eventually(Duration::from_secs(20), || async {
        rejected(&pods, &strict).await > 0
    })
    .await;
    assert!(released, "{}", sched.logs());
    assert_eq!(bound(&pods, &strict).await, 0, "{}", sched.logs());

    // Room appears: all four bind, with the gang group recorded.
    delete(&pods, "blocker").await;
    let all = eventually(Duration::from_secs(40), || async {
        bound(&pods, &strict).await == 4
    })
    .await;
    assert!(all, "{}", sched.logs());
    let ann = pods
        .get("strict-0")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default();
    assert_eq!(
        ann.get("internal.scheduling.koordinator.sh/bind-gang-group-id")
            .map(String::as_str),
        Some("default/strict")
    );
    for n in &strict {
        delete(&pods, n).await;
    }

    // NonStrict, declared by a PodGroup: the members wait at Permit, none is rejected.
    pods.create(&pp, &plain("blocker-2", "2")).await.unwrap();
    assert!(
        eventually(Duration::from_secs(20), || async {
            node_of(&pods, "blocker-2").await.is_some()
        })
        .await
    );
    let pg: PodGroup = obj(
        json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "relaxed", "namespace": "default",
            "annotations": {"gang.scheduling.koordinator.sh/mode": "NonStrict"}},
        "spec": {"minMember": 4, "scheduleTimeoutSeconds": 60}}),
    );
    groups.create(&pp, &pg).await.unwrap();
    let relaxed: Vec<String> = (0..4).map(|i| format!("relaxed-{i}")).collect();
    for n in &relaxed {
        pods.create(&pp, &grouped(n, "relaxed")).await.unwrap();
    }
    let one_failed = eventually(Duration::from_secs(20), || async {
        let mut any = false;
        for n in &relaxed {
            any |= unschedulable_reason(&pods, n)
                .await
                .contains("Insufficient cpu");
        }
        any
    })
    .await;
    assert!(one_failed, "{}", sched.logs());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        rejected(&pods, &relaxed).await,
        0,
        "NonStrict keeps them waiting"
    );
    let late = "!!!CRITICAL TIMEOUT!!! scheduling pod took longer than the timeout";
    assert!(sched.logs().contains(late), "{}", sched.logs());
    assert_eq!(bound(&pods, &relaxed).await, 0);
    delete(&pods, "blocker-2").await;
    let all = eventually(Duration::from_secs(40), || async {
        bound(&pods, &relaxed).await == 4
    })
    .await;
    assert!(all, "{}", sched.logs());
    let status = eventually(Duration::from_secs(10), || async {
        let s = groups
            .get("relaxed")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        // The simulated nodes start pods at once: Scheduled, then Running.
        s.scheduled == Some(4) && matches!(s.phase.as_deref(), Some("Scheduled" | "Running"))
    })
    .await;
    assert!(status, "{:?}", groups.get("relaxed").await.unwrap().status);
    drop(sched);
    api.stop().await;
}
