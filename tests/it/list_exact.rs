//! `resourceVersionMatch=Exact` serves the list as it was at that revision (kube's watch
//! cache and etcd do), or 410 once the history no longer reaches back to it.

use crate::common;

use std::collections::BTreeMap;

use common::{TestApi, api_code};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams, VersionMatch};
use serde_json::json;

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": v}})).unwrap()
}

fn at(rv: &str) -> ListParams {
    ListParams::default().at(rv).matching(VersionMatch::Exact)
}

fn summary(list: &kube::core::ObjectList<ConfigMap>) -> BTreeMap<String, String> {
    list.items
        .iter()
        .filter(|c| c.metadata.name.as_deref() != Some("kube-root-ca.crt"))
        .map(|c| {
            let v = c.data.as_ref().and_then(|d| d.get("v")).cloned();
            (
                c.metadata.name.clone().unwrap_or_default(),
                v.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn exact_list_is_the_state_at_that_revision() {
    let api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let pp = PostParams::default();
    cms.create(&pp, &cm("a", "1")).await.unwrap();
    let b = cms.create(&pp, &cm("b", "1")).await.unwrap();
    let rv_b = b.metadata.resource_version.clone().unwrap();
    let mut a = cms.get("a").await.unwrap();
    a.data = Some([("v".to_string(), "2".to_string())].into());
    cms.replace("a", &pp, &a).await.unwrap();
    cms.delete("b", &DeleteParams::default()).await.unwrap();
    cms.create(&pp, &cm("c", "1")).await.unwrap();

    let then = cms.list(&at(&rv_b)).await.unwrap();
    assert_eq!(
        then.metadata.resource_version.as_deref(),
        Some(rv_b.as_str())
    );
    let want: BTreeMap<String, String> =
        [("a".into(), "1".into()), ("b".into(), "1".into())].into();
    assert_eq!(summary(&then), want, "as it was at {rv_b}");
    let now = cms.list(&ListParams::default()).await.unwrap();
    let want_now: BTreeMap<String, String> =
        [("a".into(), "2".into()), ("c".into(), "1".into())].into();
    assert_eq!(summary(&now), want_now);

    assert_eq!(
        api_code(cms.list(&at("1")).await),
        410,
        "before the history"
    );
    // kube-rs refuses these itself; kubectl --raw or another client need not.
    for (query, why) in [
        ("resourceVersion=0&resourceVersionMatch=Exact", "Exact at 0"),
        ("resourceVersionMatch=Exact", "no resourceVersion"),
        (
            "resourceVersion=5&resourceVersionMatch=Soon",
            "unknown match",
        ),
    ] {
        let path = format!("/api/v1/namespaces/default/configmaps?{query}");
        let req = hyper::Request::get(path).body(Vec::new()).unwrap();
        let r = api.client.request::<serde_json::Value>(req).await;
        assert_eq!(api_code(r), 422, "{why}");
    }
}

/// kube-apiserver's max-in-flight: a read holds its seat until its body is sent, the next
/// read beyond the limit gets 429 with Retry-After, and writes and watches have their own.
#[tokio::test]
async fn reads_beyond_the_inflight_limit_get_429() {
    use std::io::Write;
    let mut opts = koord::apiserver::Options::for_tests();
    opts.inflight = koord::apiserver::http::InFlight::new(1, 1);
    let api = TestApi::start_with(opts).await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let big = "x".repeat(500_000);
    for i in 0..40 {
        cms.create(&PostParams::default(), &cm(&format!("big-{i}"), &big))
            .await
            .unwrap();
    }
    // A client that asks for 20 MB and reads none of it keeps its seat.
    let mut slow = std::net::TcpStream::connect(api.server().addr()).unwrap();
    slow.write_all(b"GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut refused = false;
    for _ in 0..50 {
        match cms.list(&ListParams::default().limit(1)).await {
            Err(kube::Error::Api(s)) if s.code == 429 => {
                assert_eq!(s.message, "Too many requests, please try again later.");
                refused = true;
                break;
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    assert!(refused, "a second read while the first is being sent");
    cms.create(&PostParams::default(), &cm("small", "1"))
        .await
        .expect("writes have seats of their own");
    let w = cms
        .watch(&kube::api::WatchParams::default().timeout(1), "0")
        .await;
    assert!(w.is_ok(), "a watch takes no seat");
    drop(slow);
    let freed = common::eventually(std::time::Duration::from_secs(10), || async {
        cms.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;
    assert!(freed, "the seat comes back once the slow client leaves");
}
