//! End to end with `koord --role=all --embedded` (root only; CI is root): a BE pod bound
//! to the local node runs as a real process in a besteffort cgroup; once the NodeSLO
//! (from slo-controller-config) enables suppression with a low threshold, the koordlet
//! lowers the besteffort CFS quota to what the formula allows and the pod's CPU drops.

use crate::common;

use std::time::Duration;

use common::burner::{can_run, cpu_seconds};
use common::{Koord, eventually, free_port};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const NODE: &str = "koord-node";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn be_pod_is_suppressed_when_the_node_is_busy() {
    let _cpu = common::cpu_exclusive();
    if !can_run() {
        eprintln!("skipping: needs root and a cgroup hierarchy at /sys/fs/cgroup");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let parent = format!("koord-test-{}-qos-e2e", std::process::id());
    let pods_addr = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let koord = Koord::start(
        &[
            "--role=all",
            "--embedded",
            "--embedded-addr",
            &format!("127.0.0.1:{api_port}"),
            "--admin-addr",
            &admin,
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--node-name",
            NODE,
        ],
        &[
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
                parent.as_str(),
            ),
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR",
                pods_addr.as_str(),
            ),
        ],
        dir.path(),
    );
    let kc = dir.path().join("kubeconfig");
    let client = common::embedded_client(&koord, &kc).await;
    let pp = PostParams::default();
    let data = json!({"colocation-config": "{\"enable\": true}",
        "resource-threshold-config": "{\"clusterStrategy\": {\"enable\": true, \"cpuSuppressThresholdPercent\": 5, \"cpuSuppressPolicy\": \"cfsQuota\"}}"});
    common::create_slo_config(&client, &koord, data).await;
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "be-loop", "namespace": "default", "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {"nodeName": NODE, "priorityClassName": "koord-batch", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "loop", "image": "busybox", "command": ["sh", "-c", format!("while true; do :; done # {}", common::marker())],
                "resources": {"requests": {"kubernetes.io/batch-cpu": "1000"}, "limits": {"kubernetes.io/batch-cpu": "1000"}}}]}})).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&pp, &pod).await.unwrap();

    // 2 cores × 5 % = 100 milli-cores at most for BE, minus whatever else runs: the quota
    // lands between the 2000 µs floor and 10000 µs.
    let v1 = std::path::Path::new("/sys/fs/cgroup/cpu").exists();
    let base = if v1 {
        format!("/sys/fs/cgroup/cpu/{parent}")
    } else {
        format!("/sys/fs/cgroup/{parent}")
    };
    let quota_file = format!(
        "{base}/kubepods/besteffort/{}",
        if v1 { "cpu.cfs_quota_us" } else { "cpu.max" }
    );
    let read_quota = || -> Option<i64> {
        let raw = std::fs::read_to_string(&quota_file).ok()?;
        raw.split_whitespace().next()?.parse().ok()
    };
    let suppressed = eventually(Duration::from_secs(60), || async {
        read_quota().is_some_and(|q| (2000..=10_000).contains(&q))
    })
    .await;
    assert!(suppressed, "quota {:?}\n{}", read_quota(), koord.logs());
    let procs = format!("{base}/kubepods/besteffort");
    let pid = std::fs::read_dir(&procs)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| std::fs::read_to_string(e.path().join("cgroup.procs")).ok())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| l.trim().parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<u32>>();
    // The busy loop and the shim waiting for it: the first pid alone may be the idle shim.
    assert!(
        !pid.is_empty(),
        "the BE pod's processes in its container cgroup"
    );
    let cpu_seconds = |pids: &[u32]| pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>();
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let evented = eventually(Duration::from_secs(10), || async {
        events.list(&Default::default()).await.is_ok_and(|l| {
            l.items
                .iter()
                .any(|e| e.reason.as_deref() == Some("BECPUSuppressed"))
        })
    })
    .await;
    assert!(evented, "a BECPUSuppressed event on the node");
    // BatchResource: the BE pod's cgroup gets shares from its batch-cpu request (1000 → 1024).
    if v1 {
        let shares = std::fs::read_dir(&procs)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .find_map(|e| std::fs::read_to_string(e.path().join("cpu.shares")).ok());
        let ok = eventually(Duration::from_secs(10), || async {
            std::fs::read_dir(&procs)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.path().is_dir())
                .any(|e| {
                    std::fs::read_to_string(e.path().join("cpu.shares"))
                        .is_ok_and(|s| s.trim() == "1024")
                })
        })
        .await;
        assert!(ok, "BE pod cpu.shares {shares:?}");
    }
    let c0 = cpu_seconds(&pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cores = (cpu_seconds(&pid) - c0) / 2.0;
    assert!(cores < 0.2, "the BE pod still uses {cores:.2} cores");
    drop(koord);
    let gone = eventually(Duration::from_secs(20), || async {
        !std::path::Path::new(&base).exists()
    })
    .await;
    assert!(gone, "koord left its cgroups behind");
}
