//! The pod collector on a real cgroup (root only; CI is root): a CPU-burning child in a
//! test-owned pod cgroup is measured within 20 % of what the kernel says it consumed.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::burner::{self, cpu_seconds};
use koord::koordlet::advisor::Advisor;
use koord::koordlet::collectors::{Config, Gated, registry};
use koord::koordlet::informer::{PodMeta, States};
use koord::koordlet::store::{MetricKind, SeriesKey};
use koord::os::system::Host;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burner_cpu_is_measured_within_20_percent() {
    let _cpu = common::cpu_exclusive();
    if !burner::can_run() {
        eprintln!("skipping: needs root and a cgroup hierarchy at /sys/fs/cgroup");
        return;
    }
    let cgroups = burner::cgroups("koordlet");
    let uid = "11111111-2222-3333-4444-555555555555";
    let pod_json = serde_json::json!({"metadata": {"name": "burner", "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running", "qosClass": "Burstable"}});
    let pod = PodMeta::new(serde_json::from_value(pod_json).unwrap(), &cgroups).unwrap();
    let child = burner::start(&cgroups, &pod.dir);
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
        registry(&cfg, Gated::default(), None),
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

    burner::stop(&cgroups, child, &pod.dir).await;
    let measured = measured.expect("pod cpu measured");
    assert!(consumed > 0.2, "the burner barely ran ({consumed} cores)");
    assert!(
        (measured - consumed).abs() <= 0.2 * consumed,
        "measured {measured:.3} cores, the kernel says {consumed:.3}"
    );
}
