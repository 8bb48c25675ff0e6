//! The koordlet's runtime hooks behind `koord --role=runtime-proxy` and a real containerd:
//! what a container reads at its first instruction is what the hooks decided.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::containerd::Containerd;
use common::{Koord, free_port, http_get, wait_until};
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use koord::koordlet::informer::{Informer, PodMeta, States};
use koord::koordlet::runtimehooks::{self, rules::Rules, server::Hooks};
use serde_json::json;

use super::runtime_proxy::{log_lines, remove_sandbox, run_probe, sandbox_config, start_proxy};

/// cpu.shares, cfs_quota_us, memory limit, cpuset and the GPU env as the container sees
/// them (cgroup v1).
const BE_PROBE: &str = "cat /sys/fs/cgroup/cpu,cpuacct/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.shares; \
    cat /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us; \
    cat /sys/fs/cgroup/memory/memory.limit_in_bytes; cat /sys/fs/cgroup/cpuset/cpuset.cpus; \
    echo gpu=$NVIDIA_VISIBLE_DEVICES; sleep 3600";

fn pod(uid: &str, qos: &str, extra: serde_json::Value) -> k8s_openapi::api::core::v1::Pod {
    let mut p = json!({
        "metadata": {"name": uid, "namespace": "default", "uid": uid,
                     "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {"containers": [{"name": "work"}]}});
    json_patch::merge(&mut p, &extra);
    serde_json::from_value(p).unwrap()
}

fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| koord::api::cpuset::parse(s.trim()).ok())
        .unwrap_or_default()
}

/// The koordlet's hook server (its real code; the pod list fixed instead of watched):
/// a BE container gets its batch values, the BE share pool (every CPU but the LSE pod's)
/// and its GPU env; an LS pod's cgroup gets its bvt where the kernel has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_koordlets_hooks_give_be_containers_their_values_before_they_run() {
    let _cpu = common::cpu_exclusive();
    let online = online_cpus();
    if online.len() < 2 {
        eprintln!("skipping: needs 2 CPUs to tell the BE share pool from all CPUs");
        return;
    }
    let Some(ctrd) = Containerd::start("proxy-koordlet") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hook_dir = dir.path().join("hookserver.d");
    std::fs::create_dir_all(&hook_dir).unwrap();
    let lse = pod(
        "uid-lse",
        "LSE",
        json!({"metadata": {"annotations": {
        "scheduling.koordinator.sh/resource-status": "{\"cpuset\":\"0\"}"}}}),
    );
    let be = pod(
        "uid-be",
        "BE",
        // NUMA-aware (placed on node 0 with batch-cpu): under BECPUManager its container gets
        // the BE share pool of that node (Koordinator's cpuset rule; a BestEffort pod without
        // a NUMA placement keeps its parent's CPUs).
        json!({"metadata": {"annotations": {"scheduling.koordinator.sh/resource-status":
            "{\"numaNodeResources\":[{\"node\":0,\"resources\":{\"kubernetes.io/batch-cpu\":\"1k\"}}]}"}},
            "spec": {"containers": [{"name": "work", "resources": {
        "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "64Mi"},
        "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "128Mi"}}}]}}),
    );
    let ls = pod("uid-ls", "LS", json!({}));
    let slo: koord::api::slo::NodeSLO = serde_json::from_value(json!({"metadata": {"name": "n"},
        "spec": {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": true, "groupIdentity": 2}}}}}))
    .unwrap();
    let cg = koord::os::Cgroups::new(
        "/sys/fs/cgroup",
        koord::os::Version::V1,
        koord::os::Driver::Cgroupfs,
        "",
    );
    let states = States {
        pods: Arc::new(
            [lse, be, ls]
                .into_iter()
                .filter_map(|p| PodMeta::new(p, &cg))
                .collect(),
        ),
        node_slo: Some(Arc::new(slo)),
        ..Default::default()
    };
    let rules = Rules {
        batch_resource: true,
        cpuset: true,
        group_identity: true,
        gpu_env_inject: true,
        rdma_device_inject: true,
        be_cpu_manager: true,
        unset_cpu_quota: false,
    };
    let cpus = koord::os::system::Host::new("/proc", "/sys")
        .cpu_topology()
        .unwrap_or_default();
    if cpus.iter().any(|c| c.numa != 0) {
        eprintln!("skipping: the BE pool check expects one NUMA node");
        return;
    }
    let mut hooks = Hooks::new(Informer::fixed(states), rules, cg, cpus);
    let registry = koord::kernel::Metrics::new();
    let metrics = koord::koordlet::metrics::KoordletMetrics::register(&registry);
    hooks.observed = Some((metrics, "hooks-node".into()));
    let hooks = Arc::new(hooks);
    let cfg = runtimehooks::Config {
        socket: dir.path().join("koordlet.sock"),
        hook_server_dir: hook_dir.clone(),
        ..Default::default()
    };
    let shutdown = koord::kernel::Shutdown::new();
    let server = tokio::spawn(runtimehooks::server::serve(cfg, hooks, shutdown.clone()));
    assert!(wait_until(Duration::from_secs(10), || hook_dir
        .join("koordlet.json")
        .exists()));
    let (proxy, socket) = start_proxy(dir.path(), &ctrd.socket, &hook_dir);
    let mut rt = RuntimeServiceClient::new(koord::kernel::cri::unix_channel(socket));

    let logs = dir.path().join("logs-be");
    std::fs::create_dir_all(&logs).unwrap();
    let mut be_cfg = sandbox_config(&ctrd, "uid-be", "uid-be", &logs);
    // GPUEnvInject reads the scheduler's allocation from the pod's annotations.
    be_cfg.annotations.insert(
        "scheduling.koordinator.sh/device-allocated".into(),
        r#"{"gpu": [{"minor": 1}]}"#.into(),
    );
    let sandbox = run_probe(&mut rt, &be_cfg, BE_PROBE)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", proxy.logs()));
    assert!(
        wait_until(Duration::from_secs(10), || log_lines(&logs).len() >= 5),
        "{:?}",
        log_lines(&logs)
    );
    let seen = log_lines(&logs);
    assert_eq!(seen[0], "512", "cpu.shares from batch-cpu 500");
    assert_eq!(seen[1], "100000", "CFS quota from the batch-cpu limit 1000");
    assert_eq!(
        seen[2],
        (128u64 << 20).to_string(),
        "memory limit from batch-memory"
    );
    assert_eq!(
        seen[3],
        koord::api::cpuset::format(&online[1..]),
        "node 0's BE share pool"
    );
    assert_eq!(seen[4], "gpu=1", "GPUEnvInject from the device allocation");
    remove_sandbox(&mut rt, &sandbox).await;
    // Each hook call is timed under Koordinator's hook and stage names.
    let text = registry.encode();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let timed: std::collections::BTreeSet<(String, String)> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "koordlet_runtime_hook_invoked_duration_milliseconds")
        .map(|s| {
            let l = |k: &str| s.labels.get(k).unwrap_or_default().to_string();
            (l("hook"), l("stage"))
        })
        .collect();
    for (hook, stage) in [
        ("BatchResource", "PreCreateContainer"),
        ("CPUSetAllocator", "PreCreateContainer"),
        ("gpu env inject", "PreCreateContainer"),
        ("GroupIdentity", "PreRunPodSandbox"),
    ] {
        assert!(
            timed.contains(&(hook.to_string(), stage.to_string())),
            "{hook} at {stage} not timed: {timed:?}"
        );
    }

    // GroupIdentity: an LS pod's cgroup gets bvt 2 when its sandbox is created, where the
    // kernel has cpu.bvt_warp_ns (Alibaba Cloud Linux); elsewhere the check is skipped.
    let ls_cfg = sandbox_config(&ctrd, "uid-ls", "uid-ls", &logs);
    let ls_sandbox = run_probe(&mut rt, &ls_cfg, "sleep 3600").await.unwrap();
    let parent = ls_cfg.linux.unwrap().cgroup_parent;
    let bvt = Path::new("/sys/fs/cgroup/cpu")
        .join(parent.trim_start_matches('/'))
        .join("cpu.bvt_warp_ns");
    match std::fs::read_to_string(&bvt) {
        Ok(v) => assert_eq!(v.trim(), "2", "bvt of the LS pod"),
        Err(_) => eprintln!(
            "skipped the bvt check: this kernel has no cpu.bvt_warp_ns ({})",
            bvt.display()
        ),
    }
    remove_sandbox(&mut rt, &ls_sandbox).await;
    drop(proxy);
    shutdown.begin_drain();
    let _ = server.await;
}

/// As deployed: a separate `koord --role=koordlet` process (its API server embedded, pods
/// watched from it) serves the hooks it registered in hookserver.d, and the proxy in front
/// of containerd calls them for a BE pod the API server knows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_koordlet_process_serves_the_proxy() {
    use kube::api::{Api, PostParams};
    let _cpu = common::cpu_exclusive();
    let Some(ctrd) = Containerd::start("proxy-process") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hook_dir = dir.path().join("hookserver.d");
    std::fs::create_dir_all(&hook_dir).unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let node = "hooks-node";
    let koordlet = Koord::start(
        &[
            "--role=koordlet",
            "--embedded",
            "--embedded-addr",
            &format!("127.0.0.1:{}", free_port()),
            "--admin-addr",
            &admin.to_string(),
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--node-name",
            node,
        ],
        &[
            ("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false"),
            (
                "KOORD_KOORDLET__RUNTIME_HOOKS__HOOK_SERVER_DIR",
                hook_dir.to_str().unwrap(),
            ),
        ],
        dir.path(),
    );
    let ready = wait_until(Duration::from_secs(30), || {
        http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    assert!(ready, "koordlet not ready:\n{}", koordlet.logs());
    assert!(
        wait_until(Duration::from_secs(10), || hook_dir
            .join("koordlet.json")
            .exists()),
        "the koordlet registers its hooks:\n{}",
        koordlet.logs()
    );
    let kubeconfig = kube::config::Kubeconfig::read_from(dir.path().join("kubeconfig")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    let be = pod(
        "be",
        "BE",
        json!({"metadata": {"uid": null}, "spec": {"nodeName": node,
        "containers": [{"name": "work", "image": "busybox", "resources": {
            "requests": {"kubernetes.io/batch-cpu": "250", "kubernetes.io/batch-memory": "32Mi"},
            "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "96Mi"}}}]}}),
    );
    let uid = pods
        .create(&PostParams::default(), &be)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    // The koordlet's informer watches the API server: give the pod a moment to arrive.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let (proxy, socket) = start_proxy(dir.path(), &ctrd.socket, &hook_dir);
    let mut rt = RuntimeServiceClient::new(koord::kernel::cri::unix_channel(socket));
    let logs = dir.path().join("logs-process");
    std::fs::create_dir_all(&logs).unwrap();
    let cfg = sandbox_config(&ctrd, "be", &uid, &logs);
    let sandbox = run_probe(&mut rt, &cfg, BE_PROBE)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", proxy.logs()));
    assert!(
        wait_until(Duration::from_secs(10), || log_lines(&logs).len() >= 3),
        "{:?}",
        log_lines(&logs)
    );
    let seen = log_lines(&logs);
    assert_eq!(
        seen[0],
        "256",
        "cpu.shares from batch-cpu 250:\n{}",
        koordlet.logs()
    );
    assert_eq!(seen[1], "50000", "CFS quota from the batch-cpu limit 500");
    assert_eq!(
        seen[2],
        (96u64 << 20).to_string(),
        "memory limit from batch-memory"
    );
    remove_sandbox(&mut rt, &sandbox).await;
    drop(proxy);
    drop(koordlet);
}
