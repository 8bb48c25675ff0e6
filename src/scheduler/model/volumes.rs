//! Storage as kube-scheduler's volume plugins see it: PersistentVolumes, claims,
//! StorageClasses and CSINodes from the watches, with what this scheduler assumed at
//! Reserve (a PV bound to a claim, a claim given a node to provision on) laid over them
//! until the API shows a newer version or the pod is forgotten — kube-scheduler's
//! assume caches. Matching a claim to a PV (`FindMatchingVolume`) is shared with the
//! embedded PV controller, in `api::volumes`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

pub use crate::api::volumes::*;

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
    /// CSIDrivers by name (their `storageCapacity` opt-in).
    pub csi_drivers: HashMap<String, Arc<k8s_openapi::api::storage::v1::CSIDriver>>,
    /// CSIStorageCapacities by `namespace/name`.
    pub capacities: BTreeMap<String, Arc<k8s_openapi::api::storage::v1::CSIStorageCapacity>>,
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

    pub fn upsert_csi_driver(&mut self, d: Arc<k8s_openapi::api::storage::v1::CSIDriver>) {
        self.csi_drivers
            .insert(d.metadata.name.clone().unwrap_or_default(), d);
    }

    pub fn capacity_key(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
        let ns = m.namespace.as_deref().unwrap_or_default();
        format!("{ns}/{}", m.name.as_deref().unwrap_or_default())
    }

    pub fn upsert_capacity(&mut self, c: Arc<k8s_openapi::api::storage::v1::CSIStorageCapacity>) {
        self.capacities.insert(Self::capacity_key(&c.metadata), c);
    }

    /// kube's `hasEnoughCapacity`: a claim of a class whose CSI driver opted into capacity
    /// tracking (`storageCapacity: true`) needs a CSIStorageCapacity of that class the node
    /// can reach (`nodeTopology` selects it) whose `maximumVolumeSize`, else `capacity`,
    /// holds the claim's request; other drivers and claims without a request always fit.
    pub fn has_enough_capacity(
        &self,
        pvc: &PersistentVolumeClaim,
        class: &StorageClass,
        node_labels: &BTreeMap<String, String>,
    ) -> bool {
        let size = crate::api::volumes::claim_request(pvc);
        let asks = pvc
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .is_some_and(|r| r.contains_key("storage"));
        let tracked = self
            .csi_drivers
            .get(&class.provisioner)
            .and_then(|d| d.spec.storage_capacity)
            .unwrap_or(false);
        if !asks || !tracked {
            return true;
        }
        let class_name = class.metadata.name.as_deref().unwrap_or_default();
        self.capacities.values().any(|c| {
            let limit = c.maximum_volume_size.as_ref().or(c.capacity.as_ref());
            c.storage_class_name == class_name
                && limit.is_some_and(|l| crate::api::quantity::q_value(l) >= size)
                && c.node_topology.as_ref().is_some_and(|t| {
                    crate::api::selector::label_selector_matches(Some(t), Some(node_labels))
                })
        })
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
