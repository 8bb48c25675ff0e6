//! Deleting a CRD as kube-apiserver does: the CRD stays `Terminating` while its instances
//! are deleted the normal way (their finalizers honoured), new instances are refused, and
//! only then does the CRD go.

use crate::common;

use std::time::Duration;

use common::{TestApi, api_code, eventually};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

fn gadgets_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

fn gadget(name: &str, finalizers: &[&str]) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": name, "finalizers": finalizers}, "spec": {"n": 1}}))
    .unwrap()
}

fn terminating_reason(crd: &CustomResourceDefinition) -> Option<String> {
    let conds = crd.status.as_ref()?.conditions.as_ref()?;
    conds
        .iter()
        .find(|c| c.type_ == "Terminating")
        .and_then(|c| c.reason.clone())
}

#[tokio::test]
async fn crd_deletion_waits_for_its_resources_finalizers() {
    let api = TestApi::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(api.client.clone());
    crds.create(&PostParams::default(), &gadgets_crd())
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(api.client.clone(), "default", &ar);
    let pp = PostParams::default();
    gadgets
        .create(&pp, &gadget("held", &["example.com/hold"]))
        .await
        .unwrap();
    gadgets.create(&pp, &gadget("plain", &[])).await.unwrap();

    crds.delete("gadgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let gone_plain = eventually(Duration::from_secs(10), || async {
        gadgets.get_opt("plain").await.unwrap().is_none()
    })
    .await;
    assert!(gone_plain, "an instance without finalizers is deleted");
    let held = gadgets.get("held").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "the held instance is being deleted"
    );
    let crd = crds.get("gadgets.example.com").await.unwrap();
    assert!(crd.metadata.deletion_timestamp.is_some());
    assert!(
        crd.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"customresourcecleanup.apiextensions.k8s.io".to_string()),
        "kube's cleanup finalizer holds the CRD"
    );
    let reason = terminating_reason(&crds.get("gadgets.example.com").await.unwrap());
    assert_eq!(reason.as_deref(), Some("InstanceDeletionInProgress"));

    let refused = gadgets.create(&pp, &gadget("late", &[])).await;
    match refused {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 405);
            assert_eq!(
                s.message,
                "create not allowed while custom resource definition is terminating"
            );
        }
        other => panic!("expected 405, got {other:?}"),
    }

    gadgets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let crd_gone = eventually(Duration::from_secs(10), || async {
        crds.get_opt("gadgets.example.com").await.unwrap().is_none()
    })
    .await;
    assert!(crd_gone, "the CRD goes once its last instance is gone");
    assert_eq!(api_code(gadgets.get("held").await), 404);
}
