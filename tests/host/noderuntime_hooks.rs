//! The embedded node runtime as a runtime hook client: a container started by it has the
//! registered hook server's cgroup values, cpuset and env at its first instruction.

use crate::common;

use std::time::Duration;

use serde_json::json;

use super::noderuntime::{config, phase, pod, setup_with};
use super::runtime_proxy::{TestHooks, register, serve_hooks};

/// The container's env, cpu.shares and cpuset, read from inside it first thing.
const PROBE: &str = "echo env=$HOOKED; p=$(grep -E ':cpu,cpuacct:|:cpu:' /proc/self/cgroup | head -1 | cut -d: -f3); \
    cat /sys/fs/cgroup/cpu,cpuacct$p/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu$p/cpu.shares; \
    q=$(grep -E ':cpuset:' /proc/self/cgroup | head -1 | cut -d: -f3); cat /sys/fs/cgroup/cpuset$q/cpuset.cpus";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_pods_get_hook_values_before_their_first_instruction() {
    let _cpu = common::cpu_exclusive();
    if !std::path::Path::new("/sys/fs/cgroup/cpu").exists() {
        eprintln!("skipping: the probe reads cgroup v1 files");
        return;
    }
    let hooks_dir = tempfile::tempdir().unwrap();
    let socket = hooks_dir.path().join("hooks.sock");
    let hooks = TestHooks::default();
    let server = serve_hooks(&socket, hooks.clone());
    let registry = hooks_dir.path().join("hookserver.d");
    register(&registry, &socket, "Ignore");
    let mut cfg = config("hooks", false);
    cfg.hook_server_dir = Some(registry);
    let Some(rt) = setup_with(cfg).await else {
        server.abort();
        return;
    };
    // Requests of 500m would give 512 shares; the hook answers 2, cpuset 0 and HOOKED=yes.
    rt.create(pod(
        "probe",
        "Never",
        PROBE,
        json!({"requests": {"cpu": "500m"}}),
    ))
    .await;
    rt.wait("probe", "Succeeded", Duration::from_secs(20), |p| {
        phase(p) == "Succeeded"
    })
    .await;
    let logs = rt.pods.logs("probe", &Default::default()).await.unwrap();
    assert_eq!(
        logs, "env=yes\n2\n0\n",
        "hook values at the first instruction"
    );
    assert!(
        hooks
            .calls
            .lock()
            .unwrap()
            .iter()
            .any(|c| c == "PreCreateContainer:probe"),
        "{:?}",
        hooks.calls.lock().unwrap()
    );
    rt.finish().await;
    server.abort();
}

/// The container's CFS quota, cpu.shares and memory limit, read from inside it first thing.
const BE_PROBE: &str = "c=$(grep -E ':cpu,cpuacct:|:cpu:' /proc/self/cgroup | head -1 | cut -d: -f3); \
    cat /sys/fs/cgroup/cpu,cpuacct$c/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu$c/cpu.cfs_quota_us; \
    cat /sys/fs/cgroup/cpu,cpuacct$c/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu$c/cpu.shares; \
    m=$(grep -E ':memory:' /proc/self/cgroup | head -1 | cut -d: -f3); cat /sys/fs/cgroup/memory$m/memory.limit_in_bytes";

/// The koordlet's own hook server, with an informer that has never seen the pod (no
/// reconciler can have run): a brand-new BE container reads its batch CFS quota, shares and
/// memory limit at its first instruction, decided from the hook request alone — its labels
/// and the `extended-resource-spec` annotation the manager's webhook writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brand_new_be_pod_is_limited_at_its_first_instruction() {
    use koord::koordlet::informer::{Informer, States};
    use koord::koordlet::runtimehooks::{self, rules::Rules, server::Hooks};
    let _cpu = common::cpu_exclusive();
    if !std::path::Path::new("/sys/fs/cgroup/cpu").exists() {
        eprintln!("skipping: the probe reads cgroup v1 files");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("hookserver.d");
    std::fs::create_dir_all(&registry).unwrap();
    let cgroups = koord::os::Cgroups::new(
        "/sys/fs/cgroup",
        koord::os::Version::V1,
        koord::os::Driver::Cgroupfs,
        "",
    );
    let rules = Rules {
        batch_resource: true,
        ..Rules::OFF
    };
    let hooks = Hooks::new(
        Informer::fixed(States::default()),
        rules,
        cgroups,
        Vec::new(),
    );
    let cfg = runtimehooks::Config {
        socket: dir.path().join("koordlet.sock"),
        hook_server_dir: registry.clone(),
        ..Default::default()
    };
    let shutdown = koord::kernel::Shutdown::new();
    let server = tokio::spawn(runtimehooks::server::serve(
        cfg,
        std::sync::Arc::new(hooks),
        shutdown.clone(),
    ));
    assert!(common::wait_until(Duration::from_secs(10), || registry
        .join("koordlet.json")
        .exists()));
    let mut cfg = config("brandnew", false);
    cfg.hook_server_dir = Some(registry);
    let Some(rt) = setup_with(cfg).await else {
        shutdown.begin_drain();
        server.abort();
        return;
    };
    let batch = json!({"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "64Mi"},
                       "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "128Mi"}});
    let mut be = pod("be", "Never", BE_PROBE, batch.clone());
    be["metadata"]["labels"] = json!({"koordinator.sh/qosClass": "BE"});
    be["metadata"]["annotations"] = json!({"node.koordinator.sh/extended-resource-spec":
        json!({"containers": {"main": batch}}).to_string()});
    rt.create(be).await;
    rt.wait("be", "Succeeded", Duration::from_secs(20), |p| {
        phase(p) == "Succeeded"
    })
    .await;
    let logs = rt.pods.logs("be", &Default::default()).await.unwrap();
    assert_eq!(
        logs,
        format!("100000\n512\n{}\n", 128u64 << 20),
        "quota from the batch-cpu limit, shares from the request, memory limit, not -1"
    );
    rt.finish().await;
    shutdown.begin_drain();
    server.abort();
}
