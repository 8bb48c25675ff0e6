//! Storage as kube-scheduler's volume plugins see it: PersistentVolumes, claims,
//! StorageClasses and CSINodes from the watches, with what this scheduler assumed at
//! Reserve (a PV bound to a claim, a claim given a node to provision on) laid over them
//! until the API shows a newer version or the pod is forgotten — kube-scheduler's
//! assume caches. Matching an unbound claim to a PV follows `FindMatchingVolume`
//! (component-helpers/storage/volume).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, Volume,
};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

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
/// whose node affinity holds. `taken` are PVs already chosen for the pod's other claims.
pub fn find_matching_volume<'a>(
    pvc: &PersistentVolumeClaim,
    pvs: impl Iterator<Item = &'a Arc<PersistentVolume>>,
    labels: &BTreeMap<String, String>,
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
        let affinity_ok = node_affinity_ok(pv, labels);
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

/// A static binding chosen at Reserve: the PV as it is to be written (claimRef set).
#[derive(Debug, Clone)]
pub struct StaticBinding {
    pub pv: Arc<PersistentVolume>,
    pub pvc: Arc<PersistentVolumeClaim>,
}

/// What VolumeBinding chose for a pod on its node: PVs to bind to its claims, claims to
/// provision there (with the selected-node annotation set).
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    pub bindings: Vec<StaticBinding>,
    pub provisions: Vec<Arc<PersistentVolumeClaim>>,
}

impl PodVolumes {
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty() && self.provisions.is_empty()
    }
}

/// The storage objects by name (claims by `namespace/name`), with the assumed versions.
#[derive(Default)]
pub struct Volumes {
    pvs: BTreeMap<String, Arc<PersistentVolume>>,
    pvcs: HashMap<String, Arc<PersistentVolumeClaim>>,
    pub classes: HashMap<String, Arc<StorageClass>>,
    pub csi_nodes: HashMap<String, Arc<CSINode>>,
    assumed_pvs: HashMap<String, Arc<PersistentVolume>>,
    assumed_pvcs: HashMap<String, Arc<PersistentVolumeClaim>>,
    /// Pod key → the PV names and claim keys assumed for it.
    by_pod: HashMap<String, (Vec<String>, Vec<String>)>,
}

/// kube-scheduler's wording when a pod names a claim the cluster lacks.
pub fn claim_not_found(name: &str) -> String {
    format!("persistentvolumeclaim {name:?} not found")
}

/// `namespace/name`, the key claims are assumed and reported under.
pub fn claim_key(pvc: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        pvc.metadata.namespace.as_deref().unwrap_or_default(),
        pvc.metadata.name.as_deref().unwrap_or_default()
    )
}

fn same_version<T: kube::Resource>(a: &T, b: &T) -> bool {
    a.meta().resource_version == b.meta().resource_version
}

impl Volumes {
    /// The PV as this scheduler sees it (assumed, else as watched).
    pub fn pv(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.assumed_pvs.get(name).or_else(|| self.pvs.get(name))
    }

    /// Every PV (assumed versions over watched ones), in name order.
    pub fn all_pvs(&self) -> impl Iterator<Item = &Arc<PersistentVolume>> {
        self.pvs
            .iter()
            .map(|(n, pv)| self.assumed_pvs.get(n).unwrap_or(pv))
    }

    pub fn pvc(&self, namespace: &str, name: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        let key = format!("{namespace}/{name}");
        self.assumed_pvcs.get(&key).or_else(|| self.pvcs.get(&key))
    }

    pub fn upsert_pv(&mut self, pv: Arc<PersistentVolume>) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        if self
            .assumed_pvs
            .get(&name)
            .is_some_and(|a| !same_version(&**a, &*pv))
        {
            self.assumed_pvs.remove(&name);
        }
        self.pvs.insert(name, pv);
    }

    pub fn remove_pv(&mut self, name: &str) {
        self.pvs.remove(name);
        self.assumed_pvs.remove(name);
    }

    pub fn upsert_pvc(&mut self, pvc: Arc<PersistentVolumeClaim>) {
        let key = claim_key(&pvc);
        if self
            .assumed_pvcs
            .get(&key)
            .is_some_and(|a| !same_version(&**a, &*pvc))
        {
            self.assumed_pvcs.remove(&key);
        }
        self.pvcs.insert(key, pvc);
    }

    pub fn remove_pvc(&mut self, namespace: &str, name: &str) {
        let key = format!("{namespace}/{name}");
        self.pvcs.remove(&key);
        self.assumed_pvcs.remove(&key);
    }

    pub fn upsert_class(&mut self, c: Arc<StorageClass>) {
        self.classes
            .insert(c.metadata.name.clone().unwrap_or_default(), c);
    }

    pub fn upsert_csi_node(&mut self, c: Arc<CSINode>) {
        self.csi_nodes
            .insert(c.metadata.name.clone().unwrap_or_default(), c);
    }

    /// Reserve's choice laid over the watched objects until the API shows newer ones.
    pub fn assume(&mut self, pod_key: &str, chosen: &PodVolumes) {
        let entry = self.by_pod.entry(pod_key.to_string()).or_default();
        for b in &chosen.bindings {
            let name = b.pv.metadata.name.clone().unwrap_or_default();
            entry.0.push(name.clone());
            self.assumed_pvs.insert(name, b.pv.clone());
        }
        for c in &chosen.provisions {
            let key = claim_key(c);
            entry.1.push(key.clone());
            self.assumed_pvcs.insert(key, c.clone());
        }
    }

    /// Drops what was assumed for a pod (its binding failed or it was forgotten).
    pub fn revert(&mut self, pod_key: &str) {
        if let Some((pvs, pvcs)) = self.by_pod.remove(pod_key) {
            for n in pvs {
                self.assumed_pvs.remove(&n);
            }
            for k in pvcs {
                self.assumed_pvcs.remove(&k);
            }
        }
    }

    /// The pod's binding is done: its assumptions stay until the watch replaces them.
    pub fn settled(&mut self, pod_key: &str) {
        self.by_pod.remove(pod_key);
    }
}

#[cfg(test)]
#[path = "volumes_tests.rs"]
mod tests;
