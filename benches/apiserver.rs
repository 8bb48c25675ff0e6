//! Embedded API server throughput: store commits, HTTP writes through kube-rs (as the
//! admin and as a ServiceAccount authorized by RBAC), custom objects through their CRD
//! schema, watch fan-out (events delivered per second to 100 HTTP watchers), and the
//! per-request cost of authorization and schema checks measured on their own.
//!
//! `cargo bench --bench apiserver` (release build). Numbers go to docs/performance.md.

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
    http_writes_as(client, n, concurrency, prefix, "via kube-rs").await;
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

/// The cost of what every request and every custom-object write now goes through,
/// measured apart from HTTP: the RBAC decision (kube's bootstrap policy plus Koordinator's
/// chart RBAC loaded, a ServiceAccount allowed through a RoleBinding of the aggregated
/// `edit` role, and one denied) and a NodeMetric's prune + default + validate.
fn enforcement_cost() {
    use koord::apiserver::auth::{Attributes, User, rbac::Index};
    let store = Store::temporary(StoreOptions::default()).unwrap();
    let rbac = |r: &str| ("rbac.authorization.k8s.io".to_string(), r.to_string());
    for (resource, name, obj) in koord::apiserver::auth::policy::objects() {
        store
            .commit::<StoreError>(&rbac(resource), "", &name, |_| Ok(Change::Put(obj.clone())))
            .unwrap();
    }
    let binding = json!({"metadata": {"name": "sa-edit", "namespace": "default"},
        "roleRef": {"kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": "default"}]});
    store
        .commit::<StoreError>(&rbac("rolebindings"), "default", "sa-edit", |_| {
            Ok(Change::Put(binding.clone()))
        })
        .unwrap();
    store.settle().unwrap();
    let idx = Index::build(&store);
    let sa = User::service_account("default", "bench", "u");
    let allowed = Attributes::of_request(
        &hyper::Method::POST,
        "/api/v1/namespaces/default/configmaps",
        false,
    );
    let denied = Attributes::of_request(&hyper::Method::GET, "/apis/batch/v1/jobs", false);
    let n = 200_000;
    for (what, a, want) in [("allowed", &allowed, true), ("denied", &denied, false)] {
        let start = Instant::now();
        for _ in 0..n {
            assert_eq!(std::hint::black_box(idx.authorize(&sa, a)).0, want);
        }
        let ns = start.elapsed().as_nanos() as f64 / n as f64;
        println!("RBAC decision, ServiceAccount, {what}:    {ns:.0} ns per request");
    }
    let crd = koord::api::crds::all()
        .into_iter()
        .find(|c| c.spec.names.kind == "NodeMetric")
        .unwrap();
    let crd = serde_json::to_value(crd).unwrap();
    let schema = koord::apiserver::schema::compile(
        crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
            .unwrap(),
    )
    .unwrap();
    let pods: Vec<serde_json::Value> = (0..100).map(|i| json!({"namespace": "default", "name": format!("p-{i}"),
        "podUsage": {"resources": {"cpu": "250m", "memory": "512Mi"}}, "priority": "koord-prod", "qos": "LS"})).collect();
    let obj = json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": "n"},
        "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}},
        "status": {"updateTime": "2026-12-02T00:00:00Z", "nodeMetric": {"nodeUsage": {"resources": {"cpu": "4", "memory": "8Gi"}}},
                   "podsMetric": pods}});
    let m = 2_000;
    let start = Instant::now();
    for _ in 0..m {
        let mut v = obj.clone();
        koord::apiserver::schema::prune(&mut v, &schema, true);
        koord::apiserver::schema::drop_nulls(&mut v, &schema);
        koord::apiserver::schema::default(&mut v, &schema);
        assert!(koord::apiserver::schema::validate(&v, &schema, Some(&obj)).is_empty());
    }
    let us = start.elapsed().as_micros() as f64 / m as f64;
    let bytes = serde_json::to_vec(&obj).unwrap().len();
    println!(
        "NodeMetric schema (100 pods, {bytes} B): {us:.1} µs per write (prune, default, validate with ratcheting)"
    );
}

/// A client acting as ServiceAccount `default/bench`, bound to `edit` in `default`.
async fn service_account_client(server: &ApiServer) -> kube::Client {
    let admin = server.client().await.unwrap();
    let post = |path: &str, body: serde_json::Value| {
        let req = hyper::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        admin.request::<serde_json::Value>(req)
    };
    post(
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bench"}}),
    )
    .await
    .unwrap();
    post("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding", "metadata": {"name": "bench-edit"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": "default"}]})).await.unwrap();
    let tr = post(
        "/api/v1/namespaces/default/serviceaccounts/bench/token",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await
    .unwrap();
    let token = tr["status"]["token"].as_str().unwrap();
    let kc = server
        .kubeconfig()
        .replace("user: {}", &format!("user: {{token: {token}}}"));
    let kc = kube::config::Kubeconfig::from_yaml(&kc).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

async fn http_writes_as(
    client: kube::Client,
    n: usize,
    concurrency: usize,
    prefix: &str,
    who: &str,
) {
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
        "HTTP create {who}, concurrency {concurrency:>2}:   {n} writes in {secs:.2}s = {:.0} writes/s",
        n as f64 / secs
    );
}

/// NodeSLO creates (a custom object: pruned, defaulted, validated against its CRD).
async fn custom_writes(server: &ApiServer, n: usize, concurrency: usize) {
    let client = server.client().await.unwrap();
    let start = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let client = client.clone();
            async move {
                let body = json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": format!("n-{i}")},
                    "spec": {"resourceUsedThresholdWithBE": {"enable": true, "cpuSuppressThresholdPercent": 65, "cpuSuppressPolicy": "cpuset"},
                             "resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": true, "groupIdentity": 2}}}}});
                let req = hyper::Request::post("/apis/slo.koordinator.sh/v1alpha1/nodeslos").header("content-type", "application/json")
                    .body(serde_json::to_vec(&body).unwrap()).unwrap();
                client.request::<serde_json::Value>(req).await.unwrap();
            }
        })
        .await;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "HTTP create NodeSLO (CRD schema), concurrency {concurrency:>2}: {n} writes in {secs:.2}s = {:.0} writes/s",
        n as f64 / secs
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
    enforcement_cost();
    let server = ApiServer::start(Options::for_tests()).await.unwrap();
    http_writes(&server, 5_000, 1, "serial").await;
    http_writes(&server, 10_000, 32, "parallel").await;
    let sa = service_account_client(&server).await;
    http_writes_as(sa, 10_000, 32, "sa-parallel", "as a ServiceAccount (RBAC)").await;
    custom_writes(&server, 10_000, 32).await;
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
