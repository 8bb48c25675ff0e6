//! The pod collector on a real cgroup (root only; CI is root): a CPU-burning child in a
//! test-owned pod cgroup is measured within 20 % of what the kernel says it consumed.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{STRAY_MARKER, is_root};
use koord::koordlet::advisor::Advisor;
use koord::koordlet::collectors::{Config, registry};
use koord::koordlet::informer::{PodMeta, States};
use koord::koordlet::os::process::{SIGKILL, Spawn, signal, spawn_in_cgroups};
use koord::koordlet::os::system::{Host, clock_ticks};
use koord::koordlet::os::{Cgroups, Driver};
use koord::koordlet::store::{MetricKind, SeriesKey};

/// utime + stime of a process, in seconds of CPU.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / clock_ticks() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burner_cpu_is_measured_within_20_percent() {
    if !is_root()
        || !std::path::Path::new("/sys/fs/cgroup/cpuacct").exists()
            && !std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        eprintln!("skipping: needs root and a cgroup hierarchy at /sys/fs/cgroup");
        return;
    }
    let parent = format!("koord-test-{}-koordlet", std::process::id());
    let detected = Cgroups::detect(
        std::path::Path::new("/sys/fs/cgroup"),
        &parent,
        Driver::Cgroupfs,
    )
    .unwrap();
    let cgroups = Cgroups::new(
        "/sys/fs/cgroup",
        detected.version(),
        Driver::Cgroupfs,
        &parent,
    );
    let uid = "11111111-2222-3333-4444-555555555555";
    let pod_json = serde_json::json!({"metadata": {"name": "burner", "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running", "qosClass": "Burstable"}});
    let pod = PodMeta::new(serde_json::from_value(pod_json).unwrap(), &cgroups).unwrap();
    cgroups.create(&pod.dir).unwrap();
    let log = tempfile::tempfile().unwrap();
    let child = spawn_in_cgroups(Spawn {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            format!("while :; do :; done # {STRAY_MARKER}").into(),
        ],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: None,
        stdout: log.try_clone().unwrap(),
        stderr: log,
        cgroup_procs: cgroups.procs_files(&pod.dir),
    })
    .unwrap();
    let pid = child.id().unwrap();

    let states = States {
        pods: Arc::new(vec![pod.clone()]),
        ..Default::default()
    };
    let cfg = Config {
        disabled: vec![
            "nodeResource".into(),
            "beResource".into(),
            "sysResource".into(),
        ],
        ..Default::default()
    };
    let mut advisor = Advisor::new(
        registry(&cfg, false, false),
        Host::new("/proc", "/sys"),
        cgroups.clone(),
    );
    let start = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c0 = cpu_seconds(pid);
    let t0 = start.elapsed();
    advisor.pass(&states, 0, t0.as_nanos() as u64);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c1 = cpu_seconds(pid);
    let t1 = start.elapsed();
    let (samples, _) = advisor.pass(&states, 1, t1.as_nanos() as u64);
    let consumed = (c1 - c0) / (t1 - t0).as_secs_f64();
    let measured = samples
        .iter()
        .find(|(k, _)| *k == SeriesKey::pod(MetricKind::PodCpuUsage, uid))
        .map(|(_, p)| p.value);

    signal(pid as i32, SIGKILL).unwrap();
    let mut child = child;
    let _ = child.wait().await;
    for _ in 0..50 {
        if cgroups.procs(&pod.dir).unwrap_or_default().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut dir = Some(pod.dir.clone());
    while let Some(d) = dir {
        cgroups.remove(&d).unwrap();
        dir = d.parent();
    }
    let measured = measured.expect("pod cpu measured");
    assert!(consumed > 0.2, "the burner barely ran ({consumed} cores)");
    assert!(
        (measured - consumed).abs() <= 0.2 * consumed,
        "measured {measured:.3} cores, the kernel says {consumed:.3}"
    );
}
