//! ScheduleExplanation answered live: the chart's CRD applied verbatim with the machine's
//! kubectl (schema validation on, as kube-apiserver checks it), the real
//! `koord --role=scheduler`, ScheduleExplanations created with kubectl. The scheduler
//! writes Koordinator's status (failed plugin and reason per node group, preemption,
//! topology domains), the same answer `koord explain schedule` gives for the same state,
//! refreshes it when the pod is placed, and deletes an object past its TTL.

use crate::common;

use std::time::Duration;

use common::{Koord, TestApi, free_port, kubeconfig};
use serde_json::{Value, json};

use super::kubectl::{Kubectl, kubectl_path};

const CRD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/koordinator/crds/scheduling.koordinator.sh_scheduleexplanations.yaml"
);

fn pod(name: &str, cpu: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}})
    .to_string()
}

fn question(name: &str, key: &str, ttl: Option<&str>) -> String {
    let mut spec = json!({"questionObjectKey": key});
    if let Some(t) = ttl {
        spec["ttl"] = json!(t);
    }
    json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ScheduleExplanation",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
    .to_string()
}

/// The object's status once `ready` holds for it (20 s at most).
async fn status_when(k: &Kubectl, name: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut found = false;
    while !found && std::time::Instant::now() < deadline {
        let args = ["get", "sched-exp", name, "-n", "default", "-o", "json"];
        let (ok, out, _) = k.run(&args, None).await;
        last = if ok {
            serde_json::from_str::<Value>(&out).unwrap()["status"].clone()
        } else {
            Value::Null
        };
        found = ready(&last);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(found, "{name}: status never as expected; last: {last:#}");
    last
}

fn without_time(mut status: Value) -> Value {
    status.as_object_mut().unwrap().remove("lastUpdateTime");
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_explanation_gets_koordinators_status_from_the_live_scheduler() {
    let Some(bin) = kubectl_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let (_api, port) = TestApi::with_nodes(&["n1", "n2"]).await;
    let dir = tempfile::tempdir().unwrap();
    kubeconfig(dir.path(), port);
    let k = Kubectl {
        bin,
        kubeconfig: dir.path().join("kubeconfig"),
        cache: dir.path().join("cache"),
    };
    k.ok(
        &["apply", "--server-side", "--force-conflicts", "-f", CRD],
        None,
    )
    .await;
    k.ok(&["label", "node", "n1", "zone=a"], None).await;
    k.ok(&["label", "node", "n2", "zone=b"], None).await;
    // kubectl's own validation and the API server's schema both refuse a number for ttl.
    let bad = question("bad", "default/big", None)
        .replace(r#""questionObjectKey""#, r#""ttl":5,"questionObjectKey""#);
    let (ok, _, err) = k
        .run(&["create", "--validate=false", "-f", "-"], Some(&bad))
        .await;
    assert!(!ok && err.contains("spec.ttl"), "{err}");
    k.ok(&["create", "-f", "-"], Some(&pod("big", "6", json!({}))))
        .await;
    let zoned = json!({"scheduling.koordinator.sh/topology-key-to-explain": "zone"});
    k.ok(&["create", "-f", "-"], Some(&pod("zoned", "6", zoned)))
        .await;
    for (name, key, ttl) in [
        ("why-big", "default/big", None),
        ("why-zoned", "default/zoned", None),
        ("short", "default/big", Some("2s")),
    ] {
        k.ok(&["create", "-f", "-"], Some(&question(name, key, ttl)))
            .await;
    }
    let sched = Koord::start(
        &[
            "--role=scheduler",
            "--kubeconfig",
            dir.path().join("kubeconfig").to_str().unwrap(),
            "--admin-addr",
            &format!("127.0.0.1:{}", free_port()),
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
        &[("KOORD_SCHEDULER__EXPLANATION_REFRESH_SECONDS", "1")],
        dir.path(),
    );
    let big = status_when(&k, "why-big", |s| s["detailedExplanation"].is_array()).await;
    let logs = sched.logs();
    assert_eq!(big["schedulable"], json!(false), "{big:#}\n{logs}");
    assert_eq!(big["schedulableAfterPreemption"], json!(false));
    assert_eq!(
        big["failedMessage"],
        json!("0/2 nodes are available: 2 Insufficient cpu.")
    );
    assert!(big["lastUpdateTime"].is_string(), "{big:#}");
    // 6 CPUs on 4-CPU nodes: no eviction makes room (kube's unresolvable Insufficient).
    let domain = &big["detailedExplanation"][0];
    assert!(domain.get("topologyDomain").is_none(), "{domain:#}");
    assert_eq!(
        domain["scheduleExplanation"]["nodeFailedDetails"],
        json!([{"failedPlugin": "NodeResourcesFit", "reason": "Insufficient cpu",
            "failedNodes": ["n1", "n2"], "preemptMightHelp": false}])
    );
    assert!(
        domain["preemptExplanation"]["failedMessage"]
            .as_str()
            .is_some_and(|m| m.contains("DefaultPreemption: No preemption victims found")),
        "{domain:#}"
    );
    // Grouped by the pod's topology key: one explanation per zone.
    let zoned = status_when(&k, "why-zoned", |s| s["detailedExplanation"].is_array()).await;
    let domains: Vec<(&str, &Value)> = zoned["detailedExplanation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let nodes = &d["scheduleExplanation"]["nodeFailedDetails"][0]["failedNodes"];
            (d["topologyDomain"].as_str().unwrap(), nodes)
        })
        .collect();
    assert_eq!(
        domains,
        vec![("a", &json!(["n1"])), ("b", &json!(["n2"]))],
        "{zoned:#}"
    );
    assert_eq!(
        zoned["detailedExplanation"][0]["failedMessage"],
        json!("0/1 nodes are available: 1 Insufficient cpu.")
    );

    // `koord explain schedule` over the same state says the same thing.
    let snap = dir.path().join("snapshot.json");
    let state = k.ok(&["get", "nodes,pods", "-A", "-o", "json"], None).await;
    std::fs::write(&snap, state).unwrap();
    let explained = common::explain_schedule(snap.to_str().unwrap());
    let of = |pod: &str| {
        explained["pods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pod"] == pod)
            .map(|p| p["scheduleExplanation"].clone())
            .unwrap()
    };
    assert_eq!(of("default/big"), without_time(big.clone()));
    assert_eq!(of("default/zoned"), without_time(zoned));

    // TTL over: deleted by the scheduler.
    let mut gone = false;
    for _ in 0..100 {
        let (ok, _, err) = k
            .run(&["get", "sched-exp", "short", "-n", "default"], None)
            .await;
        gone = !ok && err.contains("NotFound");
        if gone {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(gone, "the 2s ScheduleExplanation was not deleted");

    // Room appears: the pod is placed and the answer refreshed.
    let n3 = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n3", "labels": {"kubernetes.io/hostname": "n3"}},
        "status": {"allocatable": {"cpu": "16", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "16", "memory": "8Gi", "pods": "110"}}});
    k.ok(&["create", "-f", "-"], Some(&n3.to_string())).await;
    let placed = status_when(&k, "why-big", |s| s["schedulable"] == json!(true)).await;
    assert_eq!(
        placed["detailedExplanation"][0]["scheduleExplanation"]["feasibleSchedulingResult"],
        json!([{"namespace": "default", "name": "big", "nodeName": "n3"}]),
        "{placed:#}"
    );
    assert!(placed.get("failedMessage").is_none(), "{placed:#}");
}
