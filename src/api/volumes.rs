//! Storage matching shared by kube-scheduler's VolumeBinding (`scheduler::model::volumes`)
//! and the embedded PV controller (`apiserver::pvbinder`): claim and volume classes,
//! `FindMatchingVolume` (component-helpers/storage/volume), `GetBindVolumeToClaim`,
//! `IsDelayBindingMode`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::api::quantity::q_value;

/// The node a `WaitForFirstConsumer` claim is to be provisioned on (set by the scheduler).
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set by the PV controller once a claim's binding is complete.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a PV the controller (or the scheduler) bound, not the user.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The storage class before `storageClassName` existed; still read first.
const ANN_BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// One pod volume that goes through a claim.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimUse {
    pub name: String,
    /// A generic ephemeral volume (`<pod>-<volume>`), created by a controller.
    pub ephemeral: bool,
}

/// A pod's volumes (none without a spec).
pub fn pod_volumes(pod: &Pod) -> &[Volume] {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default()
}

/// The claims a pod's volumes use, in volume order.
pub fn pod_claims(pod: &Pod) -> Vec<ClaimUse> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    pod_volumes(pod)
        .iter()
        .filter_map(|v| claim_of(pod_name, v))
        .collect()
}

fn claim_of(pod_name: &str, v: &Volume) -> Option<ClaimUse> {
    if let Some(c) = &v.persistent_volume_claim {
        return Some(ClaimUse {
            name: c.claim_name.clone(),
            ephemeral: false,
        });
    }
    v.ephemeral.as_ref().map(|_| ClaimUse {
        name: format!("{pod_name}-{}", v.name),
        ephemeral: true,
    })
}

/// A claim's class: the beta annotation, else `storageClassName`, else "".
pub fn claim_class(pvc: &PersistentVolumeClaim) -> &str {
    annotation(&pvc.metadata, ANN_BETA_CLASS)
        .or_else(|| pvc.spec.as_ref()?.storage_class_name.as_deref())
        .unwrap_or_default()
}

/// A volume's class, read the same way.
pub fn volume_class(pv: &PersistentVolume) -> &str {
    annotation(&pv.metadata, ANN_BETA_CLASS)
        .or_else(|| pv.spec.as_ref()?.storage_class_name.as_deref())
        .unwrap_or_default()
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

pub fn claim_volume_name(pvc: &PersistentVolumeClaim) -> &str {
    pvc.spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

/// Bound to a PV and the PV controller finished the binding.
pub fn fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    !claim_volume_name(pvc).is_empty() && annotation(&pvc.metadata, ANN_BIND_COMPLETED).is_some()
}

/// The claim's storage request in bytes (0 when it asks for none).
pub fn claim_request(pvc: &PersistentVolumeClaim) -> i64 {
    pvc.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(q_value)
        .unwrap_or(0)
}

fn volume_capacity(pv: &PersistentVolume) -> i64 {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .map(q_value)
        .unwrap_or(0)
}

/// `volumeMode`, Filesystem when unset (the API's default).
fn mode(m: Option<&String>) -> &str {
    m.map(String::as_str).unwrap_or("Filesystem")
}

/// The PV's node affinity holds for a node with these labels (`CheckNodeAffinity`: the
/// required terms only, against a node known by its labels).
pub fn node_affinity_ok(pv: &PersistentVolume, labels: &BTreeMap<String, String>) -> bool {
    let required = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref());
    required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|t| crate::api::placement::term_matches(t, labels, ""))
    })
}

/// The PV names this claim in its `claimRef` (name, namespace and, if set, uid).
pub fn bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.name.as_deref() == pvc.metadata.name.as_deref()
        && r.namespace.as_deref() == pvc.metadata.namespace.as_deref()
        && r.uid
            .as_deref()
            .is_none_or(|u| u.is_empty() || Some(u) == pvc.metadata.uid.as_deref())
}

/// Every access mode the claim asks for is one the PV offers.
fn access_modes_ok(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let offered = pv.spec.as_ref().and_then(|s| s.access_modes.as_deref());
    let asked = pvc.spec.as_ref().and_then(|s| s.access_modes.as_deref());
    asked
        .unwrap_or_default()
        .iter()
        .all(|m| offered.unwrap_or_default().contains(m))
}

/// `FindMatchingVolume` on the scheduler's path: a PV pre-bound to the claim (if its node
/// affinity holds), else the smallest Available PV of the claim's class that is large
/// enough, of the same volume mode, offers its access modes, matches its selector and
/// whose node affinity holds for the node's `labels` (not checked without a node).
/// `taken` are PVs already chosen for the pod's other claims.
pub fn find_matching_volume<'a>(
    pvc: &PersistentVolumeClaim,
    pvs: impl Iterator<Item = &'a Arc<PersistentVolume>>,
    labels: Option<&BTreeMap<String, String>>,
    taken: &[&str],
) -> Option<Arc<PersistentVolume>> {
    let requested = claim_request(pvc);
    let class = claim_class(pvc);
    let spec = pvc.spec.as_ref();
    let selector = spec.and_then(|s| s.selector.as_ref());
    let claim_mode = mode(spec.and_then(|s| s.volume_mode.as_ref()));
    let mut smallest: Option<(i64, &Arc<PersistentVolume>)> = None;
    for pv in pvs {
        let name = pv.metadata.name.as_deref().unwrap_or_default();
        let pv_spec = pv.spec.as_ref();
        let claimed = pv_spec.and_then(|s| s.claim_ref.as_ref()).is_some();
        if taken.contains(&name) || (claimed && !bound_to_claim(pv, pvc)) {
            continue;
        }
        let size = volume_capacity(pv);
        if size < requested
            || mode(pv_spec.and_then(|s| s.volume_mode.as_ref())) != claim_mode
            || pv.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        // The PV controller matches without a node (kube passes none).
        let affinity_ok = labels.is_none_or(|l| node_affinity_ok(pv, l));
        if bound_to_claim(pv, pvc) {
            // A PV pre-bound to the claim is the answer, or there is none on this node.
            return affinity_ok.then(|| pv.clone());
        }
        let available = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available");
        let selected = selector.is_none_or(|s| {
            crate::api::selector::label_selector_matches(Some(s), pv.metadata.labels.as_ref())
        });
        if !available || !selected || volume_class(pv) != class || !affinity_ok {
            continue;
        }
        if !access_modes_ok(pvc, pv) {
            continue;
        }
        if smallest.is_none_or(|(s, _)| s > size) {
            smallest = Some((size, pv));
        }
    }
    smallest.map(|(_, pv)| pv.clone())
}

/// `GetBindVolumeToClaim`: the PV with its `claimRef` set to the claim (and the
/// bound-by-controller annotation when the user had not pre-bound it); None when it
/// already names the claim exactly.
pub fn bind_volume_to_claim(
    pv: &PersistentVolume,
    pvc: &PersistentVolumeClaim,
) -> Option<PersistentVolume> {
    let mut out = pv.clone();
    let spec = out.spec.get_or_insert_with(Default::default);
    let prebound = spec.claim_ref.is_some();
    let wanted = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        name: pvc.metadata.name.clone(),
        namespace: pvc.metadata.namespace.clone(),
        uid: pvc.metadata.uid.clone(),
        resource_version: pvc.metadata.resource_version.clone(),
        ..Default::default()
    };
    let same = spec.claim_ref.as_ref().is_some_and(|r| {
        r.name == wanted.name && r.namespace == wanted.namespace && r.uid == wanted.uid
    });
    if same {
        return None;
    }
    spec.claim_ref = Some(wanted);
    if !prebound {
        out.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
    }
    Some(out)
}

/// `IsDelayBindingMode`: the claim's class exists and binds at first consumer.
pub fn delay_binding(
    pvc: &PersistentVolumeClaim,
    classes: &HashMap<String, Arc<StorageClass>>,
) -> bool {
    let class = claim_class(pvc);
    !class.is_empty()
        && classes
            .get(class)
            .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
}
