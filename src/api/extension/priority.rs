//! Koordinator priority classes: koord-prod 9000–9999, koord-mid 7000–7999,
//! koord-batch 5000–5999, koord-free 3000–3999.

use k8s_openapi::api::core::v1::Pod;

use super::QoSClass;
use super::keys::LABEL_POD_PRIORITY_CLASS;
use super::resources::{BATCH_CPU, BATCH_MEMORY, CPU, MEMORY, MID_CPU, MID_MEMORY};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum PriorityClass {
    Prod,
    Mid,
    Batch,
    Free,
    #[default]
    None,
}

impl PriorityClass {
    pub const ALL: [PriorityClass; 4] = [Self::Prod, Self::Mid, Self::Batch, Self::Free];

    /// The name used in labels, NodeMetric `priority` fields and PriorityClass objects.
    pub fn name(self) -> &'static str {
        match self {
            Self::Prod => "koord-prod",
            Self::Mid => "koord-mid",
            Self::Batch => "koord-batch",
            Self::Free => "koord-free",
            Self::None => "",
        }
    }

    /// Parses a class name; anything unknown is `None`, as upstream does.
    pub fn from_name(name: &str) -> Self {
        match name {
            "koord-prod" => Self::Prod,
            "koord-mid" => Self::Mid,
            "koord-batch" => Self::Batch,
            "koord-free" => Self::Free,
            _ => Self::None,
        }
    }

    /// Inclusive priority value range of the class.
    pub fn range(self) -> Option<(i32, i32)> {
        match self {
            Self::Prod => Some((9000, 9999)),
            Self::Mid => Some((7000, 7999)),
            Self::Batch => Some((5000, 5999)),
            Self::Free => Some((3000, 3999)),
            Self::None => None,
        }
    }

    /// The `value` of the PriorityClass object Koordinator installs for the class (the low
    /// end of its band).
    pub fn object_value(self) -> i32 {
        self.range().map_or(0, |(lo, _)| lo)
    }

    /// The value given when only the class is known.
    pub fn default_value(self) -> i32 {
        match self {
            Self::Prod => 9500,
            Self::Mid => 7500,
            Self::Batch => 5500,
            Self::Free => 3500,
            Self::None => 0,
        }
    }

    /// Class of a raw priority value.
    pub fn from_value(v: i32) -> Self {
        Self::ALL
            .into_iter()
            .find(|c| c.range().is_some_and(|(lo, hi)| (lo..=hi).contains(&v)))
            .unwrap_or(Self::None)
    }

    /// Class implied by a QoS class when a pod states no priority.
    pub fn from_qos(qos: QoSClass) -> Self {
        match qos {
            QoSClass::System | QoSClass::Lse | QoSClass::Lsr | QoSClass::Ls => Self::Prod,
            QoSClass::Be => Self::Batch,
            QoSClass::None => Self::None,
        }
    }
}

/// The raw class of a pod: label `koordinator.sh/priority-class`, else `spec.priority`.
pub fn pod_priority_class(pod: &Pod) -> PriorityClass {
    let label = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_POD_PRIORITY_CLASS));
    if let Some(name) = label {
        return PriorityClass::from_name(name);
    }
    pod.spec
        .as_ref()
        .and_then(|s| s.priority)
        .map(PriorityClass::from_value)
        .unwrap_or(PriorityClass::None)
}

/// The class Koordinator's runtime hooks and their reconcilers act on (`GetQoSClassByAttrs`):
/// the `koordinator.sh/qosClass` label; without one, a pod in the koord-batch or koord-free
/// priority band (`koordinator.sh/priority-class`, else `spec.priority`) counts as BE. Any
/// other pod has no class here: an ordinary pod is never given BE's batch values, whatever
/// its Kubernetes QoS.
pub fn pod_hook_qos_class(pod: &Pod) -> QoSClass {
    match super::qos::pod_qos_class(pod) {
        QoSClass::None => match pod_priority_class(pod) {
            PriorityClass::Batch | PriorityClass::Free => QoSClass::Be,
            _ => QoSClass::None,
        },
        c => c,
    }
}

/// The class with Koordinator's default: when the pod states none, it follows its QoS.
pub fn pod_priority_class_with_default(pod: &Pod) -> PriorityClass {
    match pod_priority_class(pod) {
        PriorityClass::None => PriorityClass::from_qos(super::qos::pod_qos_class_with_default(pod)),
        c => c,
    }
}

/// The resource a pod of `class` consumes in place of `cpu`/`memory`: batch pods use
/// `kubernetes.io/batch-*`, mid pods `kubernetes.io/mid-*`, everything else the name itself.
pub fn translate(name: &str, class: PriorityClass) -> &str {
    match (class, name) {
        (PriorityClass::Batch, CPU) => BATCH_CPU,
        (PriorityClass::Batch, MEMORY) => BATCH_MEMORY,
        (PriorityClass::Mid, CPU) => MID_CPU,
        (PriorityClass::Mid, MEMORY) => MID_MEMORY,
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn hooks_classify_by_label_then_priority_band() {
        let plain = pod(serde_json::json!({"spec": {"containers": [{"name": "a",
            "resources": {"requests": {"cpu": "900m"}, "limits": {"cpu": "1"}}}]}}));
        assert_eq!(pod_hook_qos_class(&plain), QoSClass::None);
        let besteffort = pod(serde_json::json!({"spec": {"containers": [{"name": "a"}]}}));
        assert_eq!(
            pod_hook_qos_class(&besteffort),
            QoSClass::None,
            "Kubernetes BestEffort without a label is not Koordinator's BE"
        );
        let labelled = pod(
            serde_json::json!({"metadata": {"labels": {"koordinator.sh/qosClass": "LS"}},
            "spec": {"priority": 5500, "containers": [{"name": "a"}]}}),
        );
        assert_eq!(
            pod_hook_qos_class(&labelled),
            QoSClass::Ls,
            "the label wins"
        );
        let batch =
            pod(serde_json::json!({"spec": {"priority": 5500, "containers": [{"name": "a"}]}}));
        assert_eq!(pod_hook_qos_class(&batch), QoSClass::Be);
        let free = pod(
            serde_json::json!({"metadata": {"labels": {"koordinator.sh/priority-class": "koord-free"}}}),
        );
        assert_eq!(pod_hook_qos_class(&free), QoSClass::Be);
        let prod =
            pod(serde_json::json!({"spec": {"priority": 9500, "containers": [{"name": "a"}]}}));
        assert_eq!(pod_hook_qos_class(&prod), QoSClass::None);
    }

    #[test]
    fn value_ranges() {
        for (v, c) in [
            (9000, PriorityClass::Prod),
            (9999, PriorityClass::Prod),
            (8999, PriorityClass::None),
            (7500, PriorityClass::Mid),
            (5000, PriorityClass::Batch),
            (5999, PriorityClass::Batch),
            (3000, PriorityClass::Free),
            (0, PriorityClass::None),
            (10000, PriorityClass::None),
        ] {
            assert_eq!(PriorityClass::from_value(v), c, "value {v}");
        }
        for c in PriorityClass::ALL {
            assert_eq!(PriorityClass::from_name(c.name()), c);
            assert_eq!(PriorityClass::from_value(c.default_value()), c);
        }
    }

    #[test]
    fn translation_by_class() {
        assert_eq!(translate(CPU, PriorityClass::Batch), BATCH_CPU);
        assert_eq!(translate(MEMORY, PriorityClass::Mid), MID_MEMORY);
        assert_eq!(translate(CPU, PriorityClass::Prod), CPU);
        assert_eq!(translate(CPU, PriorityClass::None), CPU);
        assert_eq!(translate(CPU, PriorityClass::Free), CPU);
    }
}
