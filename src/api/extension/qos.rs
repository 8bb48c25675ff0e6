//! Koordinator QoS classes and the Kubernetes QoS they default from.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::keys::LABEL_POD_QOS;
use super::resources::{CPU, MEMORY};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum QoSClass {
    Lse,
    Lsr,
    Ls,
    Be,
    System,
    #[default]
    None,
}

impl QoSClass {
    pub fn name(self) -> &'static str {
        match self {
            Self::Lse => "LSE",
            Self::Lsr => "LSR",
            Self::Ls => "LS",
            Self::Be => "BE",
            Self::System => "SYSTEM",
            Self::None => "",
        }
    }

    /// Parses the label value; anything else is `None`.
    pub fn from_name(name: &str) -> Self {
        match name {
            "LSE" => Self::Lse,
            "LSR" => Self::Lsr,
            "LS" => Self::Ls,
            "BE" => Self::Be,
            "SYSTEM" => Self::System,
            _ => Self::None,
        }
    }
}

/// Kubernetes QoS class (`Guaranteed`, `Burstable`, `BestEffort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KubeQoS {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl KubeQoS {
    pub fn name(self) -> &'static str {
        match self {
            Self::Guaranteed => "Guaranteed",
            Self::Burstable => "Burstable",
            Self::BestEffort => "BestEffort",
        }
    }
}

/// The raw class from the `koordinator.sh/qosClass` label.
pub fn pod_qos_class(pod: &Pod) -> QoSClass {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_POD_QOS))
        .map(|v| QoSClass::from_name(v))
        .unwrap_or(QoSClass::None)
}

/// The Kubernetes QoS of a pod from its cgroup parent, as Koordinator's
/// `GetKubeQoSByCgroupParent`: a path naming `besteffort` or `burstable` is that class,
/// any other (the kubepods root, or none) Guaranteed.
pub fn kube_qos_of_cgroup_parent(parent: &str) -> KubeQoS {
    if parent.contains("besteffort") {
        KubeQoS::BestEffort
    } else if parent.contains("burstable") {
        KubeQoS::Burstable
    } else {
        KubeQoS::Guaranteed
    }
}

/// The label class, else the default from the Kubernetes QoS class:
/// Guaranteed → LSR, Burstable → LS, BestEffort → BE.
pub fn pod_qos_class_with_default(pod: &Pod) -> QoSClass {
    qos_class_with_default(pod_qos_class(pod), || kube_qos(pod))
}

/// `pod_qos_class_with_default` of a label class and the pod's Kubernetes class.
pub fn qos_class_with_default(label: QoSClass, kube: impl FnOnce() -> KubeQoS) -> QoSClass {
    match label {
        QoSClass::None => match kube() {
            KubeQoS::Guaranteed => QoSClass::Lsr,
            KubeQoS::Burstable => QoSClass::Ls,
            KubeQoS::BestEffort => QoSClass::Be,
        },
        c => c,
    }
}

/// `status.qosClass` when the kubelet reported one, else computed like the kubelet:
/// only cpu and memory count; requests default to limits.
pub fn kube_qos(pod: &Pod) -> KubeQoS {
    let reported = pod.status.as_ref().and_then(|s| s.qos_class.as_deref());
    match reported {
        Some("Guaranteed") => return KubeQoS::Guaranteed,
        Some("Burstable") => return KubeQoS::Burstable,
        Some("BestEffort") => return KubeQoS::BestEffort,
        _ => {}
    }
    let Some(spec) = pod.spec.as_ref() else {
        return KubeQoS::BestEffort;
    };
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    compute_kube_qos(all)
}

fn compute_kube_qos<'a>(containers: impl Iterator<Item = &'a Container>) -> KubeQoS {
    let mut any_set = false;
    let mut guaranteed = true;
    for c in containers {
        let res = c.resources.as_ref();
        let req = res.and_then(|r| r.requests.as_ref());
        let lim = res.and_then(|r| r.limits.as_ref());
        for name in [CPU, MEMORY] {
            let l = lim
                .and_then(|m| m.get(name))
                .map(crate::api::quantity::q_milli);
            let r = req
                .and_then(|m| m.get(name))
                .map(crate::api::quantity::q_milli);
            if l.is_some_and(|v| v != 0) || r.is_some_and(|v| v != 0) {
                any_set = true;
            }
            match (l, r.or(l)) {
                (Some(l), Some(r)) if l != 0 && l == r => {}
                _ => guaranteed = false,
            }
        }
    }
    match (any_set, guaranteed) {
        (false, _) => KubeQoS::BestEffort,
        (true, true) => KubeQoS::Guaranteed,
        (true, false) => KubeQoS::Burstable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn kube_qos_table() {
        let be = pod(serde_json::json!({"spec": {"containers": [{"name": "a"}]}}));
        assert_eq!(kube_qos(&be), KubeQoS::BestEffort);
        let batch_only = pod(serde_json::json!({"spec": {"containers": [{"name": "a",
            "resources": {"requests": {"kubernetes.io/batch-cpu": "1000"}}}]}}));
        assert_eq!(kube_qos(&batch_only), KubeQoS::BestEffort);
        let g = pod(serde_json::json!({"spec": {"containers": [{"name": "a",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}));
        assert_eq!(kube_qos(&g), KubeQoS::Guaranteed);
        let b = pod(serde_json::json!({"spec": {"containers": [{"name": "a",
            "resources": {"requests": {"cpu": "1"}}}]}}));
        assert_eq!(kube_qos(&b), KubeQoS::Burstable);
        let reported = pod(serde_json::json!({"spec": {"containers": [{"name": "a"}]},
            "status": {"qosClass": "Guaranteed"}}));
        assert_eq!(kube_qos(&reported), KubeQoS::Guaranteed);
    }

    #[test]
    fn kube_qos_from_the_cgroup_parent() {
        let of = kube_qos_of_cgroup_parent;
        assert_eq!(of("/kubepods/besteffort/pod1"), KubeQoS::BestEffort);
        assert_eq!(of("kubepods-burstable-pod1.slice"), KubeQoS::Burstable);
        assert_eq!(of("/kubepods/pod1"), KubeQoS::Guaranteed);
        assert_eq!(of(""), KubeQoS::Guaranteed);
    }

    #[test]
    fn defaults_and_priority() {
        use crate::api::extension::PriorityClass;
        use crate::api::extension::priority::{
            pod_priority_class, pod_priority_class_with_default,
        };
        let labelled = pod(
            serde_json::json!({"metadata": {"labels": {"koordinator.sh/qosClass": "BE"}},
            "spec": {"containers": [{"name": "a"}]}}),
        );
        assert_eq!(pod_qos_class(&labelled), QoSClass::Be);
        assert_eq!(pod_priority_class(&labelled), PriorityClass::None);
        assert_eq!(
            pod_priority_class_with_default(&labelled),
            PriorityClass::Batch
        );
        let plain = pod(serde_json::json!({"spec": {"containers": [{"name": "a"}]}}));
        assert_eq!(pod_qos_class_with_default(&plain), QoSClass::Be);
        let prio =
            pod(serde_json::json!({"spec": {"priority": 7100, "containers": [{"name": "a"}]}}));
        assert_eq!(pod_priority_class(&prio), PriorityClass::Mid);
        let class_label = pod(
            serde_json::json!({"metadata": {"labels": {"koordinator.sh/priority-class": "koord-free"}},
            "spec": {"priority": 9500, "containers": [{"name": "a"}]}}),
        );
        assert_eq!(pod_priority_class(&class_label), PriorityClass::Free);
    }
}
