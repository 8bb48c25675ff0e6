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
