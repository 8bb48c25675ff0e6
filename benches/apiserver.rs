//! Embedded API server throughput: store commits, HTTP writes through kube-rs, and watch
//! fan-out (events delivered per second to 100 HTTP watchers).
//!
//! `cargo bench --bench apiserver` (release build). Numbers go to the README.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use koord::apiserver::store::{Change, Store, StoreError, StoreOptions};
use koord::apiserver::{ApiServer, Options};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn cm_value(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"bench": "yes"}},
        "data": {"payload": "x".repeat(256)}})
}

fn store_commits(n: usize) {
    let store = Store::temporary(StoreOptions::default()).unwrap();
    let key = (String::new(), "configmaps".to_string());
    let start = Instant::now();
    for i in 0..n {
        let name = format!("cm-{i}");
        store
            .commit::<StoreError>(&key, "default", &name, |_| Ok(Change::Put(cm_value(&name))))
            .unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "store commit (sled, in process):        {n} writes in {secs:.2}s = {:.0} writes/s",
        n as f64 / secs
    );
}

async fn http_writes(server: &ApiServer, n: usize, concurrency: usize, prefix: &str) {
    let client = server.client().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let start = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let api = api.clone();
            async move {
                let cm: ConfigMap =
                    serde_json::from_value(cm_value(&format!("{prefix}-{i}"))).unwrap();
                api.create(&PostParams::default(), &cm).await.unwrap();
            }
        })
        .await;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "HTTP create via kube-rs, concurrency {concurrency:>2}:   {n} writes in {secs:.2}s = {:.0} writes/s",
        n as f64 / secs
    );
}

async fn watch_fanout(server: &ApiServer, watchers: usize, n: usize) {
    let client = server.client().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "fanout");
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "fanout"}})).unwrap(),
    )
    .await
    .unwrap();
    let rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let ready = Arc::new(tokio::sync::Barrier::new(watchers + 1));
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let api = api.clone();
        let rv = rv.clone();
        let ready = ready.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = api
                .watch(&WatchParams::default().timeout(290), &rv)
                .await
                .unwrap()
                .boxed();
            ready.wait().await;
            let mut seen = 0;
            while seen < n {
                if let Some(WatchEvent::Added(_)) = stream.try_next().await.unwrap() {
                    seen += 1;
                }
            }
            Instant::now()
        }));
    }
    ready.wait().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let start = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move {
                let mut v = cm_value(&format!("f-{i}"));
                v["metadata"]["namespace"] = "fanout".into();
                api.create(&PostParams::default(), &serde_json::from_value(v).unwrap())
                    .await
                    .unwrap();
            }
        })
        .await;
    let writes_done = start.elapsed().as_secs_f64();
    let mut last = start;
    for t in tasks {
        last = last.max(t.await.unwrap());
    }
    let secs = (last - start).as_secs_f64();
    let events = watchers * n;
    println!(
        "watch fan-out: {watchers} watchers x {n} writes:  {events} events in {secs:.2}s = {:.0} events/s delivered (writes took {writes_done:.2}s)",
        events as f64 / secs
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("apiserver: bench");
        return;
    }
    println!(
        "koord embedded API server benchmark ({} CPUs)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    store_commits(50_000);
    let server = ApiServer::start(Options::for_tests()).await.unwrap();
    http_writes(&server, 5_000, 1, "serial").await;
    http_writes(&server, 10_000, 32, "parallel").await;
    watch_fanout(&server, 100, 2_000).await;
    server.shutdown().await;

    // As `--embedded` runs: HTTPS, a token, the store on this machine's disk, every write
    // answered once flushed (the temporary store above lives in memory).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut opts = Options::for_tests();
    opts.tls = true;
    opts.data_dir = Some(dir.path().to_path_buf());
    let server = ApiServer::start(opts).await.unwrap();
    println!("as --embedded (HTTPS, token, on-disk store, durable writes):");
    http_writes(&server, 1_000, 1, "durable-serial").await;
    http_writes(&server, 10_000, 32, "durable-parallel").await;
    server.shutdown().await;
}
