//! Kubernetes Events (core/v1) as every role writes them: one builder, one writer.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
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
    match Api::<Event>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), e)
        .await
    {
        Ok(_) => true,
        Err(err) => {
            tracing::debug!(reason = ?e.reason, %err, "event not recorded");
            false
        }
    }
}
