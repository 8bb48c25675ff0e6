use std::sync::Arc;

use super::testutil::FakeHost;
use super::*;
use crate::api::extension::qos::KubeQoS;
use crate::koordlet::advisor::Advisor;
use crate::koordlet::informer::States;
use crate::koordlet::store::MetricKind;
use crate::os::{Driver, Version};

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

fn value(samples: &Samples, key: &SeriesKey) -> Option<f64> {
    samples.iter().find(|(k, _)| k == key).map(|(_, p)| p.value)
}

/// The default collectors over a fake host, at 100 clock ticks a second.
fn advisor(fake: &FakeHost) -> Advisor {
    Advisor::new(
        registry(&Config::default(), Gated::default(), None),
        fake.host.clone(),
        fake.cgroups.clone(),
    )
    .with_clock_ticks(100)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

/// Two samples two seconds apart over a fake tree; every usage is hand-computed.
fn exact_usages(version: Version, driver: Driver, hybrid: bool) {
    let fake = FakeHost::new(version, driver, hybrid);
    let ls = fake.pod("ls", "uid-ls", KubeQoS::Burstable, None, &["c-ls"], 0);
    let be = fake.pod(
        "be",
        "uid-be",
        KubeQoS::BestEffort,
        Some("BE"),
        &["c-be"],
        2000,
    );
    let be_qos = fake.cgroups.qos_dir(KubeQoS::BestEffort);
    let states = States {
        pods: Arc::new(vec![ls.clone(), be.clone()]),
        ..Default::default()
    };
    let mut advisor = advisor(&fake);

    fake.proc_stat(1000, 4);
    fake.meminfo(16 * GI, 10 * GI);
    fake.cgroup(&ls.dir, 0, 100 * MI, 500 * MI, 10, 2);
    fake.cgroup(&ls.containers[0].dir, 0, 80 * MI, 0, 10, 2);
    fake.cgroup(&be.dir, 0, 300 * MI, 0, 0, 0);
    fake.cgroup(&be.containers[0].dir, 0, 300 * MI, 0, 0, 0);
    fake.cgroup(&be_qos, 0, 300 * MI, 0, 0, 0);
    fake.cpuset(&be_qos, "0-3");
    fake.quota(&be_qos, 200_000, 100_000);
    let (first, outcomes) = advisor.pass(&states, 1_000, 0);
    assert!(outcomes.iter().all(|o| o.error.is_none()), "{outcomes:?}");
    assert!(
        value(&first, &SeriesKey::node(MetricKind::NodeCpuUsage)).is_none(),
        "first sample only primes"
    );

    fake.proc_stat(1400, 4);
    fake.meminfo(16 * GI, 9 * GI);
    fake.cgroup(&ls.dir, 1_000_000_000, 120 * MI, 600 * MI, 20, 7);
    fake.cgroup(&ls.containers[0].dir, 800_000_000, 90 * MI, 0, 20, 7);
    fake.cgroup(&be.dir, 2_000_000_000, 400 * MI, 0, 0, 0);
    fake.cgroup(&be.containers[0].dir, 2_000_000_000, 400 * MI, 0, 0, 0);
    fake.cgroup(&be_qos, 2_000_000_000, 400 * MI, 0, 0, 0);
    let (s, _) = advisor.pass(&states, 3_000, 2_000_000_000);
    let what = format!("{version:?} {driver:?} hybrid={hybrid}");
    // 400 busy ticks over 2 s at 100 ticks/s = 2 cores.
    assert!(
        close(value(&s, &SeriesKey::node(MetricKind::NodeCpuUsage)), 2.0),
        "{what}: node cpu"
    );
    assert!(
        close(
            value(&s, &SeriesKey::node(MetricKind::NodeMemoryUsage)),
            (7 * GI) as f64
        ),
        "{what}: node memory"
    );
    assert!(
        close(
            value(&s, &SeriesKey::pod(MetricKind::PodCpuUsage, "uid-ls")),
            0.5
        ),
        "{what}: ls cpu"
    );
    assert!(
        close(
            value(&s, &SeriesKey::pod(MetricKind::PodMemoryUsage, "uid-ls")),
            (120 * MI) as f64
        ),
        "{what}: ls memory excludes page cache"
    );
    assert!(
        close(
            value(
                &s,
                &SeriesKey::container(MetricKind::ContainerCpuUsage, "c-ls")
            ),
            0.4
        ),
        "{what}: container cpu"
    );
    assert!(
        close(
            value(&s, &SeriesKey::pod(MetricKind::PodCpuUsage, "uid-be")),
            1.0
        ),
        "{what}: be cpu"
    );
    assert!(
        close(
            value(&s, &SeriesKey::pod(MetricKind::PodCpuThrottled, "uid-ls")),
            0.5
        ),
        "{what}: throttled 5/10"
    );
    assert!(
        close(value(&s, &SeriesKey::node(MetricKind::SysCpuUsage)), 0.5),
        "{what}: sys = 2 − 1.5"
    );
    assert!(
        close(
            value(&s, &SeriesKey::node(MetricKind::SysMemoryUsage)),
            (7 * GI - 520 * MI) as f64
        ),
        "{what}: sys memory"
    );
    assert!(
        close(value(&s, &SeriesKey::be_cpu("usage")), 1000.0),
        "{what}: be usage milli"
    );
    assert!(
        close(value(&s, &SeriesKey::be_cpu("request")), 2000.0),
        "{what}: be request"
    );
    assert!(
        close(value(&s, &SeriesKey::be_cpu("real-limit")), 2000.0),
        "{what}: quota 2 cores < cpuset 4"
    );
}

#[test]
fn exact_usages_v1_cgroupfs() {
    exact_usages(Version::V1, Driver::Cgroupfs, false);
}

#[test]
fn exact_usages_v1_systemd() {
    exact_usages(Version::V1, Driver::Systemd, false);
}

#[test]
fn exact_usages_v2_cgroupfs() {
    exact_usages(Version::V2, Driver::Cgroupfs, false);
}

#[test]
fn exact_usages_v2_systemd() {
    exact_usages(Version::V2, Driver::Systemd, false);
}

#[test]
fn exact_usages_hybrid_cgroupfs() {
    exact_usages(Version::V1, Driver::Cgroupfs, true);
}

#[test]
fn exact_usages_hybrid_systemd() {
    exact_usages(Version::V1, Driver::Systemd, true);
}

#[test]
fn missing_pod_cgroups_are_skipped_and_errors_reported() {
    let fake = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
    let ghost = fake.pod("ghost", "uid-x", KubeQoS::Burstable, None, &["c"], 0);
    let states = States {
        pods: Arc::new(vec![ghost]),
        ..Default::default()
    };
    let mut advisor = Advisor::new(
        registry(&Config::default(), Gated::default(), None),
        fake.host.clone(),
        fake.cgroups.clone(),
    );
    let (samples, outcomes) = advisor.pass(&states, 0, 0);
    assert!(
        samples
            .iter()
            .all(|(k, _)| k.kind != MetricKind::PodMemoryUsage)
    );
    let node = outcomes
        .iter()
        .find(|o| o.collector == "nodeResource")
        .unwrap();
    assert!(
        node.error.as_deref().is_some_and(|e| e.contains("stat")),
        "no /proc/stat yet: {node:?}"
    );
}

#[test]
fn cpi_disables_itself_without_perf_cgroups() {
    let fake = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
    fake.proc_stat(0, 2);
    let pod = fake.pod("p", "uid-p", KubeQoS::Burstable, None, &["c"], 0);
    let states = States {
        pods: Arc::new(vec![pod]),
        ..Default::default()
    };
    let cfg = Config {
        disabled: [
            "nodeResource",
            "podResource",
            "podThrottled",
            "beResource",
            "hostApplication",
            "sysResource",
        ]
        .map(String::from)
        .to_vec(),
        ..Default::default()
    };
    let mut advisor = Advisor::new(
        registry(
            &cfg,
            Gated {
                cpi: true,
                ..Gated::default()
            },
            None,
        ),
        fake.host.clone(),
        fake.cgroups.clone(),
    );
    assert_eq!(advisor.names(), vec!["cpi"]);
    let (_, outcomes) = advisor.pass(&states, 0, 0);
    assert!(
        outcomes[0]
            .disabled
            .as_deref()
            .is_some_and(|d| d.contains("perf_event")),
        "{outcomes:?}"
    );
}

#[test]
fn psi_from_pressure_files() {
    let fake = FakeHost::new(Version::V2, Driver::Cgroupfs, false);
    let pod = fake.pod("p", "uid-p", KubeQoS::Burstable, None, &[], 0);
    std::fs::create_dir_all(fake.cgroups.dir_path(crate::os::Subsystem::Cpu, &pod.dir)).unwrap();
    std::fs::write(
        fake.cgroups
            .file(crate::os::Resource::CpuPressure, &pod.dir),
        "some avg10=2.50 avg60=0 avg300=0 total=1\nfull avg10=1.25 avg60=0 avg300=0 total=1\n",
    )
    .unwrap();
    std::fs::create_dir_all(fake.root().join("proc/pressure")).unwrap();
    std::fs::write(
        fake.root().join("proc/pressure/memory"),
        "some avg10=0.75 avg60=0 avg300=0 total=1\n",
    )
    .unwrap();
    let states = States {
        pods: Arc::new(vec![pod]),
        ..Default::default()
    };
    let mut p = psi::Psi::new(std::time::Duration::from_secs(10));
    let env = CollectEnv {
        host: &fake.host,
        cgroups: &fake.cgroups,
        states: &states,
        now_ms: 5,
        mono_ns: 0,
        clk_tck: 100,
    };
    let mut out = Samples::new();
    p.collect(&env, &mut Shared::default(), &mut out).unwrap();
    let key = |kind, extra: &[(&'static str, &str)], res, degree| {
        let mut l = extra.to_vec();
        l.extend([
            ("psi_resource", res),
            ("psi_precision", "10"),
            ("psi_degree", degree),
        ]);
        SeriesKey::new(kind, &l)
    };
    assert_eq!(
        value(
            &out,
            &key(MetricKind::PodPsi, &[("pod_uid", "uid-p")], "cpu", "full")
        ),
        Some(1.25)
    );
    assert_eq!(
        value(&out, &key(MetricKind::NodePsi, &[], "mem", "some")),
        Some(0.75)
    );
}

#[test]
fn numa_usage_from_per_cpu_ticks_and_node_meminfo() {
    let fake = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
    let sys = fake.root().join("sys/devices/system");
    std::fs::create_dir_all(sys.join("cpu")).unwrap();
    std::fs::write(sys.join("cpu/online"), "0-3").unwrap();
    for cpu in 0..4u32 {
        let t = sys.join(format!("cpu/cpu{cpu}/topology"));
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("physical_package_id"), "0").unwrap();
        std::fs::write(t.join("core_id"), cpu.to_string()).unwrap();
    }
    for (n, cpus, free_kb) in [(0, "0-1", 1_048_576u64), (1, "2-3", 3_145_728)] {
        let d = sys.join(format!("node/node{n}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpulist"), cpus).unwrap();
        std::fs::write(
            d.join("meminfo"),
            format!("Node {n} MemTotal:  4194304 kB\nNode {n} MemFree:  {free_kb} kB\nNode {n} Active(file): 0 kB\nNode {n} Inactive(file): 0 kB\nNode {n} SReclaimable: 0 kB\n"),
        )
        .unwrap();
    }
    let mut advisor = advisor(&fake);
    let states = States::default();
    fake.proc_stat(0, 4);
    fake.meminfo(16 * GI, 10 * GI);
    advisor.pass(&states, 1_000, 0);
    // 400 busy ticks over 2 s, 100 on each CPU: 1 core per NUMA node.
    fake.proc_stat(400, 4);
    let (s, _) = advisor.pass(&states, 3_000, 2_000_000_000);
    for n in 0..2 {
        let cpu = value(&s, &SeriesKey::numa(MetricKind::NodeNumaCpuUsage, n));
        assert!(close(cpu, 1.0), "NUMA {n} cpu {cpu:?}");
    }
    let mem = |n| value(&s, &SeriesKey::numa(MetricKind::NodeNumaMemoryUsage, n));
    assert_eq!(mem(0), Some((3 * GI) as f64));
    assert_eq!(mem(1), Some(GI as f64));
}

#[test]
fn page_cache_series_for_pods_containers_and_host_apps() {
    let fake = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
    let ls = fake.pod("ls", "uid-ls", KubeQoS::Burstable, None, &["c-ls"], 0);
    fake.proc_stat(0, 4);
    fake.meminfo(16 * GI, 10 * GI);
    fake.cgroup(&ls.dir, 0, 100 * MI, 50 * MI, 0, 0);
    fake.cgroup(&ls.containers[0].dir, 0, 90 * MI, 50 * MI, 0, 0);
    fake.memory_usage(&ls.dir, 150 * MI);
    fake.memory_usage(&ls.containers[0].dir, 140 * MI);
    let app = crate::os::CgroupDir::new("host-latency-sensitive/nginx");
    fake.cgroup(&app, 0, 10 * MI, 5 * MI, 0, 0);
    fake.memory_usage(&app, 15 * MI);
    let nm: crate::api::slo::NodeMetric = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n"},
        "spec": {"metricCollectPolicy": {"nodeMemoryCollectPolicy": "usageWithPageCache"}}}))
    .unwrap();
    let slo: crate::api::slo::NodeSLO = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n"}, "spec": {"hostApplications": [{"name": "nginx", "qos": "LS",
        "cgroupPath": {"base": "CgroupRoot", "relativePath": "host-latency-sensitive/nginx"}}]}}))
    .unwrap();
    let states = States {
        pods: Arc::new(vec![ls.clone()]),
        node_metric: Some(Arc::new(nm)),
        node_slo: Some(Arc::new(slo)),
        ..Default::default()
    };
    let mut advisor = advisor(&fake);
    let (s, _) = advisor.pass(&states, 1_000, 0);
    let id = crate::koordlet::informer::PodMeta::container_id(&ls.containers[0]);
    let key = SeriesKey::container(MetricKind::ContainerMemoryWithPageCache, id);
    assert_eq!(
        key.encode(),
        format!("container_memory_usage_with_page_cache{{container_id={id}}}")
    );
    assert_eq!(value(&s, &key), Some((140 * MI) as f64));
    let pod = SeriesKey::pod(MetricKind::PodMemoryWithPageCache, "uid-ls");
    assert_eq!(value(&s, &pod), Some((150 * MI) as f64));
    let app = SeriesKey::host_app(MetricKind::HostAppMemoryWithPageCache, "nginx");
    assert_eq!(
        app.encode(),
        "host_application_memory_usage_with_page_cache{host_app_name=nginx}"
    );
    assert_eq!(value(&s, &app), Some((15 * MI) as f64));
}
