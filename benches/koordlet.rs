//! koordlet costs: one full collection pass over 100 fake pods (temp-dir cgroup v1 tree),
//! metric store insert and query, and RSS over a long simulated run (bounded by series ×
//! window, not by uptime).
//!
//! `cargo bench --bench koordlet`

use std::sync::Arc;
use std::time::{Duration, Instant};

use koord::api::extension::qos::KubeQoS;
use koord::koordlet::advisor::Advisor;
use koord::koordlet::collectors::{Config, Gated, registry};
use koord::koordlet::informer::{PodMeta, States};
use koord::koordlet::store::{MetricKind, MetricStore, Point, SeriesKey, StoreOptions};
use koord::os::system::Host;
use koord::os::{Cgroups, Driver, Resource, Subsystem, Version};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A cgroup v1 tree with `n` running pods of one container each.
fn fake_tree(root: &std::path::Path, n: usize) -> (Cgroups, Vec<PodMeta>) {
    for s in ["cpu", "cpuacct", "cpuset", "memory"] {
        std::fs::create_dir_all(root.join(s).join("kubepods")).unwrap();
    }
    let cgroups = Cgroups::new(root, Version::V1, Driver::Cgroupfs, "");
    let mut pods = Vec::new();
    for i in 0..n {
        let uid = format!("00000000-0000-0000-0000-{i:012}");
        let pod = serde_json::json!({"metadata": {"name": format!("p{i}"), "namespace": "bench", "uid": uid},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "qosClass": "Burstable",
                "containerStatuses": [{"name": "c", "containerID": format!("containerd://c{i}"), "image": "", "imageID": "", "ready": true, "restartCount": 0}]}});
        let meta = PodMeta::new(serde_json::from_value(pod).unwrap(), &cgroups).unwrap();
        for dir in [meta.dir.clone(), meta.containers[0].dir.clone()] {
            for s in [Subsystem::Cpu, Subsystem::Cpuacct, Subsystem::Memory] {
                std::fs::create_dir_all(cgroups.dir_path(s, &dir)).unwrap();
            }
            std::fs::write(
                cgroups.file(Resource::CpuStat, &dir),
                "nr_periods 10\nnr_throttled 1\nthrottled_time 5\n",
            )
            .unwrap();
            std::fs::write(
                cgroups.file(Resource::MemoryStat, &dir),
                "total_inactive_anon 1000\ntotal_active_anon 2000\ntotal_unevictable 0\n",
            )
            .unwrap();
        }
        pods.push(meta);
    }
    let be = cgroups.qos_dir(KubeQoS::BestEffort);
    for s in [Subsystem::Cpu, Subsystem::Cpuacct, Subsystem::Cpuset] {
        std::fs::create_dir_all(cgroups.dir_path(s, &be)).unwrap();
    }
    std::fs::write(cgroups.file(Resource::CpusetCpus, &be), "0-1").unwrap();
    std::fs::write(cgroups.file(Resource::CfsQuota, &be), "-1").unwrap();
    (cgroups, pods)
}

fn tick(cgroups: &Cgroups, pods: &[PodMeta], round: u64) {
    for p in pods {
        for dir in [&p.dir, &p.containers[0].dir] {
            std::fs::write(
                cgroups.file(Resource::CpuacctUsage, dir),
                (round * 10_000_000).to_string(),
            )
            .unwrap();
        }
    }
    std::fs::write(
        cgroups.file(
            Resource::CpuacctUsage,
            &cgroups.qos_dir(KubeQoS::BestEffort),
        ),
        (round * 1_000_000).to_string(),
    )
    .unwrap();
}

fn collection_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (cgroups, pods) = fake_tree(dir.path(), 100);
    let states = States {
        pods: Arc::new(pods.clone()),
        ..Default::default()
    };
    let mut advisor = Advisor::new(
        registry(&Config::default(), Gated::default(), None),
        Host::new("/proc", "/sys"),
        cgroups.clone(),
    );
    let rounds = 200u64;
    let mut samples = 0;
    let mut spent = Duration::ZERO;
    for r in 0..rounds {
        tick(&cgroups, &pods, r);
        let t = Instant::now();
        let (s, _) = advisor.pass(&states, r as i64 * 1000, r * 1_000_000_000);
        spent += t.elapsed();
        samples = s.len();
    }
    println!(
        "collection pass, 100 pods (cgroup v1 temp tree): {:.2} ms per pass, {samples} samples per pass",
        spent.as_secs_f64() * 1000.0 / rounds as f64
    );
}

fn store_costs() {
    let dir = tempfile::tempdir().unwrap();
    let store = MetricStore::open(dir.path(), StoreOptions::default()).unwrap();
    let series: Vec<SeriesKey> = (0..400)
        .map(|i| SeriesKey::pod(MetricKind::PodCpuUsage, &format!("u{i}")))
        .collect();
    let rounds = 600;
    let t = Instant::now();
    for r in 0..rounds {
        let batch: Vec<(SeriesKey, Point)> = series
            .iter()
            .map(|k| {
                (
                    k.clone(),
                    Point {
                        ts: r * 1000,
                        value: r as f64,
                    },
                )
            })
            .collect();
        store.insert(&batch).unwrap();
    }
    let inserted = rounds as usize * series.len();
    let per = t.elapsed().as_secs_f64() * 1e6 / inserted as f64;
    println!("store insert: {inserted} samples in batches of 400: {per:.2} µs per sample");
    let t = Instant::now();
    let q = 1000;
    for i in 0..q {
        let end = rounds * 1000;
        store
            .aggregate(&series[i % series.len()], end - 300_000, end)
            .unwrap()
            .unwrap();
    }
    println!(
        "store query: avg/p50..p99 over a 300-sample window: {:.1} µs per series",
        t.elapsed().as_secs_f64() * 1e6 / q as f64
    );
}

/// Two simulated hours of 1 s samples for 100 pods (400 series) with a 10 minute
/// retention: RSS levels off once the window is full.
fn long_run() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        retention: Duration::from_secs(600),
        ..Default::default()
    };
    let store = MetricStore::open(dir.path(), opts).unwrap();
    let series: Vec<SeriesKey> = (0..400)
        .map(|i| SeriesKey::pod(MetricKind::PodMemoryUsage, &format!("u{i}")))
        .collect();
    let mut profile = Vec::new();
    for second in 0..7200i64 {
        let batch: Vec<(SeriesKey, Point)> = series
            .iter()
            .map(|k| {
                (
                    k.clone(),
                    Point {
                        ts: second * 1000,
                        value: 1.0,
                    },
                )
            })
            .collect();
        store.insert(&batch).unwrap();
        if second % 300 == 299 {
            store.gc(second * 1000).unwrap();
        }
        if second % 1200 == 1199 {
            profile.push(format!("{}m:{}MiB", (second + 1) / 60, rss_kib() / 1024));
        }
    }
    println!(
        "long run, 400 series x 2 h simulated, 10 min retention: RSS {} (disk {} MiB)",
        profile.join(" "),
        store.size_on_disk() >> 20
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("koordlet: bench");
        return;
    }
    collection_pass();
    store_costs();
    long_run();
}
