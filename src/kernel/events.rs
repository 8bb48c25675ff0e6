//! Kubernetes Events (core/v1) as every role writes them: one builder, one writer.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;

/// A `type_` (Normal/Warning) event about `involved`, stored in `namespace`, from
/// `component` (on `host`, for node agents).
pub fn event(
    component: &str,
    host: Option<&str>,
    involved: ObjectReference,
    namespace: &str,
    type_: &str,
    reason: &str,
    message: String,
) -> Event {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let name = involved.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        involved_object: involved,
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some(type_.into()),
        source: Some(EventSource {
            component: Some(component.into()),
            host: host.map(str::to_string),
        }),
        reporting_component: Some(component.into()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Default::default()
    }
}

/// Writes `e` into its namespace; false (logged at debug) when the API refuses.
pub async fn record(client: &kube::Client, e: &Event) -> bool {
    let ns = e.metadata.namespace.as_deref().unwrap_or("default");
    let url = <Event as kube::Resource>::url_path(&(), Some(ns));
    let sent = async {
        let body = serde_json::to_vec(e).map_err(kube::Error::SerdeError)?;
        let req = kube::core::Request::new(url)
            .create(&PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)?;
        post_unread(client, req).await
    };
    match sent.await {
        Ok(()) => true,
        Err(err) => {
            tracing::debug!(reason = ?e.reason, %err, "event not recorded");
            false
        }
    }
}

/// Sends a write and checks its status without decoding the object the API server echoes
/// back (the scheduler sends two per pod and never reads the answer).
pub async fn post_unread(
    client: &kube::Client,
    req: hyper::Request<Vec<u8>>,
) -> Result<(), kube::Error> {
    client.request_text(req).await.map(|_| ())
}
