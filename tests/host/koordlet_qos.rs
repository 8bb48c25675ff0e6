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
