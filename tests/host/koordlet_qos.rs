//! cpusuppress on a real cgroup (root only; CI is root): a CPU burner in a test-owned
//! besteffort pod cgroup is held to the quota the suppress formula gives for a simulated
//! LS load, and gets its CPU back, round by round, when the threshold is raised.

use crate::common;

use std::time::Duration;

use common::burner::{self, cpu_seconds};
use koord::api::extension::qos::KubeQoS;
use koord::koordlet::qos::cpusuppress::{Inputs, cfs_quota, suppress_milli};
use koord::koordlet::qos::executor::{Executor, Outcome, Update};
use koord::os::Resource;

/// Cores the process used over `d`.
async fn usage(pid: u32, d: Duration) -> f64 {
    let c0 = cpu_seconds(pid);
    tokio::time::sleep(d).await;
    (cpu_seconds(pid) - c0) / d.as_secs_f64()
}

/// One cpusuppress round with the cfsQuota policy; returns the quota now in force.
fn round(ex: &Executor, inputs: &Inputs) -> i64 {
    let be = ex.cgroups().qos_dir(KubeQoS::BestEffort);
    let current = ex.cgroups().read_i64(Resource::CfsQuota, &be).unwrap();
    if let Some(q) = cfs_quota(suppress_milli(inputs), current, inputs.capacity_milli) {
        let out = ex
            .update(&Update::new(Resource::CfsQuota, be.clone(), q.to_string()))
            .unwrap();
        assert!(matches!(out, Outcome::Written(_)), "{out:?}");
    }
    ex.cgroups().read_i64(Resource::CfsQuota, &be).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn be_burner_follows_the_suppress_quota() {
    let _cpu = common::cpu_exclusive();
    if !burner::can_run() {
        eprintln!("skipping: needs root and a cgroup hierarchy at /sys/fs/cgroup");
        return;
    }
    let cgroups = burner::cgroups("qos");
    let pod_dir = cgroups.pod_dir(KubeQoS::BestEffort, "99999999-2222-3333-4444-555555555555");
    let child = burner::start(&cgroups, &pod_dir);
    let pid = child.id().unwrap();
    let ex = Executor::new(cgroups.clone(), Duration::from_secs(60));

    let free = usage(pid, Duration::from_millis(1500)).await;
    // A 2-core node, 65 % threshold, 1 core of simulated LS load: BE gets 0.3 core.
    let mut inputs = Inputs {
        capacity_milli: 2000,
        threshold_percent: 65,
        min_percent: None,
        non_be_pods_milli: 1000,
        non_be_host_milli: 0,
        system_used_milli: 0,
    };
    let quota = round(&ex, &inputs);
    let suppressed = usage(pid, Duration::from_millis(2000)).await;
    // Threshold raised to 100 %: BE may use 1 core again, given back 10 % of the node per round.
    inputs.threshold_percent = 100;
    let mut rounds = Vec::new();
    loop {
        let q = round(&ex, &inputs);
        if rounds.last() == Some(&q) {
            break;
        }
        rounds.push(q);
    }
    let restored = usage(pid, Duration::from_millis(1500)).await;

    burner::stop(&cgroups, child, &pod_dir).await;

    assert_eq!(quota, 30_000, "S = 2000 × 65 % − 1000 = 300 milli-cores");
    assert_eq!(
        rounds,
        vec![50_000, 70_000, 90_000, 100_000],
        "10 % of the node per round"
    );
    assert!(
        free > 0.5,
        "the burner barely ran unthrottled ({free:.2} cores)"
    );
    assert!(
        suppressed <= 0.3 * 1.25 + 0.02,
        "suppressed to {suppressed:.2} cores, quota 0.3"
    );
    assert!(
        restored > 0.5 && restored > suppressed * 1.8,
        "restored {restored:.2} cores (suppressed {suppressed:.2})"
    );
}

/// cgroup v1 refuses a parent quota below a child's (EINVAL). cpusuppress's cfsQuota round
/// lifts the BE pod's and container's own quotas (400000 µs from their batch-cpu limits)
/// before lowering the besteffort level, so the level is in force in the same round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cfs_quota_policy_lowers_the_level_after_its_children() {
    use koord::koordlet::informer::{PodMeta, States};
    use koord::koordlet::qos::cpusuppress::{Memory, NodePolicy, Usage, pass};
    use std::sync::Arc;
    let _cpu = common::cpu_exclusive();
    if !burner::can_run() {
        eprintln!("skipping: needs root and a cgroup hierarchy at /sys/fs/cgroup");
        return;
    }
    let cgroups = burner::cgroups("order");
    let uid = "99999999-2222-3333-4444-666666666666";
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "be", "namespace": "d", "uid": uid,
                     "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running", "qosClass": "BestEffort", "containerStatuses": [{
            "name": "c", "containerID": "containerd://koordtestorder", "image": "x",
            "imageID": "", "ready": true, "restartCount": 0}]}}))
    .unwrap();
    let meta = PodMeta::new(pod, &cgroups).unwrap();
    let container = meta.containers[0].dir.clone();
    let child = burner::start(&cgroups, &container);
    for d in [&meta.dir, &container] {
        cgroups.write(Resource::CfsQuota, d, "400000").unwrap();
    }
    let slo = serde_json::json!({"metadata": {"name": "n"}, "spec": {"resourceUsedThresholdWithBE": {
        "enable": true, "cpuSuppressThresholdPercent": 65, "cpuSuppressPolicy": "cfsQuota"}}});
    let node = serde_json::json!({"metadata": {"name": "n"},
        "status": {"capacity": {"cpu": "2"}, "allocatable": {"cpu": "2"}}});
    let states = States {
        node: Some(Arc::new(serde_json::from_value(node).unwrap())),
        pods: Arc::new(vec![meta.clone()]),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        ..Default::default()
    };
    // 1 core of system use, BE idle: S = 2000 × 65 % − 1000 = 300 milli → 30000 µs.
    let usage = Usage {
        node: Some(1000),
        pods: [(uid.to_string(), 0)].into(),
        host_apps: Default::default(),
    };
    let ex = Executor::new(cgroups.clone(), Duration::from_secs(60));
    pass(
        &states,
        &usage,
        &[],
        &ex,
        &mut Memory::default(),
        NodePolicy::default(),
    );
    let quota = |d| cgroups.read_i64(Resource::CfsQuota, d).unwrap();
    let got = (
        quota(&cgroups.qos_dir(KubeQoS::BestEffort)),
        quota(&meta.dir),
        quota(&container),
    );
    burner::stop(&cgroups, child, &container).await;
    assert_eq!(got, (30_000, -1, -1), "level, pod, container");
}
