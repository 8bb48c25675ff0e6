//! End-to-end scheduling throughput through the embedded API server: 500 simulated nodes
//! (`--sim-nodes`, 32 CPU / 256 Gi / 110 pods), 10,000 pods created over HTTP with 64 in
//! flight, the scheduler (default koord profile) watching, binding through pods/binding
//! and writing Scheduled events, the node simulator marking bound pods Running. Measured:
//! first create → every pod bound. Budget: ≥ 1,000 pods/s. Run:
//! `cargo bench --bench scheduler_e2e`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use koord::apiserver::store::Filter;
use koord::apiserver::{ApiServer, Options, sim};
use koord::kernel::{Shutdown, Tasks};
use koord::scheduler::live::{self, Ev, Scheduler};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const NODES: u32 = 500;
const PODS: usize = 10_000;

fn bound(server: &ApiServer) -> usize {
    let key = (String::new(), "pods".to_string());
    let (_, pods) = server.store().list(&key, &Filter::default());
    pods.iter()
        .filter(|p| {
            p.value()
                .pointer("/spec/nodeName")
                .and_then(|n| n.as_str())
                .is_some_and(|n| !n.is_empty())
        })
        .count()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
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
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    live::watch(
        Api::<Pod>::all(client.clone()),
        "pods",
        Ev::Pod,
        tx.clone(),
        &tasks,
        &shutdown,
    );
    live::watch(
        Api::<Node>::all(client.clone()),
        "nodes",
        Ev::Node,
        tx.clone(),
        &tasks,
        &shutdown,
    );
    live::watch(
        Api::<koord::api::slo::NodeMetric>::all(client.clone()),
        "nodemetrics",
        Ev::Metric,
        tx,
        &tasks,
        &shutdown,
    );
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
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    futures::stream::iter(0..PODS)
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
