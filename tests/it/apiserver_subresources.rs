//! Bindings, evictions with and without a blocking PodDisruptionBudget, CRDs created at
//! run time, and admission webhooks (HTTPS with a caBundle; a plain HTTP one is refused).

use crate::common;

use std::sync::Arc;

use base64::Engine;
use common::{TestApi, api_code, free_port};
use hyper::{Request, StatusCode};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, EvictParams, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::discovery::Discovery;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn pod(name: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap()
}

async fn make_running(pods: &Api<Pod>, name: &str) {
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

#[tokio::test]
async fn binding_sets_node_once() {
    let api = TestApi::start().await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
    let bind = |b: Value| {
        let pods = pods.clone();
        async move {
            pods.create_subresource::<Value, Value>("binding", "p", &PostParams::default(), &b)
                .await
        }
    };
    bind(binding.clone()).await.unwrap();
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let conds = bound.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let mut again = binding.clone();
    again["target"]["name"] = "n2".into();
    assert_eq!(
        api_code(bind(again).await),
        409,
        "a second binding conflicts"
    );
}

#[tokio::test]
async fn eviction_honours_pdb() {
    let api = TestApi::start().await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    for name in ["free", "guarded"] {
        pods.create(&PostParams::default(), &pod(name, json!({"app": name})))
            .await
            .unwrap();
        make_running(&pods, name).await;
    }
    pods.evict("free", &EvictParams::default()).await.unwrap();
    assert_eq!(api_code(pods.get("free").await), 404, "no PDB: evicted");

    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(api.client.clone(), "default");
    let pdb = json!({"metadata": {"name": "keep-one"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}});
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(pdb).unwrap(),
    )
    .await
    .unwrap();
    match pods.evict("guarded", &EvictParams::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 429);
            assert!(s.message.contains("disruption budget"), "{}", s.message);
        }
        other => panic!("expected 429, got {other:?}"),
    }
    assert!(pods.get("guarded").await.is_ok());
    // A bound pod is deleted gracefully: it stays, terminating, for its kubelet.
    pods.create(&PostParams::default(), &pod("bound", json!({})))
        .await
        .unwrap();
    let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"}, "target": {"kind": "Node", "name": "n1"}});
    pods.create_subresource::<Value, Value>("binding", "bound", &PostParams::default(), &b)
        .await
        .unwrap();
    make_running(&pods, "bound").await;
    pods.evict("bound", &EvictParams::default()).await.unwrap();
    assert!(
        pods.get("bound")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
}

#[tokio::test]
async fn crd_created_at_runtime_is_served() {
    let api = TestApi::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(api.client.clone());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}}]}
    });
    let created = crds
        .create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await
        .unwrap();
    let established = created.status.unwrap().conditions.unwrap();
    assert!(
        established
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = Discovery::new(api.client.clone()).run().await.unwrap();
    assert!(
        discovery.groups().any(|g| g.name() == "example.com"),
        "discoverable"
    );
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(api.client.clone(), "default", &ar);
    let w: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 3}, "status": {"ignored": true}}))
        .unwrap();
    let stored = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(stored.data["spec"]["size"], 3);
    assert!(
        stored.data.get("status").is_none(),
        "status is dropped on create when it is a subresource"
    );
    let st = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["ready"], true);
    assert_eq!(
        api_code(
            widgets
                .patch(
                    "w1",
                    &PatchParams::default(),
                    &Patch::Strategic(json!({"spec": {"size": 4}}))
                )
                .await
        ),
        415
    );
    assert_eq!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    crds.delete("widgets.example.com", &Default::default())
        .await
        .unwrap();
    assert_eq!(
        api_code(widgets.list(&ListParams::default()).await),
        404,
        "no longer served"
    );
}

/// A webhook server: `/mutate` adds a label, `/validate` denies names starting `bad-`.
async fn webhook_handler(
    req: Request<hyper::body::Incoming>,
) -> hyper::Response<koord::kernel::http::Body> {
    let path = req.uri().path().to_string();
    let body = koord::kernel::http::read_body(req.into_body(), 1 << 20)
        .await
        .unwrap();
    let review: Value = serde_json::from_slice(&body).unwrap();
    let uid = review["request"]["uid"].clone();
    let name = review["request"]["name"].as_str().unwrap_or("").to_string();
    let response = match path.as_str() {
        "/mutate" => {
            let patch = json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "true"}]);
            let b64 = base64::engine::general_purpose::STANDARD
                .encode(serde_json::to_vec(&patch).unwrap());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": b64})
        }
        _ if name.starts_with("bad-") => {
            json!({"uid": uid, "allowed": false, "status": {"code": 403, "message": "names starting with bad- are not allowed"}})
        }
        _ => json!({"uid": uid, "allowed": true}),
    };
    let out = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    koord::kernel::http::json(StatusCode::OK, &out)
}

fn webhook(name: &str, url: &str, ca: Option<&str>, label: &str, policy: &str) -> Value {
    let mut cc = json!({"url": url});
    if let Some(ca) = ca {
        cc["caBundle"] = base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    json!({"name": name, "clientConfig": cc, "failurePolicy": policy, "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "timeoutSeconds": 2,
        "objectSelector": {"matchLabels": {"hook": label}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]})
}

#[tokio::test]
async fn webhooks_mutate_deny_and_follow_failure_policy() {
    let api = TestApi::start().await;
    let stop = CancellationToken::new();
    let bundle = koord::kernel::tls::generate("webhook-ca", &["127.0.0.1".into()]).unwrap();
    let tls =
        koord::kernel::tls::server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())
            .unwrap();
    let https = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let https_addr = https.local_addr().unwrap();
    let servers = tokio::spawn({
        let stop = stop.clone();
        async move {
            let source = Arc::new(std::sync::RwLock::new(tls));
            let _ = koord::kernel::http::serve_tls(https, source, webhook_handler, stop).await;
        }
    });
    let dead = format!("https://127.0.0.1:{}/validate", free_port());
    let mutating = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "m"}, "webhooks": [webhook("mutate.koord.test", &format!("https://{https_addr}/mutate"), Some(&bundle.ca_pem), "on", "Fail")]});
    let validating = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "v"}, "webhooks": [
            webhook("deny.koord.test", &format!("https://{https_addr}/validate"), Some(&bundle.ca_pem), "on", "Fail"),
            webhook("down-ignore.koord.test", &dead, Some(&bundle.ca_pem), "ignore", "Ignore"),
            webhook("down-fail.koord.test", &dead, Some(&bundle.ca_pem), "fail", "Fail")]});
    let ar = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
            plural,
        )
    };
    let m: Api<DynamicObject> = Api::all_with(
        api.client.clone(),
        &ar(
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    );
    m.create(
        &PostParams::default(),
        &serde_json::from_value(mutating).unwrap(),
    )
    .await
    .unwrap();
    let v: Api<DynamicObject> = Api::all_with(
        api.client.clone(),
        &ar(
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    v.create(
        &PostParams::default(),
        &serde_json::from_value(validating).unwrap(),
    )
    .await
    .unwrap();
    // As kube-apiserver, a webhook is called over HTTPS only, and its name is a domain.
    let plain = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "plain"}, "webhooks": [webhook("plain.test", "http://127.0.0.1:9/x", None, "on", "Fail")]});
    let refused = v
        .create(
            &PostParams::default(),
            &serde_json::from_value(plain).unwrap(),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"plain\" is invalid: [webhooks[0].name: Invalid value: \"plain.test\": should be a domain with at least three segments separated by dots, webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme]"
    );

    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let cm = |name: &str, hook: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"hook": hook}}}))
            .unwrap()
    };
    let created = cms
        .create(&PostParams::default(), &cm("good", "on"))
        .await
        .unwrap();
    assert_eq!(
        created.metadata.labels.unwrap()["mutated"],
        "true",
        "mutated over HTTPS with the caBundle"
    );
    match cms
        .create(&PostParams::default(), &cm("bad-one", "on"))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403);
            assert!(
                s.message.contains(
                    "admission webhook \"deny.koord.test\" denied the request: names starting with bad-"
                ),
                "{}",
                s.message
            );
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    cms.create(&PostParams::default(), &cm("ignored", "ignore"))
        .await
        .expect("failurePolicy Ignore lets it through");
    assert_eq!(
        api_code(
            cms.create(&PostParams::default(), &cm("failed", "fail"))
                .await
        ),
        500,
        "failurePolicy Fail rejects"
    );
    stop.cancel();
    servers.await.unwrap();
}
