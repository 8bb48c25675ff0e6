//! Watches through kube-runtime: a reflector in sync across 10,000 writes, resuming after
//! a server restart, re-listing after an expired resourceVersion, bookmarks and streaming
//! lists.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{TestApi, eventually, free_port};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use koord::apiserver::Options;
use koord::apiserver::store::{Change, Store, StoreError, StoreOptions};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use tokio::sync::mpsc;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": "0"}})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_stays_in_sync_across_10000_writes() {
    let api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let (reader, writer) = reflector::store();
    let stream =
        reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let driver = tokio::spawn(async move { stream.for_each(|_| async {}).await });
    reader.wait_until_ready().await.unwrap();

    // 2,000 creates, 7,000 updates, 1,000 deletes.
    let names: Vec<String> = (0..2000).map(|i| format!("cm-{i}")).collect();
    let mut writes = Vec::new();
    for n in &names {
        writes.push(("create", n.clone(), 0));
    }
    for round in 1..=3 {
        for n in &names {
            writes.push(("update", n.clone(), round));
        }
    }
    for n in names.iter().skip(1000) {
        writes.push(("update", n.clone(), 4));
    }
    for n in names.iter().take(1000) {
        writes.push(("delete", n.clone(), 0));
    }
    for chunk in writes.chunks(2000) {
        futures::stream::iter(chunk.to_vec())
            .for_each_concurrent(16, |(op, name, round)| {
                let cms = cms.clone();
                async move {
                    match op {
                        "create" => drop(
                            cms.create(&PostParams::default(), &cm(&name))
                                .await
                                .unwrap(),
                        ),
                        "update" => drop(
                            cms.patch(
                                &name,
                                &PatchParams::default(),
                                &Patch::Merge(json!({"data": {"v": round.to_string()}})),
                            )
                            .await
                            .unwrap(),
                        ),
                        _ => drop(cms.delete(&name, &DeleteParams::default()).await.unwrap()),
                    }
                }
            })
            .await;
    }
    assert_eq!(writes.len(), 10_000);
    let expected: BTreeMap<String, String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.unwrap(),
                c.metadata.resource_version.unwrap(),
            )
        })
        .collect();
    // As on a cluster, the namespace also holds kube-root-ca.crt.
    assert_eq!(expected.len(), 1001);
    let synced = eventually(Duration::from_secs(30), || {
        let reader = reader.clone();
        let expected = expected.clone();
        async move {
            let got: BTreeMap<String, String> = reader
                .state()
                .iter()
                .map(|c| {
                    (
                        c.metadata.name.clone().unwrap(),
                        c.metadata.resource_version.clone().unwrap(),
                    )
                })
                .collect();
            got == expected
        }
    })
    .await;
    assert!(
        synced,
        "reflector diverged from the server: {} cached vs {} stored",
        reader.state().len(),
        expected.len()
    );
    driver.abort();
}

/// Runs a kube-runtime watcher on ConfigMaps, forwarding its events.
fn spawn_watcher(
    client: kube::Client,
) -> (mpsc::UnboundedReceiver<String>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let handle = tokio::spawn(async move {
        let mut stream = watcher(cms, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            let line = match ev {
                Ok(watcher::Event::Init) => "init".to_string(),
                Ok(watcher::Event::InitApply(c)) => {
                    format!("initapply:{}", c.metadata.name.unwrap_or_default())
                }
                Ok(watcher::Event::InitDone) => "initdone".to_string(),
                Ok(watcher::Event::Apply(c)) => {
                    format!("apply:{}", c.metadata.name.unwrap_or_default())
                }
                Ok(watcher::Event::Delete(c)) => {
                    format!("delete:{}", c.metadata.name.unwrap_or_default())
                }
                Err(_) => continue,
            };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (rx, handle)
}

async fn expect_event(
    rx: &mut mpsc::UnboundedReceiver<String>,
    want: &str,
    seen: &mut Vec<String>,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ev = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no {want:?}; saw {seen:?}"));
        let ev = ev.expect("watcher ended");
        seen.push(ev.clone());
        if ev == want {
            return;
        }
    }
}

fn persistent(dir: &std::path::Path, port: u16) -> Options {
    let mut o = Options::for_tests();
    o.addr = format!("127.0.0.1:{port}").parse().unwrap();
    o.data_dir = Some(dir.to_path_buf());
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_resumes_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = TestApi::start_with(persistent(dir.path(), port)).await;
    let (mut rx, handle) = spawn_watcher(api.client.clone());
    let mut seen = Vec::new();
    expect_event(&mut rx, "initdone", &mut seen).await;
    Api::<ConfigMap>::namespaced(api.client.clone(), "default")
        .create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    expect_event(&mut rx, "apply:before", &mut seen).await;

    api.stop().await;
    let api = TestApi::start_with(persistent(dir.path(), port)).await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    assert!(
        cms.get("before").await.is_ok(),
        "objects survive the restart"
    );
    cms.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    expect_event(&mut rx, "apply:after", &mut seen).await;
    assert_eq!(
        seen.iter().filter(|e| *e == "init").count(),
        1,
        "resumed without re-listing: {seen:?}"
    );
    handle.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_resource_version_makes_the_watcher_relist() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut api = TestApi::start_with(persistent(dir.path(), port)).await;
    let (mut rx, handle) = spawn_watcher(api.client.clone());
    let mut seen = Vec::new();
    expect_event(&mut rx, "initdone", &mut seen).await;
    api.stop().await;
    // Another writer changes the store while the server is down: the watcher's revision
    // is older than anything the restarted server keeps history for.
    {
        let store = Store::open(&dir.path().join("apiserver"), StoreOptions::default()).unwrap();
        let key = (String::new(), "configmaps".to_string());
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "offline", "namespace": "default", "uid": "u"}});
        store
            .commit::<StoreError>(&key, "default", "offline", |_| Ok(Change::Put(obj)))
            .unwrap();
        store.durable(store.rev()).await.unwrap();
    }
    let _api = TestApi::start_with(persistent(dir.path(), port)).await;
    expect_event(&mut rx, "initapply:offline", &mut seen).await;
    assert_eq!(
        seen.iter().filter(|e| *e == "init").count(),
        2,
        "re-listed after 410: {seen:?}"
    );
    handle.abort();
}

#[tokio::test]
async fn raw_watch_expired_bookmarks_and_streaming_list() {
    let mut opts = Options::for_tests();
    opts.store.history = 5;
    opts.bookmark_interval = Duration::from_millis(300);
    let api = TestApi::start_with(opts).await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    // Revision 1 has left the 5-event history: an in-stream 410.
    let mut old = cms
        .watch(&WatchParams::default().timeout(5), "1")
        .await
        .unwrap()
        .boxed();
    match old.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // Bookmarks carry kind and apiVersion (kube-core would fail to decode them otherwise).
    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut w = cms
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    let got_bookmark = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(ev) = w.try_next().await.unwrap() {
            if let WatchEvent::Bookmark(b) = ev {
                return b.metadata.resource_version;
            }
        }
        String::new()
    })
    .await
    .unwrap();
    assert!(got_bookmark.parse::<u64>().unwrap() >= rv.parse::<u64>().unwrap());
    // Streaming list: every object as ADDED, then the initial-events-end bookmark.
    let mut s = cms
        .watch(&WatchParams::streaming_lists().timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    let mut added = BTreeSet::new();
    loop {
        match s.try_next().await.unwrap() {
            Some(WatchEvent::Added(c)) => {
                added.insert(c.metadata.name.unwrap());
            }
            Some(WatchEvent::Bookmark(b)) => {
                assert_eq!(
                    b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // As on a cluster, the namespace also holds kube-root-ca.crt.
    assert!(added.remove("kube-root-ca.crt"));
    assert_eq!(added.len(), 10);
}
