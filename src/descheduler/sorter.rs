//! The order in which the descheduler gives up pods (`pkg/descheduler/utils/sorter`):
//! ascending, the first decisive comparison wins — koord priority class, `spec.priority`,
//! kube QoS, koord QoS, pod-deletion-cost, eviction-cost, an extra comparison (LowNodeLoad's
//! usage score, higher first), then the newer pod first.

use std::cmp::Ordering;

use crate::api::extension::keys::{ANNOTATION_EVICTION_COST, ANNOTATION_POD_DELETION_COST};
use crate::api::extension::priority::PriorityClass;
use crate::api::extension::qos::{KubeQoS, QoSClass};
use crate::descheduler::framework::podview::PodView;

fn class_rank(c: PriorityClass) -> u8 {
    match c {
        PriorityClass::Free => 0,
        PriorityClass::Batch => 1,
        PriorityClass::Mid => 2,
        PriorityClass::Prod => 3,
        PriorityClass::None => 4,
    }
}

fn kube_rank(q: KubeQoS) -> u8 {
    match q {
        KubeQoS::BestEffort => 0,
        KubeQoS::Burstable => 1,
        KubeQoS::Guaranteed => 2,
    }
}

fn qos_rank(q: QoSClass) -> u8 {
    match q {
        QoSClass::Be => 0,
        QoSClass::Ls => 1,
        QoSClass::Lsr => 2,
        QoSClass::Lse | QoSClass::System => 3,
        QoSClass::None => 4,
    }
}

fn cost(pod: &PodView, key: &str) -> i64 {
    pod.annotation(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn created(pod: &PodView) -> i64 {
    pod.created_ms.unwrap_or(0)
}

/// `a` before `b` when `a` should be evicted first. `extra` is LowNodeLoad's score of each
/// pod (higher goes first), when it has one.
pub fn compare(a: &PodView, b: &PodView, extra: Option<(f64, f64)>) -> Ordering {
    class_rank(a.priority_class)
        .cmp(&class_rank(b.priority_class))
        .then_with(|| a.priority.unwrap_or(0).cmp(&b.priority.unwrap_or(0)))
        .then_with(|| kube_rank(a.kube_qos).cmp(&kube_rank(b.kube_qos)))
        .then_with(|| qos_rank(a.qos).cmp(&qos_rank(b.qos)))
        .then_with(|| {
            cost(a, ANNOTATION_POD_DELETION_COST).cmp(&cost(b, ANNOTATION_POD_DELETION_COST))
        })
        .then_with(|| cost(a, ANNOTATION_EVICTION_COST).cmp(&cost(b, ANNOTATION_EVICTION_COST)))
        .then_with(|| match extra {
            Some((x, y)) => y.partial_cmp(&x).unwrap_or(Ordering::Equal),
            None => Ordering::Equal,
        })
        .then_with(|| created(b).cmp(&created(a)))
}

/// LowNodeLoad's usage score of a pod against a node's excess over its threshold:
/// r = usage / excess; r below 1 scores r, above it 1/r + 1 (a pod that just covers the
/// excess beats a much bigger one).
pub fn usage_score(usage: f64, excess: f64) -> f64 {
    if excess <= 0.0 {
        return 0.0;
    }
    let r = usage / excess;
    if r < 1.0 { r } else { 1.0 / r + 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, v: serde_json::Value) -> PodView {
        let mut p = json!({"metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        json_patch::merge(&mut p, &v);
        PodView::from(&serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(p).unwrap())
    }

    #[test]
    fn eviction_order() {
        let mut pods = [
            pod("prod", json!({"spec": {"priority": 9500}})),
            pod("batch", json!({"spec": {"priority": 5500}})),
            pod("batch-low", json!({"spec": {"priority": 5100}})),
            pod("free", json!({"spec": {"priority": 3100}})),
            pod("plain", json!({})),
            pod(
                "batch-costly",
                json!({"spec": {"priority": 5100}, "metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "10"}}}),
            ),
            pod(
                "batch-low-new",
                json!({"spec": {"priority": 5100}, "metadata": {"creationTimestamp": "2026-02-01T00:00:00Z"}}),
            ),
        ];
        pods.sort_by(|a, b| compare(a, b, None));
        let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "free",
                "batch-low-new",
                "batch-low",
                "batch-costly",
                "batch",
                "prod",
                "plain"
            ]
        );
    }

    #[test]
    fn usage_scores_prefer_a_pod_that_covers_the_excess() {
        assert_eq!(usage_score(1.0, 2.0), 0.5);
        assert_eq!(usage_score(2.0, 2.0), 2.0);
        assert!(usage_score(2.0, 2.0) > usage_score(8.0, 2.0));
        assert!(usage_score(8.0, 2.0) > usage_score(1.0, 2.0));
    }
}
