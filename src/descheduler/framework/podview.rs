//! The part of a pod the descheduler reads. A pass holds every pod of the cluster; a full
//! `Pod` costs ~5 KiB before its strings (PodSpec and each Container are ~2 KiB of
//! mostly-empty fields), so 10,000 of them alone broke the 64 MiB budget. The view keeps
//! the fields the filters, sort orders and plugins use, computed once when listed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerStatus, NodeSelector, Pod, PodAffinityTerm, PreferredSchedulingTerm, Toleration,
    TopologySpreadConstraint,
};

use crate::api::extension::keys::{
    ANNOTATION_EVICTION_COST, ANNOTATION_POD_DELETION_COST, ANNOTATION_RESERVATION_ALLOCATED,
};
use crate::api::extension::priority::{
    PriorityClass, pod_priority_class, pod_priority_class_with_default,
};
use crate::api::extension::qos::{KubeQoS, QoSClass, kube_qos, pod_qos_class};
use crate::api::placement::placement_matches;
use crate::api::pod::{Amounts, pod_requests};

/// The annotation asking the descheduler to take a pod last.
pub const PREFER_NO_EVICTION: &str = "descheduler.alpha.kubernetes.io/prefer-no-eviction";

/// Annotations some descheduler code reads; the view keeps only these.
pub const KEPT_ANNOTATIONS: &[&str] = &[
    "descheduler.alpha.kubernetes.io/evict",
    PREFER_NO_EVICTION,
    "kubernetes.io/config.mirror",
    "kubernetes.io/config.source",
    ANNOTATION_EVICTION_COST,
    ANNOTATION_POD_DELETION_COST,
    ANNOTATION_RESERVATION_ALLOCATED,
];

#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub controller: bool,
}

/// A container's status as RemoveFailedPods, PodLifeTime and the restart check read it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerState {
    pub init: bool,
    pub waiting: Option<String>,
    pub terminated: Option<String>,
    /// The exit code of a terminated container.
    pub exit_code: Option<i32>,
    pub restarts: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    /// Labels in key order (a map per pod cost ~550 bytes even for one label).
    pub labels: Box<[(String, String)]>,
    pub annotations: BTreeMap<String, String>,
    pub owners: Vec<Owner>,
    pub node_name: Option<String>,
    pub scheduler_name: Option<String>,
    pub priority: Option<i32>,
    pub priority_class: PriorityClass,
    /// Koordinator's prod class with its QoS default (`GetPodPriorityClassWithDefault`).
    pub prod: bool,
    pub kube_qos: KubeQoS,
    pub qos: QoSClass,
    pub phase: Option<String>,
    /// `status.reason`.
    pub reason: Option<String>,
    pub ready: bool,
    pub deleting: bool,
    pub created_ms: Option<i64>,
    requests: Box<[(String, i64)]>,
    /// An emptyDir or hostPath volume.
    pub local_storage: bool,
    pub pvc: bool,
    pub tolerations: Box<[Toleration]>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub required_affinity: Option<NodeSelector>,
    /// `spec.affinity.nodeAffinity` is set (required or preferred).
    pub node_affinity: bool,
    /// Preferred node affinity terms.
    pub preferred_affinity: Box<[PreferredSchedulingTerm]>,
    pub containers: Box<[ContainerState]>,
    /// Ephemeral containers' states (PodLifeTime's `includingEphemeralContainers`).
    pub ephemeral: Box<[ContainerState]>,
    /// Packed: read them with [`PodView::conditions`].
    conditions: Box<str>,
    /// The regular containers' images (RemoveDuplicates).
    pub images: Box<[String]>,
    /// Required pod anti-affinity terms.
    pub anti_affinity: Box<[PodAffinityTerm]>,
    pub spread: Box<[TopologySpreadConstraint]>,
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn state_of(init: bool, c: &ContainerStatus) -> ContainerState {
    let s = c.state.as_ref();
    ContainerState {
        init,
        waiting: s.and_then(|s| s.waiting.as_ref()?.reason.clone()),
        terminated: s.and_then(|s| s.terminated.as_ref()?.reason.clone()),
        exit_code: s.and_then(|s| Some(s.terminated.as_ref()?.exit_code)),
        restarts: c.restart_count,
    }
}

fn containers(p: &Pod) -> Box<[ContainerState]> {
    let Some(st) = p.status.as_ref() else {
        return Box::default();
    };
    let regular = st.container_statuses.iter().flatten().map(|c| (false, c));
    let init = st
        .init_container_statuses
        .iter()
        .flatten()
        .map(|c| (true, c));
    regular
        .chain(init)
        .map(|(init, c)| state_of(init, c))
        .collect()
}

/// A pod's conditions packed in one string (type, status, reason and lastTransitionTime in
/// Unix seconds, fields split by U+001F, conditions by U+001E): a pass holds every pod's,
/// and four conditions as structs were ~350 bytes a pod.
fn conditions(p: &Pod) -> Box<str> {
    let c = p.status.as_ref().and_then(|s| s.conditions.as_deref());
    let mut out = String::new();
    for c in c.unwrap_or(&[]) {
        let t = c
            .last_transition_time
            .as_ref()
            .map(|t| t.0.as_second().to_string());
        let fields = [
            c.type_.as_str(),
            c.status.as_str(),
            c.reason.as_deref().unwrap_or(""),
            t.as_deref().unwrap_or(""),
        ];
        if !out.is_empty() {
            out.push('\u{1e}');
        }
        out.push_str(&fields.join("\u{1f}"));
    }
    out.into()
}

/// One pod condition as [`PodView::conditions`] gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodCond<'a> {
    pub type_: &'a str,
    pub status: &'a str,
    /// Empty when the condition has none.
    pub reason: &'a str,
    /// `lastTransitionTime` in Unix seconds.
    pub transition_s: Option<i64>,
}

impl From<&Pod> for PodView {
    fn from(p: &Pod) -> PodView {
        let m = &p.metadata;
        let spec = p.spec.as_ref();
        let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
        PodView {
            namespace: m.namespace.clone().unwrap_or_default(),
            name: m.name.clone().unwrap_or_default(),
            uid: m.uid.clone(),
            labels: m
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            annotations: m
                .annotations
                .iter()
                .flatten()
                .filter(|(k, _)| KEPT_ANNOTATIONS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            owners: m
                .owner_references
                .iter()
                .flatten()
                .map(|o| Owner {
                    kind: o.kind.clone(),
                    name: o.name.clone(),
                    uid: o.uid.clone(),
                    controller: o.controller == Some(true),
                })
                .collect(),
            node_name: spec.and_then(|s| s.node_name.clone()),
            scheduler_name: spec.and_then(|s| s.scheduler_name.clone()),
            priority: spec.and_then(|s| s.priority),
            priority_class: pod_priority_class(p),
            prod: pod_priority_class_with_default(p) == PriorityClass::Prod,
            kube_qos: kube_qos(p),
            qos: pod_qos_class(p),
            phase: p.status.as_ref().and_then(|s| s.phase.clone()),
            reason: p.status.as_ref().and_then(|s| s.reason.clone()),
            ready: ready(p),
            deleting: m.deletion_timestamp.is_some(),
            created_ms: m.creation_timestamp.as_ref().map(|t| t.0.as_millisecond()),
            requests: pod_requests(p).into_iter().collect(),
            local_storage: volumes
                .iter()
                .any(|v| v.empty_dir.is_some() || v.host_path.is_some()),
            pvc: volumes.iter().any(|v| v.persistent_volume_claim.is_some()),
            tolerations: spec
                .and_then(|s| s.tolerations.clone())
                .unwrap_or_default()
                .into(),
            node_selector: spec.and_then(|s| s.node_selector.clone()),
            required_affinity: spec
                .and_then(|s| s.affinity.as_ref()?.node_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .clone()
                }),
            node_affinity: spec
                .and_then(|s| s.affinity.as_ref()?.node_affinity.as_ref())
                .is_some(),
            preferred_affinity: spec
                .and_then(|s| s.affinity.as_ref()?.node_affinity.as_ref())
                .and_then(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .clone()
                })
                .unwrap_or_default()
                .into(),
            containers: containers(p),
            ephemeral: p
                .status
                .as_ref()
                .and_then(|s| s.ephemeral_container_statuses.as_ref())
                .map(|c| c.iter().map(|c| state_of(false, c)).collect())
                .unwrap_or_default(),
            conditions: conditions(p),
            images: spec
                .map(|s| {
                    s.containers
                        .iter()
                        .map(|c| c.image.clone().unwrap_or_default())
                        .collect()
                })
                .unwrap_or_default(),
            anti_affinity: spec
                .and_then(|s| s.affinity.as_ref()?.pod_anti_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .clone()
                })
                .unwrap_or_default()
                .into(),
            spread: spec
                .and_then(|s| s.topology_spread_constraints.clone())
                .unwrap_or_default()
                .into(),
        }
    }
}

impl PodView {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The UID of the pod's controller (ownerReference with `controller: true`).
    pub fn controller_uid(&self) -> Option<String> {
        self.owners
            .iter()
            .find(|o| o.controller)
            .map(|o| o.uid.clone())
    }

    /// Ready and not terminating.
    pub fn ready_alive(&self) -> bool {
        self.ready && !self.deleting
    }

    /// The labels as a map, for label selectors (built on demand: few passes use one).
    pub fn labels_map(&self) -> Option<BTreeMap<String, String>> {
        (!self.labels.is_empty()).then(|| self.labels.iter().cloned().collect())
    }

    /// The pod's effective requests.
    pub fn requests(&self) -> Amounts {
        self.requests.iter().cloned().collect()
    }

    /// The pod's conditions.
    pub fn conditions(&self) -> impl Iterator<Item = PodCond<'_>> {
        self.conditions
            .split('\u{1e}')
            .filter(|c| !c.is_empty())
            .map(|c| {
                let mut f = c.split('\u{1f}');
                let mut next = || f.next().unwrap_or("");
                let (type_, status, reason) = (next(), next(), next());
                PodCond {
                    type_,
                    status,
                    reason,
                    transition_s: next().parse().ok(),
                }
            })
    }

    /// Some container declares a request for `r`.
    pub fn declares_request(&self, r: &str) -> bool {
        self.requests.iter().any(|(k, _)| k == r)
    }

    pub fn annotation(&self, k: &str) -> Option<&str> {
        self.annotations.get(k).map(String::as_str)
    }

    /// A view of a pod written as JSON (tests and fixtures).
    #[cfg(test)]
    pub fn json(v: serde_json::Value) -> PodView {
        PodView::from(&serde_json::from_value::<Pod>(v).expect("a Pod"))
    }

    /// Its nodeSelector and required node affinity hold on a node with these labels.
    pub fn fits_node(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        placement_matches(
            self.node_selector.as_ref(),
            self.required_affinity.as_ref(),
            labels,
            node_name,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_view_keeps_what_the_descheduler_reads() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "d", "uid": "u1",
                "labels": {"app": "web"},
                "annotations": {"controller.kubernetes.io/pod-deletion-cost": "5",
                    "kubectl.kubernetes.io/last-applied-configuration": "{…}"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs1", "controller": true}]},
            "spec": {"nodeName": "n1", "priority": 5500, "nodeSelector": {"zone": "a"},
                "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
        }))
        .unwrap();
        let v = PodView::from(&p);
        assert_eq!(v.key(), "d/a");
        assert_eq!(v.controller_uid().as_deref(), Some("rs1"));
        assert_eq!(
            v.annotations.len(),
            1,
            "only annotations the descheduler reads"
        );
        assert_eq!(v.priority_class, PriorityClass::Batch);
        assert_eq!(v.requests().get("cpu"), Some(&1000));
        assert!(v.local_storage && !v.pvc && v.ready_alive());
        assert_eq!(v.containers[0].restarts, 3);
        assert_eq!(v.containers[0].waiting.as_deref(), Some("CrashLoopBackOff"));
        let zone_a = BTreeMap::from([("zone".to_string(), "a".to_string())]);
        assert!(v.fits_node(&zone_a, "n1"));
        assert!(!v.fits_node(&BTreeMap::new(), "n2"));
    }
}
