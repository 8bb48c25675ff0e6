//! Fault tests (Sieve-style): a role killed with SIGKILL at the moment that matters —
//! right after a Bind (plain pods, ElasticQuota pods), between a Reservation's or a GPU's
//! allocation patch and the Bind (and, in `migration_loop.rs`, right after a migration job
//! created its Reservation; in `manager.rs`, in the middle of a NodeResource pass) — then
//! restarted; or paused with SIGSTOP just before a Bind until a new leader took over, then
//! resumed. Nothing is bound twice or counted twice, and the work converges. The points
//! are `koord::kernel::fault`'s.

use crate::common;
use crate::quota::{
    node_of, quota, quota_pod, start_scheduler_with, two_nodes, unschedulable_reason, used_cpu,
};
use crate::reservation::{CONFIG, phase, pod, reservation, start_with};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use common::{TestApi, eventually, free_port};
use k8s_openapi::api::core::v1::Pod;
use koord::api::scheduling::reservation::Reservation;
use kube::Api;
use kube::api::PostParams;

const FAULTS: &str = koord::kernel::fault::ENV;

/// An API server on a port of its own with `count` simulated nodes of `cpu` (none: 0).
async fn api_with_nodes(count: u32, cpu: &str) -> (TestApi, u16) {
    let port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    opts.sim = (count > 0).then(|| koord::apiserver::sim::SimNodes {
        count,
        cpu: cpu.into(),
        memory: "16Gi".into(),
        pods: 110,
    });
    (TestApi::start_with(opts).await, port)
}

/// The scheduler configuration file and a scheduler that dies at `fault`.
fn scheduler_armed(
    dir: &std::path::Path,
    port: u16,
    fault: &str,
) -> (std::path::PathBuf, common::Koord) {
    let cfg = dir.join("sched.yaml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let first = start_with(dir, port, &cfg, &[(FAULTS, fault)]);
    (cfg, first)
}

/// Requested CPU (cores) bound to each node.
async fn cpu_by_node(pods: &Api<Pod>) -> BTreeMap<String, f64> {
    let mut by = BTreeMap::new();
    for p in pods.list(&Default::default()).await.unwrap().items {
        let spec = p.spec.unwrap_or_default();
        let Some(node) = spec.node_name else { continue };
        let cpu: f64 = spec
            .containers
            .iter()
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu").cloned())
            .map(|q| q.0.parse::<f64>().unwrap_or(0.0))
            .sum();
        *by.entry(node).or_default() += cpu;
    }
    by
}

/// Killed right after its third Bind (before PostBind and the Scheduled event), the
/// scheduler restarts and fills two 4-CPU nodes with eight 1-CPU pods exactly: the pods
/// bound before the crash are counted, none is bound twice, no node is overcommitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_after_a_bind_overcommits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_with_nodes(2, "4").await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    let (cfg, mut first) = scheduler_armed(dir.path(), port, "scheduler.after-bind@3");
    for i in 0..8 {
        let p = pod(&format!("p{i}"), "1", "fill");
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    assert!(
        first.wait_exit(Duration::from_secs(30)).is_some(),
        "the fault point was not reached\n{}",
        first.logs()
    );
    let bound_at_crash = cpu_by_node(&pods).await.values().sum::<f64>();
    assert!(bound_at_crash >= 3.0, "three binds before the crash");
    let second = start_with(dir.path(), port, &cfg, &[]);
    let all = eventually(Duration::from_secs(30), || async {
        cpu_by_node(&pods).await.values().sum::<f64>() == 8.0
    });
    assert!(
        all.await,
        "{:?}\n{}",
        cpu_by_node(&pods).await,
        second.logs()
    );
    for (node, cpu) in cpu_by_node(&pods).await {
        assert_eq!(cpu, 4.0, "{node} holds exactly its 4 CPUs");
    }
    drop(second);
    api.stop().await;
}

fn allocated_to(p: &Pod) -> Option<String> {
    let a = p.metadata.annotations.as_ref()?;
    let v: serde_json::Value =
        serde_json::from_str(a.get("scheduling.koordinator.sh/reservation-allocated")?).ok()?;
    v["name"].as_str().map(str::to_string)
}

/// Killed between the PreBind patch that allocates a pod into a Reservation and the Bind,
/// the scheduler restarts: the pod (annotated but unbound) is placed into the Reservation
/// once — a second owner still fits the 4 reserved CPUs beside it, and the 4 free CPUs go
/// to a non-owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_between_allocation_and_bind_counts_the_pod_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_with_nodes(1, "8").await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let rs: Api<Reservation> = Api::all(c.clone());
    let (cfg, mut first) = scheduler_armed(dir.path(), port, "scheduler.after-prebind");
    let mut web = reservation("web", "4", "web", "1h");
    web.spec.allocate_once = Some(false);
    rs.create(&pp, &web).await.unwrap();
    let available = eventually(Duration::from_secs(20), || async {
        phase(&rs, "web").await.0 == "Available"
    });
    assert!(available.await, "{}", first.logs());
    pods.create(&pp, &pod("web-1", "2", "web")).await.unwrap();
    assert!(
        first.wait_exit(Duration::from_secs(30)).is_some(),
        "the fault point was not reached\n{}",
        first.logs()
    );
    let p = pods.get("web-1").await.unwrap();
    assert_eq!(
        allocated_to(&p).as_deref(),
        Some("web"),
        "allocated before the crash"
    );
    assert_eq!(
        node_of(&pods, "web-1").await,
        None,
        "not bound before the crash"
    );

    let second = start_with(dir.path(), port, &cfg, &[]);
    pods.create(&pp, &pod("web-2", "2", "web")).await.unwrap();
    let placed = eventually(Duration::from_secs(30), || async {
        node_of(&pods, "web-1").await.is_some() && node_of(&pods, "web-2").await.is_some()
    });
    assert!(placed.await, "{}", second.logs());
    for name in ["web-1", "web-2"] {
        let p = pods.get(name).await.unwrap();
        assert_eq!(
            allocated_to(&p).as_deref(),
            Some("web"),
            "{name} in the reservation"
        );
    }
    pods.create(&pp, &pod("batch", "4", "batch")).await.unwrap();
    let fits = eventually(Duration::from_secs(20), || async {
        node_of(&pods, "batch").await.is_some()
    });
    assert!(
        fits.await,
        "the 4 unreserved CPUs are free\n{}",
        second.logs()
    );
    drop(second);
    api.stop().await;
}

/// Killed right after its second Bind of pods of an ElasticQuota (max 4 CPUs), the
/// scheduler restarts: of six 1-CPU pods the quota takes exactly four — the two bound
/// before the crash counted once — the others wait, and `status.used` says 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_after_a_quota_bind_counts_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = two_nodes(port).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let quotas: Api<koord::api::quota::ElasticQuota> = Api::namespaced(c.clone(), "default");
    quotas.create(&pp, &quota("team", "2", "4")).await.unwrap();
    let mut first = start_scheduler_with(dir.path(), port, &[(FAULTS, "scheduler.after-bind@2")]);
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for i in 0..6 {
        let p = quota_pod(&format!("team-{i}"), "team", "1");
        pods.create(&pp, &p).await.unwrap();
    }
    assert!(
        first.wait_exit(Duration::from_secs(30)).is_some(),
        "the fault point was not reached\n{}",
        first.logs()
    );
    let second = start_scheduler_with(dir.path(), port, &[]);
    let bound = || async { cpu_by_node(&pods).await.values().sum::<f64>() };
    let four = eventually(Duration::from_secs(30), || async { bound().await == 4.0 });
    assert!(
        four.await,
        "{:?}\n{}",
        cpu_by_node(&pods).await,
        second.logs()
    );
    let used = eventually(Duration::from_secs(20), || async {
        used_cpu(&quotas, "team").await.as_deref() == Some("4")
    });
    assert!(
        used.await,
        "status.used {:?}",
        used_cpu(&quotas, "team").await
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        bound().await,
        4.0,
        "the quota's max holds after the restart"
    );
    drop(second);
    api.stop().await;
}

fn gpu_pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "100m", "koordinator.sh/gpu-core": "100",
                "koordinator.sh/gpu-memory-ratio": "100"},
            "limits": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}}}]}}))
    .unwrap()
}

/// A node with two GPUs (its Node and its Device).
async fn gpu_node(c: &kube::Client) {
    let alloc = serde_json::json!({"cpu": "8", "memory": "16Gi", "pods": "110",
        "koordinator.sh/gpu-core": "200", "koordinator.sh/gpu-memory-ratio": "200",
        "koordinator.sh/gpu-memory": "32Gi"});
    let node = serde_json::json!({"metadata": {"name": "gpu-node", "labels": {"kubernetes.io/hostname": "gpu-node"}},
        "status": {"allocatable": alloc, "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}]}});
    Api::<k8s_openapi::api::core::v1::Node>::all(c.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(node).unwrap(),
        )
        .await
        .unwrap();
    let devices: Vec<serde_json::Value> = (0..2)
        .map(|minor| serde_json::json!({"type": "gpu", "id": format!("GPU-{minor}"), "minor": minor, "health": true,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                "koordinator.sh/gpu-memory-ratio": "100"}}))
        .collect();
    let device = serde_json::json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
        "metadata": {"name": "gpu-node"}, "spec": {"devices": devices}});
    Api::<koord::api::scheduling::device::Device>::all(c.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(device).unwrap(),
        )
        .await
        .unwrap();
}

/// Killed between DeviceShare's allocation patch (the pod annotated with its GPU, not
/// bound) and the Bind, the scheduler restarts: the pod gets one GPU, a second pod the
/// other, and a third waits — the GPU is counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_between_device_allocation_and_bind_counts_the_gpu_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_with_nodes(0, "").await;
    let c = api.client.clone();
    let pp = PostParams::default();
    gpu_node(&c).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut first = start_scheduler_with(dir.path(), port, &[(FAULTS, "scheduler.after-prebind")]);
    pods.create(&pp, &gpu_pod("gpu-1")).await.unwrap();
    assert!(
        first.wait_exit(Duration::from_secs(30)).is_some(),
        "the fault point was not reached\n{}",
        first.logs()
    );
    let p = pods.get("gpu-1").await.unwrap();
    let ann = p.metadata.annotations.unwrap_or_default();
    assert!(
        ann.contains_key("scheduling.koordinator.sh/device-allocated"),
        "{ann:?}"
    );
    assert_eq!(
        node_of(&pods, "gpu-1").await,
        None,
        "not bound before the crash"
    );
    let second = start_scheduler_with(dir.path(), port, &[]);
    pods.create(&pp, &gpu_pod("gpu-2")).await.unwrap();
    let both = eventually(Duration::from_secs(30), || async {
        node_of(&pods, "gpu-1").await.is_some() && node_of(&pods, "gpu-2").await.is_some()
    });
    assert!(both.await, "{}", second.logs());
    let minors = |p: Pod| {
        let a = p.metadata.annotations.unwrap_or_default();
        a.get("scheduling.koordinator.sh/device-allocated")
            .cloned()
            .unwrap_or_default()
    };
    let (a, b) = (
        minors(pods.get("gpu-1").await.unwrap()),
        minors(pods.get("gpu-2").await.unwrap()),
    );
    assert_ne!(a, b, "two pods, two GPUs: {a} / {b}");
    pods.create(&pp, &gpu_pod("gpu-3")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        node_of(&pods, "gpu-3").await,
        None,
        "no third GPU\n{}",
        second.logs()
    );
    let why = unschedulable_reason(&pods, "gpu-3").await;
    assert!(why.contains("Insufficient"), "{why}");
    drop(second);
    api.stop().await;
}

/// A short lease, so a paused leader loses it in seconds.
const SHORT_LEASE: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: true, leaseDuration: 3s, renewDeadline: 2s, retryPeriod: 1s}
profiles:
- schedulerName: koord-scheduler
"#;

/// The state letter of `/proc/<pid>/stat` (`T` stopped).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Paused (SIGSTOP) after deciding a pod fits a node and before its Bind, the leader
/// loses its lease; meanwhile the node fills (a pod bound there directly) and the new
/// leader finds the pod unschedulable. Resumed, the old leader does not bind its stale
/// decision — the API would accept it, as the pod is still unbound — so the node is not
/// overcommitted and the pod stays pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_paused_before_a_bind_does_not_bind_once_its_lease_is_gone() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut api, port) = api_with_nodes(1, "4").await;
    let c = api.client.clone();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let node = koord_node_name(&c).await;
    let cfg = dir_a.path().join("sched.yaml");
    std::fs::write(&cfg, SHORT_LEASE).unwrap();
    let mut paused = start_with(
        dir_a.path(),
        port,
        &cfg,
        &[(FAULTS, "scheduler.before-bind:pause")],
    );
    let pp = PostParams::default();
    pods.create(&pp, &pod("stale", "4", "x")).await.unwrap();
    let stopped = common::wait_until(Duration::from_secs(30), || {
        proc_state(paused.pid()) == Some('T')
    });
    assert!(
        stopped,
        "the pause point was not reached\n{}",
        paused.logs()
    );
    assert_eq!(
        node_of(&pods, "stale").await,
        None,
        "paused before its bind\n{}",
        paused.logs()
    );
    let mut direct = pod("direct", "4", "y");
    direct.spec.as_mut().unwrap().node_name = Some(node.clone());
    pods.create(&pp, &direct).await.unwrap();
    let leader = start_with(dir_b.path(), port, &cfg, &[]);
    let refused = eventually(Duration::from_secs(30), || async {
        !unschedulable_reason(&pods, "stale").await.is_empty()
    });
    assert!(
        refused.await,
        "the new leader never tried\n{}",
        leader.logs()
    );
    paused.signal("CONT");
    // Running again, past the point where it would bind.
    let running = common::wait_until(Duration::from_secs(15), || {
        paused.plain_logs().contains("continued")
    });
    assert!(running, "resumed, it never ran\n{}", paused.logs());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(node_of(&pods, "stale").await, None, "{}", paused.logs());
    assert_eq!(cpu_by_node(&pods).await, BTreeMap::from([(node, 4.0)]));
    paused.signal("TERM");
    paused.wait_exit(Duration::from_secs(15));
    drop(leader);
    api.stop().await;
}

async fn koord_node_name(c: &kube::Client) -> String {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
    let list = nodes.list(&Default::default()).await.unwrap();
    list.items[0].metadata.name.clone().unwrap()
}

/// Three nodes alike, each with a fresh NodeMetric, and colocation on.
async fn colocation_nodes(c: &kube::Client, names: &[&str]) {
    use k8s_openapi::api::core::v1::{ConfigMap, Node};
    use koord::api::slo::NodeMetric;
    use kube::api::{Patch, PatchParams};
    let pp = PostParams::default();
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": {"colocation-config": r#"{"enable": true}"#}}))
    .unwrap();
    Api::<ConfigMap>::namespaced(c.clone(), "koordinator-system")
        .create(&pp, &cm)
        .await
        .unwrap();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let usage =
        |cpu: &str, mem: &str| serde_json::json!({"resources": {"cpu": cpu, "memory": mem}});
    for n in names {
        let node: Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": n}})).unwrap();
        let nodes: Api<Node> = Api::all(c.clone());
        nodes.create(&pp, &node).await.unwrap();
        let status = serde_json::json!({"status": {
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocatable": {"cpu": "15", "memory": "62Gi", "pods": "110"}}});
        let merge = PatchParams::default();
        nodes
            .patch_status(n, &merge, &Patch::Merge(status))
            .await
            .unwrap();
        let metrics: Api<NodeMetric> = Api::all(c.clone());
        let m: NodeMetric = serde_json::from_value(serde_json::json!({
            "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": n}, "spec": {}}))
        .unwrap();
        metrics.create(&pp, &m).await.unwrap();
        let status = serde_json::json!({"status": {"updateTime": now,
            "nodeMetric": {"nodeUsage": usage("2", "8Gi"), "systemUsage": usage("500m", "1Gi")}}});
        metrics
            .patch_status(n, &merge, &Patch::Merge(status))
            .await
            .unwrap();
    }
}

async fn batch_cpu(c: &kube::Client, names: &[&str]) -> Vec<Option<String>> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
    let mut out = Vec::new();
    for n in names {
        let node = nodes.get(n).await.unwrap();
        let alloc = node.status.and_then(|s| s.allocatable).unwrap_or_default();
        out.push(alloc.get("kubernetes.io/batch-cpu").map(|q| q.0.clone()));
    }
    out
}

/// Killed as it sends the second node's status in a NodeResource pass (the first may or
/// may not have landed; the others are not sent), the manager restarts and writes every
/// node's batch resources within a few resyncs (2 s each), the same on all three alike
/// nodes: nothing half-applied is left behind, nothing is skipped as already done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_in_a_noderesource_pass_converges() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_with_nodes(0, "0").await;
    let c = api.client.clone();
    let names = ["n1", "n2", "n3"];
    colocation_nodes(&c, &names).await;
    let (mut first, _) = crate::manager::manager_env(
        dir.path(),
        port,
        "m1",
        &[],
        &[(FAULTS, "manager.before-node-status@2")],
    );
    let died = first.wait_exit(Duration::from_secs(30)).is_some();
    assert!(died, "the fault point was not reached\n{}", first.logs());
    let at_crash = batch_cpu(&c, &names).await;
    let written = at_crash.iter().flatten().count();
    assert!(written <= 1, "killed mid-pass: {at_crash:?}");
    let (second, _) = crate::manager::manager(dir.path(), port, "m2");
    let all = eventually(Duration::from_secs(20), || async {
        batch_cpu(&c, &names).await.iter().all(Option::is_some)
    });
    assert!(
        all.await,
        "{:?}\n{}",
        batch_cpu(&c, &names).await,
        second.logs()
    );
    let after = batch_cpu(&c, &names).await;
    assert!(
        after.windows(2).all(|w| w[0] == w[1]),
        "alike nodes: {after:?}"
    );
    if let Some(v) = at_crash.iter().flatten().next() {
        assert_eq!(
            after[0].as_ref(),
            Some(v),
            "the value written before the crash"
        );
    }
    drop(second);
    api.stop().await;
}
