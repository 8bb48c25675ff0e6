//! The scheduler's writes: `pods/{name}/binding`, FailedScheduling/Scheduled events and
//! the PodScheduled condition.

use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::framework::PodInfo;
use crate::kernel::events;

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("binding {pod} to {node}: {source}")]
    Api {
        pod: String,
        node: String,
        source: kube::Error,
    },
    #[error("patching {pod} before binding: {source}")]
    Patch { pod: String, source: kube::Error },
    #[error("{pod}: {plugin}: {message}")]
    Rejected {
        pod: String,
        plugin: String,
        message: String,
    },
}

impl BindError {
    /// The pod is gone: nothing to retry.
    pub fn is_gone(&self) -> bool {
        match self {
            BindError::Api { source, .. } | BindError::Patch { source, .. } => {
                matches!(source, kube::Error::Api(s) if s.code == 404)
            }
            BindError::Rejected { .. } => false,
        }
    }
}

/// DefaultPreBind: one JSON patch from the pod as scheduled to what PreBind made of it.
pub async fn patch(client: &kube::Client, pod: &PodInfo, modified: &Pod) -> Result<(), BindError> {
    use crate::scheduler::model::transform::untransformed;
    let mut before = serde_json::to_value(&*pod.pod).unwrap_or_default();
    let mut after = serde_json::to_value(modified).unwrap_or_default();
    untransformed(&mut before);
    untransformed(&mut after);
    let diff = json_patch::diff(&before, &after);
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    api.patch(&pod.name, &PatchParams::default(), &Patch::<()>::Json(diff))
        .await
        .map(|_| ())
        .map_err(|source| BindError::Patch {
            pod: pod.key.clone(),
            source,
        })
}

/// DevicePluginAdaption's lock on the node (Cambricon, MetaX), set before the pod's patch
/// as Koordinator's PreBind does; the vendor's device plugin removes it once it allocated.
pub async fn lock_node(
    client: &kube::Client,
    pod: &PodInfo,
    node: &str,
    (key, value): (&str, &str),
) -> Result<(), BindError> {
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let patch = json!({"metadata": {"annotations": {key: value}}});
    api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|source| BindError::Api {
            pod: pod.key.clone(),
            node: node.to_string(),
            source,
        })
}

/// POSTs the Binding (DefaultBinder).
pub async fn bind(client: &kube::Client, pod: &PodInfo, node: &str) -> Result<(), BindError> {
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let url = <Pod as kube::Resource>::url_path(&(), Some(&pod.namespace));
    let sent = async {
        let req = kube::core::Request::new(url)
            .create_subresource(
                "binding",
                &pod.name,
                &PostParams::default(),
                binding.to_string().into_bytes(),
            )
            .map_err(kube::Error::BuildRequest)?;
        events::post_unread(client, req).await
    };
    sent.await.map_err(|source| BindError::Api {
        pod: pod.key.clone(),
        node: node.to_string(),
        source,
    })
}

fn event(pod: &PodInfo, type_: &str, reason: &str, message: String) -> Event {
    let involved = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
        ..Default::default()
    };
    events::event(
        "koord-scheduler",
        None,
        involved,
        &pod.namespace,
        type_,
        reason,
        message,
    )
}

/// `Scheduled` (Normal) after a successful binding.
pub async fn scheduled(client: &kube::Client, pod: &PodInfo, node: &str) {
    let e = event(
        pod,
        "Normal",
        "Scheduled",
        format!("Successfully assigned {} to {node}", pod.key),
    );
    events::record(client, &e).await;
}

/// `FailedScheduling` (Warning) and the PodScheduled=False condition.
pub async fn unschedulable(client: &kube::Client, pod: &PodInfo, message: &str) {
    let e = event(pod, "Warning", "FailedScheduling", message.to_string());
    events::record(client, &e).await;
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

/// Preemption: `status.nominatedNodeName` on the preemptor (and on the rest of a
/// preempting job), then each victim marked with kube-scheduler's `DisruptionTarget`
/// condition and deleted (graceful) with a `Preempted` event.
pub async fn preempt(
    client: &kube::Client,
    pod: &PodInfo,
    nomination: &super::framework::Nomination,
) {
    // A pending Reservation has no pod object to nominate; its nomination is the cache's.
    if pod.reserve_of.is_none() {
        nominate(client, pod, &nomination.node).await;
    }
    if let Some(job) = &nomination.job {
        for (member, node) in job.pending.iter().chain(&job.waiting) {
            let status = member.pod.status.as_ref();
            if status.and_then(|s| s.nominated_node_name.as_deref()) != Some(node.as_str()) {
                nominate(client, member, node).await;
            }
        }
    }
    let scheduler = pod
        .spec()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    let message = format!(
        "{scheduler}: preempting to accommodate a higher priority pod, preemptor: {}",
        pod.key
    );
    for v in &nomination.victims {
        evict(client, pod, v, &message).await;
    }
}

async fn nominate(client: &kube::Client, pod: &PodInfo, node: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let status = json!({"status": {"nominatedNodeName": node}});
    if let Err(err) = pods
        .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(status))
        .await
    {
        tracing::debug!(pod = %pod.key, %err, "nominatedNodeName not set");
    }
}

/// One victim: the DisruptionTarget condition first (so the preemptor can tell its
/// victims leaving from other deletions), then the graceful delete.
async fn evict(client: &kube::Client, preemptor: &PodInfo, v: &PodInfo, message: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &v.namespace);
    let condition = json!({"status": {"conditions": [{
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": message,
        "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
    }]}});
    if let Err(err) = api
        .patch_status(
            &v.name,
            &PatchParams::default(),
            &Patch::Strategic(condition),
        )
        .await
    {
        tracing::debug!(victim = %v.key, %err, "DisruptionTarget condition not added");
    }
    let node = v.node_name.as_deref().unwrap_or_default();
    match api.delete(&v.name, &DeleteParams::default()).await {
        Ok(_) => {
            let by = if preemptor.uid.is_empty() {
                &preemptor.key
            } else {
                &preemptor.uid
            };
            let msg = format!("Preempted by pod {by} on node {node}");
            let e = event(v, "Normal", "Preempted", msg);
            events::record(client, &e).await;
        }
        Err(err) => tracing::warn!(victim = %v.key, %err, "preemption victim not deleted"),
    }
}
