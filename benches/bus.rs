//! What a pod costs `koord --role=all --embedded`, where every role and the embedded
//! controllers share one process: 20 simulated nodes (`--sim-nodes`, 32 CPUs and 256 GiB
//! each, node runtime off),
//! PODS (default 300) pods created over HTTP (16 in flight) with schedulerName
//! koord-scheduler and a nodeSelector for the simulated nodes, bound by the scheduler
//! and marked Running by the simulator, then
//! deleted. Measured on the koord process (API server included): CPU seconds (utime +
//! stime from /proc) from the first create until every pod is Running plus 5 s, and from
//! the first delete until every pod is gone plus 5 s, per pod; VmRSS before, its peak
//! (VmHWM) and after. (The list and watch requests per kind are counted by
//! `tests/it/bus.rs`.)
//!
//! `BENCH_KOORD_BIN=<path>` measures another koord binary with the same flags — the
//! performance history compares the commit before the in-process event bus with the
//! current one this way.
//! Run: `cargo bench --bench bus`.

mod common;

use std::time::{Duration, Instant};

use common::{TICKS_PER_SECOND, proc_stat};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;

fn pods_wanted() -> usize {
    std::env::var("PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("bus-{i}"), "labels": {"app": "bus"}},
        "spec": {"schedulerName": "koord-scheduler",
            "nodeSelector": {"sim.koord.io/simulated": "true"},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    }))
    .unwrap()
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

async fn count(api: &Api<Pod>, f: impl Fn(&Pod) -> bool) -> usize {
    let lp = ListParams::default().labels("app=bus");
    api.list(&lp)
        .await
        .map(|l| l.items.iter().filter(|p| f(p)).count())
        .unwrap_or(0)
}

async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !done().await {
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = pods_wanted();
    let dir = tempfile::tempdir().unwrap();
    let (server, _, client) = common::embedded(dir.path(), &["--role=all"], 20, "256Gi").await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let pid = server.pid();
    let (rss0, t0) = proc_stat(pid);

    stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &pod(i)).await.unwrap();
            }
        })
        .await;
    until("every pod Running", async || {
        count(&api, running).await == n
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss1, t1) = proc_stat(pid);
    let (_, hwm) = common::rss_mib(pid);

    stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move {
                let _ = api
                    .delete(&format!("bus-{i}"), &DeleteParams::default())
                    .await;
            }
        })
        .await;
    until("every pod gone", async || count(&api, |_| true).await == 0).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss2, t2) = proc_stat(pid);

    let ms = |a: u64, b: u64| (b - a) as f64 / TICKS_PER_SECOND * 1000.0 / n as f64;
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("bus: {n} pods over 20 simulated nodes");
    println!(
        "  CPU per pod: create→Running {:.2} ms, delete→gone {:.2} ms",
        ms(t0, t1),
        ms(t1, t2)
    );
    println!(
        "  RSS: before {:.1} MiB, after create {:.1} MiB (peak {:.1}), after delete {:.1} MiB",
        mib(rss0),
        mib(rss1),
        hwm,
        mib(rss2)
    );
}
