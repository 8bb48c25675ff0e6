//! A Reservation as the scheduler sees it (`pkg/util/reservation`): its phase and node,
//! what it reserves, who may use it, and the synthetic "reserve pod" it is scheduled as.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements, Taint, Toleration};
use serde::Deserialize;

use crate::api::extension::keys::{
    ANNOTATION_RESERVATION_AFFINITY, ANNOTATION_RESERVE_POD, LABEL_RESERVATION_IGNORED,
};
use crate::api::placement::{term_matches, tolerates};
use crate::api::pod::{Amounts, amounts, pod_requests};
use crate::api::scheduling::reservation::{Reservation, ReservationOwner};
use crate::api::selector::Selector;

/// `scheduling.koordinator.sh/reservation-allocated` naming a reservation.
pub fn allocated_value(name: &str, uid: &str) -> String {
    serde_json::json!({"name": name, "uid": uid}).to_string()
}

pub const ANNOTATION_RESERVATION_NAME: &str = "scheduling.koordinator.sh/reservation-name";
pub const ANNOTATION_RESERVATION_NODE: &str = "scheduling.koordinator.sh/reservation-node";
pub const ANNOTATION_EXACT_MATCH: &str = "scheduling.koordinator.sh/exact-match-reservation";
pub use crate::api::extension::keys::LABEL_RESERVATION_ORDER;

pub const PHASE_PENDING: &str = "Pending";
pub const PHASE_AVAILABLE: &str = "Available";
pub const PHASE_SUCCEEDED: &str = "Succeeded";
pub const PHASE_FAILED: &str = "Failed";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocatePolicy {
    #[default]
    Default,
    Aligned,
    Restricted,
}

/// One Reservation, parsed once per update.
#[derive(Debug, Clone)]
pub struct ReservationInfo {
    pub name: String,
    pub uid: String,
    pub phase: String,
    pub node: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub allocatable: Amounts,
    /// The resources it reserves, sorted (a Restricted one's narrowed by its
    /// `reservation-restricted-options`): what owners' requests are checked against.
    pub resource_names: Vec<String>,
    /// Held back from owners (its `node.koordinator.sh/reservation` annotation).
    pub reserved: Amounts,
    pub allocate_once: bool,
    pub policy: AllocatePolicy,
    pub unschedulable: bool,
    pub taints: Vec<Taint>,
    pub owners: Vec<ReservationOwner>,
    /// Each owner's label selector, parsed once (`Err`: invalid, matches nothing).
    owner_selectors: Vec<Option<Result<Selector, ()>>>,
    /// Owners currently placed on it: pod key → requests.
    pub allocated: BTreeMap<String, Amounts>,
    pub order: i64,
    pub object: Arc<Reservation>,
}

impl ReservationInfo {
    pub fn new(r: Arc<Reservation>) -> ReservationInfo {
        let spec = &r.spec;
        let status = r.status.as_ref();
        let allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
            Some(a) => amounts(Some(a)),
            None => template_requests(&r),
        };
        let labels = r.metadata.labels.clone().unwrap_or_default();
        let policy = match spec.allocate_policy.as_deref() {
            Some("Aligned") => AllocatePolicy::Aligned,
            Some("Restricted") => AllocatePolicy::Restricted,
            _ => AllocatePolicy::Default,
        };
        let resource_names = resource_names(&r, &allocatable, policy);
        let mut reserved = crate::api::extension::nodereservation::NodeReservation::parse(
            r.metadata.annotations.as_ref(),
        )
        .map(|n| n.resources())
        .unwrap_or_default();
        reserved.retain(|k, _| resource_names.contains(k));
        ReservationInfo {
            resource_names,
            reserved,
            name: r.metadata.name.clone().unwrap_or_default(),
            uid: r.metadata.uid.clone().unwrap_or_default(),
            phase: status
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| PHASE_PENDING.into()),
            node: status
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            order: labels
                .get(LABEL_RESERVATION_ORDER)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            labels,
            allocatable,
            allocate_once: spec.allocate_once.unwrap_or(true),
            policy,
            unschedulable: spec.unschedulable.unwrap_or(false),
            taints: spec.taints.clone().unwrap_or_default(),
            owner_selectors: spec
                .owners
                .iter()
                .map(|o| {
                    o.label_selector
                        .as_ref()
                        .map(|ls| Selector::from_label_selector(ls).map_err(|_| ()))
                })
                .collect(),
            owners: spec.owners.clone(),
            allocated: BTreeMap::new(),
            object: r,
        }
    }

    pub fn is_available(&self) -> bool {
        self.phase == PHASE_AVAILABLE && self.node.is_some()
    }

    /// Owners may still be placed on it.
    pub fn matchable(&self) -> bool {
        self.is_available() && (!self.allocate_once || self.allocated.is_empty())
    }

    /// allocatable − Σ owners' requests, per resource, floored at 0.
    pub fn remaining(&self) -> Amounts {
        let mut out = self.allocatable.clone();
        for req in self.allocated.values() {
            for (k, v) in req {
                if let Some(a) = out.get_mut(k) {
                    *a = (*a - v).max(0);
                }
            }
        }
        out
    }

    /// What owners may still use: allocatable − reserved − Σ owners' requests, per
    /// resource, floored at 0 (Koordinator's `GetAvailable`).
    pub fn available(&self) -> Amounts {
        let mut out = self.remaining();
        for (k, v) in &self.reserved {
            if let Some(a) = out.get_mut(k) {
                *a = (*a - v).max(0);
            }
        }
        out
    }

    /// The reservation and the pod ask for at least one common resource.
    pub fn shares_resource_with(&self, pod_req: &Amounts) -> bool {
        self.resource_names
            .iter()
            .any(|n| pod_req.get(n).is_some_and(|v| *v > 0))
    }

    /// `fitsReservation` (Restricted): why the pod does not fit what the reservation
    /// still holds — its pod count, then each reserved resource, in Koordinator's words;
    /// `detailed` (the pod names this reservation) adds the amounts.
    pub fn insufficient(
        &self,
        pod_req: &Amounts,
        detailed: bool,
        ignored: &IgnoredResources,
    ) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(max) = self.allocatable.get("pods")
            && self.allocated.len() as i64 + 1 > *max
        {
            out.push(if detailed {
                format!(
                    "{REASON_PREFIX}Too many pods, requested: 1, used: {}, capacity: {max}",
                    self.allocated.len()
                )
            } else {
                format!("{REASON_PREFIX}Too many pods")
            });
        }
        for name in self.resource_names.iter().filter(|n| !ignored.has(n)) {
            let requested = pod_req.get(name).copied().unwrap_or(0);
            if requested <= 0 {
                continue;
            }
            let capacity = self.allocatable.get(name).copied().unwrap_or(0)
                - self.reserved.get(name).copied().unwrap_or(0);
            let used: i64 = self
                .allocated
                .values()
                .filter_map(|a| a.get(name))
                .sum::<i64>()
                .max(0);
            if requested > capacity - used {
                out.push(if detailed {
                    format!(
                        "{REASON_PREFIX}Insufficient {name}, requested: {requested}, used: {used}, capacity: {capacity}"
                    )
                } else {
                    format!("{REASON_PREFIX}Insufficient {name}")
                });
            }
        }
        out
    }

    /// Whether `pod` is one of the owners (owners are ORed; within one, every given part
    /// must hold).
    pub fn owner_matches(&self, pod: &Pod) -> bool {
        self.owners
            .iter()
            .zip(&self.owner_selectors)
            .any(|(o, sel)| owner_matches(o, sel.as_ref(), pod))
    }

    /// Whether one of the owners' label selectors picks `pod` (how Koordinator lists the
    /// pods a reservation may pre-allocate).
    pub fn owner_selected(&self, pod: &Pod) -> bool {
        let labels = pod.metadata.labels.as_ref();
        self.owner_selectors
            .iter()
            .flatten()
            .any(|s| s.as_ref().is_ok_and(|s| s.matches_opt(labels)))
    }
}

/// `ReservationArgs.ignoredResources` / `ignoredResourceGroups`: extended resources the
/// reservation fit checks leave out (Koordinator's `isResourceIgnored`).
#[derive(Debug, Clone, Default)]
pub struct IgnoredResources {
    pub names: Vec<String>,
    pub groups: Vec<String>,
}

impl IgnoredResources {
    pub fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
            || name.split_once('/').is_some_and(|(group, _)| {
                !group.is_empty() && self.groups.iter().any(|g| g == group)
            })
    }
}

/// Reservation-level failure reasons start with this (`reservationutil.ErrReasonPrefix`).
pub const REASON_PREFIX: &str = "Reservation(s) ";

/// `scheduling.koordinator.sh/reservation-restricted-options`: the resources a Restricted
/// reservation restricts its owners on (all of them when absent or none match).
pub const ANNOTATION_RESTRICTED_OPTIONS: &str =
    "scheduling.koordinator.sh/reservation-restricted-options";

fn resource_names(r: &Reservation, allocatable: &Amounts, policy: AllocatePolicy) -> Vec<String> {
    #[derive(Deserialize)]
    struct Options {
        #[serde(default)]
        resources: Vec<String>,
    }
    let all: Vec<String> = allocatable.keys().cloned().collect();
    if policy != AllocatePolicy::Restricted {
        return all;
    }
    let options = r
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_RESTRICTED_OPTIONS))
        .and_then(|raw| serde_json::from_str::<Options>(raw).ok());
    let Some(o) = options else {
        return all;
    };
    let narrowed: Vec<String> = all
        .iter()
        .filter(|n| o.resources.contains(n))
        .cloned()
        .collect();
    if narrowed.is_empty() { all } else { narrowed }
}

fn template_requests(r: &Reservation) -> Amounts {
    let Some(t) = r.spec.template.as_ref() else {
        return Amounts::new();
    };
    let pod = Pod {
        spec: t.spec.clone(),
        ..Default::default()
    };
    pod_requests(&pod)
}

fn owner_matches(o: &ReservationOwner, selector: Option<&Result<Selector, ()>>, pod: &Pod) -> bool {
    let m = &pod.metadata;
    let is = |want: &Option<String>, have: Option<&str>| {
        want.as_deref()
            .is_none_or(|w| w.is_empty() || Some(w) == have)
    };
    let object = o.object.as_ref().is_none_or(|r| {
        is(&r.uid, m.uid.as_deref())
            && is(&r.name, m.name.as_deref())
            && is(&r.namespace, m.namespace.as_deref())
    });
    let controller = o.controller.as_ref().is_none_or(|c| {
        is(&c.namespace, m.namespace.as_deref())
            && m.owner_references.iter().flatten().any(|po| {
                c.controller.is_none_or(|want| po.controller == Some(want))
                    && is(&c.uid, Some(&po.uid))
                    && is(&c.name, Some(&po.name))
                    && is(&c.kind, Some(&po.kind))
                    && is(&c.api_version, Some(&po.api_version))
            })
    });
    let labels =
        selector.is_none_or(|s| s.as_ref().is_ok_and(|s| s.matches_opt(m.labels.as_ref())));
    let anything = o.object.is_some() || o.controller.is_some() || o.label_selector.is_some();
    anything && object && controller && labels
}

/// `scheduling.koordinator.sh/reservation-affinity`: the pod must use a reservation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationAffinity {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub reservation_selector: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    pub required: Option<RequiredTerms>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequiredTerms {
    #[serde(default)]
    pub reservation_selector_terms: Vec<k8s_openapi::api::core::v1::NodeSelectorTerm>,
}

pub fn affinity(
    pod: &Pod,
) -> Result<Option<ReservationAffinity>, crate::api::extension::AnnotationError> {
    crate::api::extension::json_annotation(
        pod.metadata.annotations.as_ref(),
        ANNOTATION_RESERVATION_AFFINITY,
    )
}

/// A pod labelled `reservation-ignored=true` schedules as if reservations were free.
pub fn ignores_reservations(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_RESERVATION_IGNORED))
        .is_some_and(|v| v == "true")
}

/// Whether reservation `r` serves `pod` (owner match plus the pod's affinity, taints,
/// unschedulable and exact-match conditions).
pub fn matches(
    r: &ReservationInfo,
    pod: &Pod,
    aff: Option<&ReservationAffinity>,
    pod_req: &Amounts,
) -> bool {
    if !r.matchable() || !r.owner_matches(pod) {
        return false;
    }
    if let Some(a) = aff {
        if let Some(n) = a.name.as_deref().filter(|n| !n.is_empty()) {
            return n == r.name && exact_match(r, pod, pod_req);
        }
        if let Some(sel) = &a.reservation_selector
            && !sel.iter().all(|(k, v)| r.labels.get(k) == Some(v))
        {
            return false;
        }
        if let Some(req) = &a.required
            && !req.reservation_selector_terms.is_empty()
            && !req
                .reservation_selector_terms
                .iter()
                .any(|t| term_matches(t, &r.labels, &r.name))
        {
            return false;
        }
    }
    let tolerations = aff.map(|a| a.tolerations.as_slice()).unwrap_or(&[]);
    let unschedulable_ok = !r.unschedulable
        || tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unschedulable"));
    unschedulable_ok
        && r.taints
            .iter()
            .filter(|t| t.effect != "PreferNoSchedule")
            .all(|t| tolerates(tolerations, t))
        && exact_match(r, pod, pod_req)
}

fn exact_match(r: &ReservationInfo, pod: &Pod, pod_req: &Amounts) -> bool {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        #[serde(default)]
        resource_names: Vec<String>,
    }
    let Some(raw) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_EXACT_MATCH))
    else {
        return true;
    };
    let Ok(spec) = serde_json::from_str::<Spec>(raw) else {
        return false;
    };
    spec.resource_names
        .iter()
        .all(|n| pod_req.get(n).copied().unwrap_or(0) == r.allocatable.get(n).copied().unwrap_or(0))
}

/// The pod a Reservation is scheduled as, and counted as on its node while Available:
/// the template's spec (one container carrying `resources` once the reservation holds
/// less than its template), name and UID of the reservation.
pub fn reserve_pod(info: &ReservationInfo, resources: Option<&Amounts>) -> Pod {
    let r = &info.object;
    let t = r.spec.template.clone().unwrap_or_default();
    let mut meta = t.metadata.unwrap_or_default();
    let mut spec = t.spec.unwrap_or_default();
    meta.name = Some(info.uid.clone());
    meta.uid = Some(info.uid.clone());
    meta.namespace = meta
        .namespace
        .filter(|n| !n.is_empty())
        .or(Some("default".into()));
    let mut labels = meta.labels.unwrap_or_default();
    labels.extend(r.metadata.labels.clone().unwrap_or_default());
    meta.labels = Some(labels);
    let mut ann = meta.annotations.unwrap_or_default();
    ann.extend(r.metadata.annotations.clone().unwrap_or_default());
    ann.insert(ANNOTATION_RESERVE_POD.into(), "true".into());
    ann.insert(ANNOTATION_RESERVATION_NAME.into(), info.name.clone());
    if let Some(n) = spec.node_name.take().filter(|n| !n.is_empty()) {
        ann.insert(ANNOTATION_RESERVATION_NODE.into(), n);
    }
    meta.annotations = Some(ann);
    if spec.priority.is_none() {
        spec.priority = Some(i32::MAX);
    }
    spec.node_name = info.node.clone();
    if let Some(res) = resources {
        let list = crate::api::pod::resource_list(res);
        spec.containers = vec![Container {
            name: "reserved".into(),
            resources: Some(ResourceRequirements {
                requests: Some(list.clone()),
                limits: Some(list),
                ..Default::default()
            }),
            ..Default::default()
        }];
        spec.init_containers = None;
        spec.overhead = None;
    }
    Pod {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
#[path = "reservation_tests.rs"]
mod tests;
