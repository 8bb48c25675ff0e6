//! The pod a hook decides for, read from the hook request itself, as Koordinator's hooks
//! do: the pod's meta, labels and annotations travel in the request, and the manager's
//! webhook writes each container's batch requests and limits into
//! `node.koordinator.sh/extended-resource-spec` for exactly this. The informer's copy of
//! the pod, when it has one, fills in only what the request lacks (spec fields such as the
//! priority, other containers), so a brand-new pod the informer has not seen yet gets its
//! values at its container's first instruction.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use crate::api::extension::keys::ANNOTATION_EXTENDED_RESOURCE_SPEC;
use crate::api::extension::qos::kube_qos_of_cgroup_parent;
use crate::kernel::hookproto::{
    ContainerResourceHookRequest, PodSandboxHookRequest, PodSandboxMetadata,
};

/// `extended-resource-spec`: container name → batch requests and limits.
#[derive(Debug, Default, Deserialize)]
struct ExtendedSpec {
    #[serde(default)]
    containers: BTreeMap<String, ContainerSpec>,
}

#[derive(Debug, Default, Deserialize)]
struct ContainerSpec {
    #[serde(default)]
    requests: BTreeMap<String, Quantity>,
    #[serde(default)]
    limits: BTreeMap<String, Quantity>,
}

/// The request's entries over the informer's (the request wins a key both have).
fn overlay(known: &mut Option<BTreeMap<String, String>>, from: &HashMap<String, String>) {
    if !from.is_empty() {
        let m = known.get_or_insert_with(BTreeMap::new);
        m.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// The pod with the request's meta, labels and annotations over the informer's copy (a
/// runtime's sandbox labels are the pod's plus its own; a key only the informer has stays).
/// Its Kubernetes QoS is where the kubelet put it (the request's cgroup parent), as
/// Koordinator's hooks read it; a pod neither the request's parent nor the informer
/// places is Guaranteed (Koordinator's `GetKubeQoSByCgroupParent("")`), never BestEffort
/// for want of a spec.
fn with_meta(
    meta: &PodSandboxMetadata,
    labels: &HashMap<String, String>,
    annotations: &HashMap<String, String>,
    cgroup_parent: &str,
    known: Option<&Pod>,
) -> Pod {
    let mut pod = known.cloned().unwrap_or_default();
    if !cgroup_parent.is_empty() || known.is_none() {
        let kube = kube_qos_of_cgroup_parent(cgroup_parent);
        pod.status.get_or_insert_with(Default::default).qos_class = Some(kube.name().to_string());
    }
    let m = &mut pod.metadata;
    let set = |slot: &mut Option<String>, v: &str| {
        if !v.is_empty() {
            *slot = Some(v.to_string());
        }
    };
    set(&mut m.name, &meta.name);
    set(&mut m.namespace, &meta.namespace);
    set(&mut m.uid, &meta.uid);
    overlay(&mut m.labels, labels);
    overlay(&mut m.annotations, annotations);
    pod
}

/// The pod a sandbox hook (GroupIdentity) decides for.
pub fn sandbox_pod(req: &PodSandboxHookRequest, known: Option<&Pod>) -> Option<Pod> {
    let meta = req.pod_meta.as_ref()?;
    Some(with_meta(
        meta,
        &req.labels,
        &req.annotations,
        &req.cgroup_parent,
        known,
    ))
}

/// The pod a container hook decides for, with the container's batch resources from
/// `extended-resource-spec` (an annotation that does not parse is ignored, as Koordinator
/// does, leaving the informer's spec).
pub fn container_pod(req: &ContainerResourceHookRequest, known: Option<&Pod>) -> Option<Pod> {
    let meta = req.pod_meta.as_ref()?;
    let name = req.container_meta.as_ref()?.name.as_str();
    let parent = &req.pod_cgroup_parent;
    let mut pod = with_meta(meta, &req.pod_labels, &req.pod_annotations, parent, known);
    let spec: Option<ContainerSpec> = req
        .pod_annotations
        .get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
        .and_then(|raw| serde_json::from_str::<ExtendedSpec>(raw).ok())
        .and_then(|mut s| s.containers.remove(name));
    let containers = &mut pod.spec.get_or_insert_with(PodSpec::default).containers;
    let at = match containers.iter().position(|c| c.name == name) {
        Some(i) => i,
        None => {
            containers.push(Container {
                name: name.to_string(),
                ..Default::default()
            });
            containers.len() - 1
        }
    };
    if let Some(s) = spec {
        let r = containers[at]
            .resources
            .get_or_insert_with(ResourceRequirements::default);
        r.requests
            .get_or_insert_with(BTreeMap::new)
            .extend(s.requests);
        r.limits.get_or_insert_with(BTreeMap::new).extend(s.limits);
    }
    Some(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extension::priority::pod_hook_qos_class;
    use crate::api::extension::qos::{KubeQoS, QoSClass, kube_qos};
    use crate::kernel::hookproto::ContainerMetadata;

    fn request(annotations: &[(&str, &str)]) -> ContainerResourceHookRequest {
        ContainerResourceHookRequest {
            pod_meta: Some(PodSandboxMetadata {
                name: "be".into(),
                namespace: "default".into(),
                uid: "u1".into(),
                attempt: 0,
            }),
            container_meta: Some(ContainerMetadata {
                name: "main".into(),
                ..Default::default()
            }),
            pod_labels: HashMap::from([("koordinator.sh/qosClass".into(), "BE".into())]),
            pod_annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_the_informer_has_not_seen_is_read_from_the_request() {
        let spec = r#"{"containers":{"main":{"requests":{"kubernetes.io/batch-cpu":"500","kubernetes.io/batch-memory":"1Gi"},"limits":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"2Gi"}}}}"#;
        let pod =
            container_pod(&request(&[(ANNOTATION_EXTENDED_RESOURCE_SPEC, spec)]), None).unwrap();
        assert_eq!(pod.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(pod_hook_qos_class(&pod), QoSClass::Be);
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let r = c.resources.as_ref().unwrap();
        assert_eq!(c.name, "main");
        assert_eq!(
            r.limits.as_ref().unwrap()["kubernetes.io/batch-cpu"],
            Quantity("1k".into())
        );
        assert_eq!(
            r.requests.as_ref().unwrap()["kubernetes.io/batch-memory"],
            Quantity("1Gi".into())
        );
    }

    #[test]
    fn an_unknown_pod_takes_its_kube_qos_from_the_cgroup_parent() {
        let mut req = request(&[]);
        req.pod_labels.clear();
        req.pod_cgroup_parent = "/kubepods/burstable/podu1".into();
        let pod = container_pod(&req, None).unwrap();
        assert_eq!(kube_qos(&pod), KubeQoS::Burstable);
        assert_eq!(pod_hook_qos_class(&pod), QoSClass::None);
        req.pod_cgroup_parent.clear();
        let pod = container_pod(&req, None).unwrap();
        assert_eq!(
            kube_qos(&pod),
            KubeQoS::Guaranteed,
            "no spec and no parent is not BestEffort"
        );
        req.pod_cgroup_parent = "/kubepods/besteffort/podu1".into();
        assert_eq!(
            kube_qos(&container_pod(&req, None).unwrap()),
            KubeQoS::BestEffort
        );
    }

    #[test]
    fn the_request_wins_and_the_informer_fills_in_the_rest() {
        let mut known = Pod::default();
        known.metadata.labels = Some(BTreeMap::from([("stale".into(), "yes".into())]));
        known.spec = Some(PodSpec {
            priority: Some(5000),
            containers: vec![Container {
                name: "main".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let pod = container_pod(&request(&[("a", "b")]), Some(&known)).unwrap();
        assert_eq!(pod.spec.as_ref().unwrap().priority, Some(5000));
        assert_eq!(pod.spec.as_ref().unwrap().containers.len(), 1);
        let labels = pod.metadata.labels.unwrap();
        assert!(labels.contains_key("koordinator.sh/qosClass") && labels.contains_key("stale"));
        // A malformed annotation leaves the container as the informer had it.
        let bad = request(&[(ANNOTATION_EXTENDED_RESOURCE_SPEC, "{")]);
        let pod = container_pod(&bad, Some(&known)).unwrap();
        assert!(pod.spec.unwrap().containers[0].resources.is_none());
    }
}
