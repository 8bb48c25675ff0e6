//! The live scheduler's storage watches applied to the volume model, and the Services and
//! controllers default topology spreading reads.

use super::live_sync::Watch;
use std::sync::Arc;

use kube::runtime::watcher::Event;

use super::live_watch::{Owner, Storage};
use crate::scheduler::model::owners::Owners;
use crate::scheduler::model::volumes::Volumes;

/// What one storage event did.
pub enum Applied {
    /// The initial list of PVs, claims or StorageClasses is complete.
    Synced(Watch),
    /// An object changed: pods the volume plugins refused may fit now.
    Changed,
    Nothing,
}

fn name(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    m.name.as_deref().unwrap_or_default()
}

pub fn apply(vols: &mut Volumes, ev: Storage) -> Applied {
    use Event::*;
    match ev {
        Storage::Pv(Apply(o) | InitApply(o)) => vols.upsert_pv(Arc::new(o)),
        Storage::Pv(Delete(o)) => vols.remove_pv(name(&o.metadata)),
        Storage::Pvc(Apply(o) | InitApply(o)) => vols.upsert_pvc(Arc::new(o)),
        Storage::Pvc(Delete(o)) => {
            let ns = o.metadata.namespace.as_deref().unwrap_or_default();
            vols.remove_pvc(ns, name(&o.metadata))
        }
        Storage::Class(Apply(o) | InitApply(o)) => vols.upsert_class(Arc::new(o)),
        Storage::Class(Delete(o)) => {
            vols.classes.remove(name(&o.metadata));
        }
        Storage::CsiNode(Apply(o) | InitApply(o)) => vols.upsert_csi_node(Arc::new(o)),
        Storage::CsiNode(Delete(o)) => {
            vols.csi_nodes.remove(name(&o.metadata));
        }
        Storage::CsiDriver(Apply(o) | InitApply(o)) => vols.upsert_csi_driver(Arc::new(o)),
        Storage::CsiDriver(Delete(o)) => {
            vols.csi_drivers.remove(name(&o.metadata));
        }
        Storage::Capacity(Apply(o) | InitApply(o)) => vols.upsert_capacity(Arc::new(o)),
        Storage::Capacity(Delete(o)) => {
            vols.capacities.remove(&Volumes::capacity_key(&o.metadata));
        }
        Storage::Pv(InitDone) => return Applied::Synced(Watch::PersistentVolumes),
        Storage::Pvc(InitDone) => return Applied::Synced(Watch::PersistentVolumeClaims),
        Storage::Class(InitDone) => return Applied::Synced(Watch::StorageClasses),
        // CSINodes are not waited for: without one a node has no attach limit.
        Storage::Pv(Init) | Storage::Pvc(Init) | Storage::Class(Init) => return Applied::Nothing,
        // Nor CSIDrivers and capacities: without them capacity is not checked.
        Storage::CsiNode(Init | InitDone)
        | Storage::CsiDriver(Init | InitDone)
        | Storage::Capacity(Init | InitDone) => return Applied::Nothing,
    }
    Applied::Changed
}

/// A Service's or controller's event into the owners' selectors; true when one changed.
pub fn apply_owner(owners: &mut Owners, ev: Owner) -> bool {
    use Event::*;
    let sel = |s: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
        s.unwrap_or_default()
    };
    match ev {
        Owner::ReplicaSet(Apply(o) | InitApply(o)) => {
            owners.upsert_controller("ReplicaSet", &o.metadata, sel(o.spec.map(|s| s.selector)))
        }
        Owner::StatefulSet(Apply(o) | InitApply(o)) => {
            owners.upsert_controller("StatefulSet", &o.metadata, sel(o.spec.map(|s| s.selector)))
        }
        Owner::Rc(Apply(o) | InitApply(o)) => {
            let labels = o.spec.and_then(|s| s.selector);
            let s = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: labels,
                match_expressions: None,
            };
            owners.upsert_controller("ReplicationController", &o.metadata, s)
        }
        Owner::Service(Apply(o) | InitApply(o)) => owners.upsert_service(&o),
        Owner::ReplicaSet(Delete(o)) => owners.remove_controller("ReplicaSet", &o.metadata),
        Owner::StatefulSet(Delete(o)) => owners.remove_controller("StatefulSet", &o.metadata),
        Owner::Rc(Delete(o)) => owners.remove_controller("ReplicationController", &o.metadata),
        Owner::Service(Delete(o)) => owners.remove_service(&o),
        _ => return false,
    }
    true
}
