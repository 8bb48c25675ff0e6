//! Colocation as an operator turns it on, with `koord --role=all --embedded` on this machine
//! (root only; CI is root): an ordinary pod gets the kubelet's CPU values from the
//! koordlet's runtime hooks (not BE's), BE suppressed by a low threshold recovers once the
//! threshold is raised, and the besteffort QoS cgroup keeps the kubelet's weight after the
//! BE policy switches in and out of `cpu.idle`.

use crate::common;

use std::time::{Duration, Instant};

use common::burner::{can_run, cpu_seconds};
use common::{Koord, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

const NODE: &str = "koord-coloc-node";

/// The container's cpu.shares and CFS quota, read from inside it first thing.
const PROBE: &str = "c=$(grep -E ':cpu,cpuacct:|:cpu:' /proc/self/cgroup | head -1 | cut -d: -f3); \
    cat /sys/fs/cgroup/cpu,cpuacct$c/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu$c/cpu.shares; \
    cat /sys/fs/cgroup/cpu,cpuacct$c/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu$c/cpu.cfs_quota_us";

fn threshold(percent: u32, policy: &str) -> String {
    json!({"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": percent,
        "cpuSuppressPolicy": policy}})
    .to_string()
}

struct Besteffort {
    dir: String,
    v1: bool,
}

impl Besteffort {
    fn read(&self, v1: &str, v2: &str) -> Option<String> {
        let f = if self.v1 { v1 } else { v2 };
        let raw = std::fs::read_to_string(format!("{}/{f}", self.dir)).ok()?;
        raw.split_whitespace().next().map(str::to_string)
    }
    fn quota(&self) -> Option<i64> {
        match self.read("cpu.cfs_quota_us", "cpu.max")?.as_str() {
            "max" => Some(-1),
            q => q.parse().ok(),
        }
    }
    /// `cpu.shares` (v1) or `cpu.weight` (v2).
    fn weight(&self) -> Option<String> {
        self.read("cpu.shares", "cpu.weight")
    }
    fn idle(&self) -> Option<String> {
        self.read("cpu.idle", "cpu.idle")
    }
}

async fn set_threshold(cms: &Api<ConfigMap>, value: String) {
    let patch = json!({"data": {"resource-threshold-config": value}});
    cms.patch(
        "slo-controller-config",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_pods_keep_kubelet_values_and_be_recovers() {
    let _cpu = common::cpu_exclusive();
    if !can_run() {
        eprintln!("skipping: needs root and a cgroup hierarchy at /sys/fs/cgroup");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let parent = format!("koord-test-{}-coloc", std::process::id());
    let envs = [(
        "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
        parent.as_str(),
    )];
    let koord = Koord::embedded(dir.path(), &["--node-name", NODE], &envs);
    let kc = dir.path().join("data/kubeconfig");
    let client = common::embedded_client(&koord, &kc).await;
    let pp = PostParams::default();
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": {"colocation-config": "{\"enable\": true}",
                 "resource-threshold-config": threshold(5, "cfsQuota")}}),
    )
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "koordinator-system");
    let created = eventually(Duration::from_secs(20), || async {
        cms.create(&pp, &cm).await.is_ok()
    });
    assert!(created.await, "{}", koord.logs());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let burner: Pod = serde_json::from_value(json!({"metadata": {"name": "be-loop", "namespace": "default", "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "loop", "image": "busybox", "command": ["sh", "-c", format!("while true; do :; done # {}", common::marker())],
                "resources": {"requests": {"kubernetes.io/batch-cpu": "1000"}, "limits": {"kubernetes.io/batch-cpu": "1000"}}}]}})).unwrap();
    pods.create(&pp, &burner).await.unwrap();

    let v1 = std::path::Path::new("/sys/fs/cgroup/cpu").exists();
    let base = if v1 {
        format!("/sys/fs/cgroup/cpu/{parent}")
    } else {
        format!("/sys/fs/cgroup/{parent}")
    };
    let be = Besteffort {
        dir: format!("{base}/kubepods/besteffort"),
        v1,
    };
    let suppressed = eventually(Duration::from_secs(60), || async {
        be.quota().is_some_and(|q| (2000..=10_000).contains(&q))
    });
    assert!(suppressed.await, "quota {:?}\n{}", be.quota(), koord.logs());

    // An ordinary Burstable pod (900m / 1 CPU, no QoS label), created while the koordlet's
    // hooks are registered: the kubelet's 921 shares and 100000 µs at its first
    // instruction (was BE's cpu.shares 2 and no quota).
    let plain: Pod = serde_json::from_value(
        json!({"metadata": {"name": "plain", "namespace": "default"},
        "spec": {"nodeName": NODE, "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", PROBE],
                "resources": {"requests": {"cpu": "900m"}, "limits": {"cpu": "1"}}}]}}),
    )
    .unwrap();
    pods.create(&pp, &plain).await.unwrap();
    let done = eventually(Duration::from_secs(30), || async {
        pods.get("plain")
            .await
            .is_ok_and(|p| p.status.and_then(|s| s.phase).as_deref() == Some("Succeeded"))
    });
    assert!(done.await, "{}", koord.logs());
    let logs = pods.logs("plain", &Default::default()).await.unwrap();
    if v1 {
        assert_eq!(logs, "921\n100000\n", "the kubelet's values, not BE's");
    }

    // The threshold raised: BE gets its CPU back within two report intervals (the quota
    // grows by at most 10 % of the node a second).
    assert!(!be_pids(&be.dir).is_empty(), "the BE pod's processes");
    set_threshold(&cms, threshold(100, "cfsQuota")).await;
    let raised = Instant::now();
    let recovered = eventually(Duration::from_secs(120), || async {
        be.quota().is_some_and(|q| q >= 50_000)
    });
    assert!(recovered.await, "quota {:?}\n{}", be.quota(), koord.logs());
    let c0 = be_cpu_seconds(&be.dir);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cores = (be_cpu_seconds(&be.dir) - c0) / 2.0;
    assert!(
        cores > 0.3,
        "BE got {cores:.2} cores {:?} after the raise",
        raised.elapsed()
    );

    // In and out of cpu.idle: leaving it, the kernel resets the level's weight to 1024;
    // koord puts the kubelet's 2 shares (weight 1) back.
    if be.idle().is_some() {
        set_threshold(&cms, threshold(100, "cpuIdle")).await;
        let idle = eventually(Duration::from_secs(30), || async {
            be.idle().as_deref() == Some("1") && be.quota() == Some(-1)
        });
        assert!(idle.await, "idle {:?} quota {:?}", be.idle(), be.quota());
        set_threshold(&cms, threshold(100, "cfsQuota")).await;
        let back = eventually(Duration::from_secs(30), || async {
            be.idle().as_deref() == Some("0")
        });
        assert!(back.await, "idle {:?}", be.idle());
        let kubelet = if v1 { "2" } else { "1" };
        let weight = eventually(Duration::from_secs(5), || async {
            be.weight().as_deref() == Some(kubelet)
        });
        assert!(weight.await, "besteffort weight {:?}", be.weight());
    } else {
        eprintln!("no cpu.idle on this kernel: the cpu.idle switch is not checked");
    }
    drop(koord);
    let gone = eventually(Duration::from_secs(20), || async {
        !std::path::Path::new(&base).exists()
    });
    assert!(gone.await, "koord left its cgroups behind");
}

/// The CPU seconds of every process in the container cgroups below the besteffort level
/// (the busy loop and the shim that waits for it).
fn be_cpu_seconds(besteffort: &str) -> f64 {
    be_pids(besteffort).into_iter().map(cpu_seconds).sum()
}

fn be_pids(besteffort: &str) -> Vec<u32> {
    let dirs = |d: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()
    };
    dirs(std::path::Path::new(besteffort))
        .iter()
        .flat_map(|pod| dirs(pod))
        .filter_map(|c| std::fs::read_to_string(c.join("cgroup.procs")).ok())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}
