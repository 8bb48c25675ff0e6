//! End-to-end scheduling throughput through the embedded API server: 500 simulated nodes
//! (`--sim-nodes`, 32 CPU / 256 Gi / 110 pods), 10,000 pods created over HTTP with 64 in
//! flight, the scheduler (default koord profile) watching, binding through pods/binding
//! and writing Scheduled events, the node simulator marking bound pods Running. Measured:
//! first create → every pod bound. Budget: ≥ 1,000 pods/s.
//!
//! Then the deployment shape at scale: `koord --embedded --sim-nodes=5000` and a separate
//! `koord --role=scheduler` process, 10,000 pods created before the scheduler starts;
//! measured from the scheduler's readiness to every pod bound (seen through a watch).
//! Budget: ≥ 2,000 pods/s. `E2E_SCALE_NODES` / `E2E_SCALE_PODS` change the node and pod
//! counts, `E2E_SKIP_SCALE=1` skips it, `E2E_SKIP_IN_PROCESS=1` skips the first part. Run: `cargo bench --bench scheduler_e2e`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use koord::apiserver::store::Filter;
use koord::apiserver::{ApiServer, Options, sim};
use koord::kernel::{Shutdown, Tasks};
use koord::scheduler::live::Scheduler;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

mod common;

const NODES: u32 = 500;
const PODS: usize = 10_000;

/// Pods with a node, through the store's field index: decoding 10,000 pods every poll
/// would take a core from what is measured.
fn bound(server: &ApiServer) -> usize {
    let key = (String::new(), "pods".to_string());
    let filter = Filter::parse(None, None, Some("spec.nodeName!=")).unwrap();
    server.store().list(&key, &filter).1.len()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::var("E2E_SKIP_IN_PROCESS").is_err() {
        in_process().await;
    }
    if std::env::var("E2E_SKIP_SCALE").is_err() {
        let nodes = std::env::var("E2E_SCALE_NODES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5000);
        let pods = std::env::var("E2E_SCALE_PODS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(PODS);
        scale::two_processes(nodes, pods).await;
    }
}

async fn in_process() {
    let mut opts = Options::for_tests();
    opts.sim = Some(sim::SimNodes {
        count: NODES,
        cpu: "32".into(),
        memory: "256Gi".into(),
        pods: 110,
    });
    let server = ApiServer::start(opts).await.unwrap();
    let client = server.client().await.unwrap();
    let shutdown = Shutdown::new();
    let tasks = Tasks::new(shutdown.clone());
    let cfg = koord::scheduler::config::default_config().unwrap();
    let scheduler = Scheduler::new(
        client.clone(),
        &cfg,
        koord::kernel::lease::Leadership::always(),
    )
    .unwrap();
    // Every watch the live scheduler waits for (the default profile's ElasticQuota too).
    let rx = koord::scheduler::watches(&scheduler, &client, &tasks, &shutdown);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
    let ready_tx = std::sync::Mutex::new(Some(ready_tx));
    let stop = shutdown.clone();
    let wakeups = prometheus_client::metrics::counter::Counter::default();
    let sched = tokio::spawn(scheduler.run(rx, stop, wakeups, move || {
        if let Some(t) = ready_tx.lock().unwrap().take() {
            let _ = t.send(());
        }
    }));
    ready_rx.await.unwrap();
    let start = Instant::now();
    create_pods(client.clone(), PODS).await;
    let created = start.elapsed().as_secs_f64();
    while bound(&server) < PODS && start.elapsed() < Duration::from_secs(300) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let n = bound(&server);
    println!(
        "end to end, {NODES} sim nodes: {n} of {PODS} pods bound in {secs:.2} s = {:.0} pods/s (creation alone took {created:.2} s)",
        n as f64 / secs
    );
    shutdown.begin_drain();
    let _ = sched.await;
    tasks.close();
    tasks.wait().await;
    server.shutdown().await;
}

/// Creates the bench's pods (100m / 500 Mi, koord-scheduler) with 64 requests in flight.
async fn create_pods(client: kube::Client, count: usize) {
    let pods: Api<Pod> = Api::namespaced(client, "default");
    futures::stream::iter(0..count)
        .for_each_concurrent(64, |i| {
            let pods = pods.clone();
            async move {
                let p: Pod = serde_json::from_value(json!({"metadata": {"name": format!("pod-{i}"), "namespace": "default"},
                    "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}})).unwrap();
                pods.create(&PostParams::default(), &p).await.unwrap();
            }
        })
        .await;
}

/// The scheduler as its own process against `koord --embedded --sim-nodes=N`.
mod scale {
    use std::collections::HashSet;
    use std::time::{Duration, Instant};

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::runtime::watcher;

    use super::common::{admin_get, cpu_secs, embedded, free_port, koord, ready, rss_mib};

    pub async fn two_processes(nodes: u32, pods: usize) {
        let dir = tempfile::tempdir().unwrap();
        let (server, kubeconfig, client) = embedded(dir.path(), &[], nodes, "256Gi").await;
        super::create_pods(client.clone(), pods).await;
        let sched_admin = format!("127.0.0.1:{}", free_port());
        let spawned = Instant::now();
        let sched = koord(
            &[
                "--role=scheduler".into(),
                "--kubeconfig".into(),
                kubeconfig.display().to_string(),
                "--admin-addr".into(),
                sched_admin.clone(),
                "--data-dir".into(),
                dir.path().join("sched").display().to_string(),
            ],
            &[],
        );
        let mut events = watcher(Api::<Pod>::all(client), watcher::Config::default()).boxed();
        let mut bound = HashSet::new();
        let mut start = None;
        let mut cpu0 = (0.0, 0.0);
        let mut checked = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(300);
        while bound.len() < pods && Instant::now() < deadline {
            if start.is_none() && checked.elapsed() > Duration::from_millis(20) {
                checked = Instant::now();
                if ready(&sched_admin) {
                    start = Some(checked);
                    cpu0 = (cpu_secs(server.pid()), cpu_secs(sched.pid()));
                }
            }
            let ev = tokio::time::timeout(Duration::from_millis(100), events.next()).await;
            let Ok(Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)))) = ev else {
                continue;
            };
            if p.spec
                .and_then(|s| s.node_name)
                .is_some_and(|n| !n.is_empty())
            {
                bound.insert(p.metadata.name.unwrap_or_default());
            }
        }
        let start = start.unwrap_or(spawned);
        let secs = start.elapsed().as_secs_f64();
        println!(
            "end to end, two processes, {nodes} sim nodes, {pods} pods created first: {} bound in {secs:.2} s after the scheduler was ready = {:.0} pods/s (start-up to ready {:.2} s)",
            bound.len(),
            bound.len() as f64 / secs,
            (start - spawned).as_secs_f64()
        );
        let sched_cpu = cpu_secs(sched.pid()) - cpu0.1;
        println!(
            "  CPU meanwhile: API server {:.2} s, scheduler {sched_cpu:.2} s = {:.0} µs per pod (2 cores, shared with this watcher)",
            cpu_secs(server.pid()) - cpu0.0,
            sched_cpu * 1e6 / bound.len().max(1) as f64
        );
        let (rss, peak) = rss_mib(sched.pid());
        println!("  scheduler RSS {rss:.1} MiB at the end, peak {peak:.1} MiB");
        // How many cycles the pods took (a pod scheduled twice costs twice).
        let metrics = admin_get(&sched_admin, "/metrics").unwrap_or_default();
        for line in metrics
            .lines()
            .filter(|l| l.starts_with("scheduler_schedule_attempts_total"))
        {
            println!("  {line}");
        }
    }
}
