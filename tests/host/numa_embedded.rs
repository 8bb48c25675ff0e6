//! CPU pinning end to end with `koord --role=all --embedded` (root only; CI is root): the
//! koordlet reports the node's NodeResourceTopology, the scheduler's NodeNUMAResource gives
//! an LSR pod whole CPUs in `resource-status`, the koordlet pins its container to exactly
//! that cpuset, and an LS pod's cpuset leaves those CPUs out.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::burner::can_run;
use common::{Koord, eventually, free_port};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

fn online() -> BTreeSet<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| koord::api::cpuset::parse(s.trim()).ok())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

fn set(s: &str) -> BTreeSet<u32> {
    koord::api::cpuset::parse(s.trim())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The container cgroup dirs (cpuset hierarchy) of the pod with this uid.
fn container_dirs(root: &Path, uid: &str) -> Vec<PathBuf> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            if p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(uid))
            {
                return std::fs::read_dir(&p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect();
            }
            stack.push(p);
        }
    }
    Vec::new()
}

fn cpusets(root: &Path, uid: &str) -> Vec<BTreeSet<u32>> {
    container_dirs(root, uid)
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("cpuset.cpus")).ok())
        .map(|s| set(&s))
        .collect()
}

fn pod(name: &str, qos: &str, class: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {"schedulerName": "koord-scheduler", "priorityClassName": class, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", format!("sleep 3600 # {}", common::marker())],
                "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}, "limits": {"cpu": cpu, "memory": "32Mi"}}}]}}))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lsr_pod_is_pinned_to_the_cpus_the_scheduler_gave_it() {
    let _cpu = common::cpu_exclusive();
    if !can_run() || !Path::new("/sys/fs/cgroup/cpuset").exists() {
        eprintln!("skipping: needs root and a cgroup v1 cpuset hierarchy");
        return;
    }
    let cpus = online();
    if cpus.len() < 2 {
        eprintln!("skipping: needs 2 online CPUs to tell a pinned CPU from the share pool");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let parent = format!("koord-test-{}-numa-e2e", std::process::id());
    let (api, admin, pods_addr) = (free_port(), free_port(), free_port());
    let koord = Koord::start(
        &[
            "--role=all",
            "--embedded",
            "--embedded-addr",
            &format!("127.0.0.1:{api}"),
            "--admin-addr",
            &format!("127.0.0.1:{admin}"),
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--node-name",
            "koord-node",
        ],
        &[
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
                parent.as_str(),
            ),
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR",
                &format!("127.0.0.1:{pods_addr}"),
            ),
        ],
        dir.path(),
    );
    let kc = dir.path().join("kubeconfig");
    let client = common::embedded_client(&koord, &kc).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let created = eventually(Duration::from_secs(30), || async {
        pods.create(&pp, &pod("pinned", "LSR", "koord-prod", "1"))
            .await
            .is_ok()
    })
    .await;
    assert!(created, "{}", koord.logs());

    // The scheduler writes the cpuset once the koordlet has reported the topology.
    let given_of = |p: Pod| -> BTreeSet<u32> {
        let status = p
            .metadata
            .annotations
            .unwrap_or_default()
            .remove("scheduling.koordinator.sh/resource-status");
        let v: Option<serde_json::Value> = status.and_then(|s| serde_json::from_str(&s).ok());
        v.and_then(|v| v["cpuset"].as_str().map(set))
            .unwrap_or_default()
    };
    let scheduled = eventually(Duration::from_secs(60), || async {
        pods.get("pinned")
            .await
            .is_ok_and(|p| !given_of(p).is_empty())
    })
    .await;
    assert!(scheduled, "no resource-status cpuset\n{}", koord.logs());
    let pinned = pods.get("pinned").await.unwrap();
    let given = given_of(pinned.clone());
    assert_eq!(given.len(), 1, "one whole CPU: {given:?}");
    let uid = pinned.metadata.uid.clone().unwrap();
    let root = PathBuf::from(format!("/sys/fs/cgroup/cpuset/{parent}"));
    let exact = eventually(Duration::from_secs(30), || async {
        let sets = cpusets(&root, &uid);
        !sets.is_empty() && sets.iter().all(|s| *s == given)
    })
    .await;
    assert!(
        exact,
        "container cpusets {:?}, scheduler gave {given:?}\n{}",
        cpusets(&root, &uid),
        koord.logs()
    );

    pods.create(&pp, &pod("shared", "LS", "koord-prod", "100m"))
        .await
        .unwrap();
    let ls_uid = eventually(Duration::from_secs(30), || async {
        pods.get("shared")
            .await
            .is_ok_and(|p| p.spec.and_then(|s| s.node_name).is_some())
    })
    .await;
    assert!(ls_uid, "LS pod not scheduled\n{}", koord.logs());
    let ls = pods.get("shared").await.unwrap().metadata.uid.unwrap();
    let pool: BTreeSet<u32> = cpus.difference(&given).copied().collect();
    let excluded = eventually(Duration::from_secs(30), || async {
        let sets = cpusets(&root, &ls);
        !sets.is_empty() && sets.iter().all(|s| *s == pool)
    })
    .await;
    assert!(
        excluded,
        "LS cpusets {:?}, want the share pool {pool:?}\n{}",
        cpusets(&root, &ls),
        koord.logs()
    );
    let nrt = Api::<koord::api::topology::NodeResourceTopology>::all(client)
        .get("koord-node")
        .await
        .unwrap();
    let ann = nrt.metadata.annotations.unwrap_or_default();
    assert!(
        ann.contains_key("node.koordinator.sh/cpu-topology"),
        "{ann:?}"
    );
    drop(koord);
    let gone = eventually(Duration::from_secs(20), || async { !root.exists() }).await;
    assert!(gone, "koord left its cgroups behind");
}
