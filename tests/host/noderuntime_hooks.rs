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
