//! `koord --role=koordlet --embedded` on this machine: NodeMetric status agrees with /proc,
//! is updated on the configured interval, carries aggregated percentiles once enough
//! samples exist, and keeps its history across a koordlet restart.

use crate::common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use common::{Koord, free_port, http_get, marker, wait_until};
use koord::api::quantity::{q_milli, q_value};
use koord::api::slo::NodeMetric;
use kube::api::{Api, PostParams};

const NODE: &str = "koordlet-node";

fn start(dir: &std::path::Path, api: u16, admin: SocketAddr) -> Koord {
    Koord::start(
        &[
            "--role=koordlet",
            "--embedded",
            "--embedded-addr",
            &format!("127.0.0.1:{api}"),
            "--admin-addr",
            &admin.to_string(),
            "--data-dir",
            dir.to_str().unwrap(),
            "--node-name",
            NODE,
        ],
        &[
            ("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false"),
            ("KOORD_KOORDLET__REPORTER__MIN_REPORT_INTERVAL_SECONDS", "1"),
            (
                "KOORD_KOORDLET__REPORTER__MIN_AGGREGATE_DURATION_SECONDS",
                "1",
            ),
        ],
        dir,
    )
}

/// (ms since epoch, busy ticks, MemTotal − MemAvailable) sampled from /proc every 250 ms.
type Trace = Arc<Mutex<Vec<(i64, u64, u64)>>>;

fn sample_proc(stop: Arc<std::sync::atomic::AtomicBool>) -> (Trace, std::thread::JoinHandle<()>) {
    let trace: Trace = Arc::default();
    let t = trace.clone();
    let handle = std::thread::spawn(move || {
        let host = koord::os::system::Host::new("/proc", "/sys");
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let (cpu, _) = host.proc_stat().unwrap();
            let mem = host.memory_used().unwrap();
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            t.lock().unwrap().push((now, cpu.busy(), mem));
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    (trace, handle)
}

/// Average cores over `[start, end]` from the trace.
fn cores_between(trace: &Trace, start: i64, end: i64) -> f64 {
    let t = trace.lock().unwrap();
    let first = t.iter().find(|(ts, _, _)| *ts >= start).unwrap();
    let last = t.iter().rev().find(|(ts, _, _)| *ts <= end).unwrap();
    let tck = koord::os::system::clock_ticks() as f64;
    (last.1 - first.1) as f64 / tck / ((last.0 - first.0) as f64 / 1000.0)
}

async fn status(api: &Api<NodeMetric>) -> Option<koord::api::slo::NodeMetricStatus> {
    api.get(NODE)
        .await
        .ok()
        .and_then(|n| n.status)
        .filter(|s| s.update_time.is_some())
}

fn update_ms(s: &koord::api::slo::NodeMetricStatus) -> i64 {
    s.update_time.as_ref().unwrap().0.as_millisecond()
}

async fn next_report(api: &Api<NodeMetric>, after_ms: i64) -> koord::api::slo::NodeMetricStatus {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if let Some(s) = status(api).await.filter(|s| update_ms(s) > after_ms) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "no NodeMetric report after {after_ms}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn p90_cpu(s: &koord::api::slo::NodeMetricStatus) -> Option<i64> {
    let aggs = s.node_metric.as_ref()?.aggregated_node_usages.as_ref()?;
    aggs.first()?
        .usage
        .as_ref()?
        .get("p90")?
        .get("cpu")
        .map(q_milli)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodemetric_matches_proc_and_survives_restart() {
    let _cpu = common::cpu_exclusive();
    let dir = tempfile::tempdir().unwrap();
    let (api_port, admin) = (
        free_port(),
        format!("127.0.0.1:{}", free_port())
            .parse::<SocketAddr>()
            .unwrap(),
    );
    let mut koordlet = start(dir.path(), api_port, admin);
    assert!(
        wait_until(Duration::from_secs(30), || http_get(admin, "/readyz")
            .is_some_and(|(s, _)| s == 200)),
        "{}",
        koordlet.logs()
    );
    let kubeconfig = kube::config::Kubeconfig::read_from(dir.path().join("kubeconfig")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<NodeMetric> = Api::all(client);
    let nm: NodeMetric = serde_json::from_value(serde_json::json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": NODE}, "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 4, "reportIntervalSeconds": 2,
        "nodeAggregatePolicy": {"durations": ["10s"]}}}})).unwrap();
    api.create(&PostParams::default(), &nm).await.unwrap();

    // A steady load so CPU usage is well above noise (killed even if the test fails).
    let _burner = Burner(
        std::process::Command::new("sh")
            .args(["-c", &format!("while :; do :; done # {}", marker())])
            .spawn()
            .unwrap(),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (trace, sampler) = sample_proc(stop.clone());

    let first = next_report(&api, 0).await;
    let second = next_report(&api, update_ms(&first)).await;
    let gap = update_ms(&second) - update_ms(&first);
    assert!(
        (1500..=4500).contains(&gap),
        "reports every ~2 s, got {gap} ms apart"
    );
    // Once 5 s of samples exist the 10 s percentiles appear.
    let mut s = second;
    let deadline = Instant::now() + Duration::from_secs(30);
    while p90_cpu(&s).is_none() {
        assert!(
            Instant::now() < deadline,
            "aggregated percentiles never appeared"
        );
        s = next_report(&api, update_ms(&s)).await;
    }
    let at = update_ms(&s);
    let usage = &s.node_metric.as_ref().unwrap().node_usage;
    let reported_cores = q_milli(usage.get("cpu").unwrap()) as f64 / 1000.0;
    let proc_cores = cores_between(&trace, at - 4000, at);
    assert!(
        (reported_cores - proc_cores).abs() <= 0.1 * proc_cores,
        "cpu: reported {reported_cores:.3}, /proc {proc_cores:.3}"
    );
    let reported_mem = q_value(usage.get("memory").unwrap()) as f64;
    let proc_mem = trace.lock().unwrap().last().unwrap().2 as f64;
    assert!(
        (reported_mem - proc_mem).abs() <= 0.1 * proc_mem,
        "memory: reported {reported_mem}, /proc {proc_mem}"
    );

    // Restart: the first report afterwards still has 10 s percentiles, computed over the
    // samples taken before the restart (2 s of new samples alone would not qualify).
    koordlet.signal("TERM");
    assert_eq!(
        koordlet
            .wait_exit(Duration::from_secs(30))
            .and_then(|s| s.code()),
        Some(0),
        "{}",
        koordlet.logs()
    );
    let restarted_at = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let _again = start(dir.path(), api_port, admin);
    let after = next_report(&api, restarted_at).await;
    assert!(
        update_ms(&after) - restarted_at < 8000,
        "first report came late"
    );
    assert!(
        p90_cpu(&after).is_some(),
        "history from before the restart is used: {:?}",
        after.node_metric
    );

    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    sampler.join().unwrap();
}

struct Burner(std::process::Child);

impl Drop for Burner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
