//! Which gang a pod belongs to, from Koordinator's and the scheduler-plugins' labels and
//! annotations.

use k8s_openapi::api::core::v1::Pod;

pub const ANN_PREFIX: &str = "gang.scheduling.koordinator.sh/";
pub const LABEL_POD_GROUP: &str = "pod-group.scheduling.sigs.k8s.io";
const LABEL_POD_GROUP_NAME: &str = "pod-group.scheduling.sigs.k8s.io/name";

pub fn ann<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

pub fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The gang id (`namespace/name`) a pod belongs to: PodGroup label, the deprecated name
/// label, then the annotation.
pub fn gang_of(pod: &Pod) -> Option<String> {
    let name = label(pod, LABEL_POD_GROUP)
        .or_else(|| label(pod, LABEL_POD_GROUP_NAME))
        .or_else(|| ann(pod, &format!("{ANN_PREFIX}name")))
        .filter(|n| !n.is_empty())?;
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    Some(format!("{ns}/{name}"))
}
