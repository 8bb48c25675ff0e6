//! The scheduler's writes: `pods/{name}/binding`, FailedScheduling/Scheduled events and
//! the PodScheduled condition.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::framework::PodInfo;

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("binding {pod} to {node}: {source}")]
    Api {
        pod: String,
        node: String,
        source: kube::Error,
    },
}

impl BindError {
    /// The pod is already bound or gone: do not retry.
    pub fn is_conflict(&self) -> bool {
        let BindError::Api { source, .. } = self;
        matches!(source, kube::Error::Api(s) if s.code == 409 || s.code == 404)
    }
}

/// POSTs the Binding (DefaultBinder).
pub async fn bind(client: &kube::Client, pod: &PodInfo, node: &str) -> Result<(), BindError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    api.create_subresource::<serde_json::Value, serde_json::Value>(
        "binding",
        &pod.name,
        &PostParams::default(),
        &binding,
    )
    .await
    .map(|_| ())
    .map_err(|source| BindError::Api {
        pod: pod.key.clone(),
        node: node.to_string(),
        source,
    })
}

fn event(pod: &PodInfo, type_: &str, reason: &str, message: String) -> Event {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}.", pod.name)),
            namespace: Some(pod.namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some(type_.into()),
        source: Some(EventSource {
            component: Some("koord-scheduler".into()),
            host: None,
        }),
        reporting_component: Some("koord-scheduler".into()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Default::default()
    }
}

/// `Scheduled` (Normal) after a successful binding.
pub async fn scheduled(client: &kube::Client, pod: &PodInfo, node: &str) {
    let e = event(
        pod,
        "Normal",
        "Scheduled",
        format!("Successfully assigned {} to {node}", pod.key),
    );
    let _ = Api::<Event>::namespaced(client.clone(), &pod.namespace)
        .create(&PostParams::default(), &e)
        .await;
}

/// `FailedScheduling` (Warning) and the PodScheduled=False condition.
pub async fn unschedulable(client: &kube::Client, pod: &PodInfo, message: &str) {
    let e = event(pod, "Warning", "FailedScheduling", message.to_string());
    let events: Api<Event> = Api::namespaced(client.clone(), &pod.namespace);
    if let Err(err) = events.create(&PostParams::default(), &e).await {
        tracing::debug!(pod = %pod.key, %err, "FailedScheduling event not recorded");
    }
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": message, "lastTransitionTime": now}]}});
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    if let Err(err) = pods
        .patch_status(
            &pod.name,
            &PatchParams::default(),
            &Patch::Strategic(status),
        )
        .await
    {
        tracing::debug!(pod = %pod.key, %err, "PodScheduled condition not updated");
    }
}
