//! A client preferring protobuf gets a list transcoded while it is small; a list of more
//! JSON than the server holds in memory for a transcode comes as the JSON it streams (the
//! client accepts both), and a client that accepts only protobuf gets 406.

use crate::common::TestApi;

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;

const BOTH: &str = "application/vnd.kubernetes.protobuf, application/json";

async fn list(api: &TestApi, accept: &str) -> (u16, String, Vec<u8>) {
    let req = hyper::Request::get("/api/v1/namespaces/default/configmaps")
        .header("accept", accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = api.client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, ct, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_lists_are_not_transcoded_in_memory() {
    let mut api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let cm = |name: String, kib: usize| -> ConfigMap {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name},
            "data": {"v": "x".repeat(kib << 10)}}))
        .unwrap()
    };
    cms.create(&PostParams::default(), &cm("small".into(), 1))
        .await
        .unwrap();
    let (status, ct, body) = list(&api, BOTH).await;
    assert_eq!(
        (status, ct.as_str()),
        (200, "application/vnd.kubernetes.protobuf")
    );
    assert!(body.starts_with(b"k8s\0"));

    let max = koord::apiserver::http::negotiate::MAX_TRANSCODED;
    for i in 0..(max >> 20) + 2 {
        cms.create(&PostParams::default(), &cm(format!("big-{i}"), 1000))
            .await
            .unwrap();
    }
    let (status, ct, body) = list(&api, BOTH).await;
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    let list: serde_json::Value = serde_json::from_slice(&body).expect("the whole JSON list");
    let big = list["items"].as_array().unwrap().iter();
    let big = big.filter(|i| i["metadata"]["name"].as_str().unwrap().starts_with("big-"));
    assert_eq!(big.count(), (max >> 20) + 2);
    let (status, _, body) = list_only_protobuf(&api).await;
    assert_eq!(status, 406, "{}", String::from_utf8_lossy(&body));
    api.stop().await;
}

async fn list_only_protobuf(api: &TestApi) -> (u16, String, Vec<u8>) {
    list(api, "application/vnd.kubernetes.protobuf").await
}
