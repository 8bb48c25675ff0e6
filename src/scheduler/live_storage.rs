//! The live scheduler's storage watches applied to the volume model.

use std::sync::Arc;

use kube::runtime::watcher::Event;

use super::live_watch::Storage;
use crate::scheduler::model::volumes::Volumes;

/// What one storage event did.
pub enum Applied {
    /// The initial list of PVs (0), claims (1) or StorageClasses (2) is complete.
    Synced(usize),
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
        Storage::Pv(InitDone) => return Applied::Synced(0),
        Storage::Pvc(InitDone) => return Applied::Synced(1),
        Storage::Class(InitDone) => return Applied::Synced(2),
        // CSINodes are not waited for: without one a node has no attach limit.
        Storage::Pv(Init) | Storage::Pvc(Init) | Storage::Class(Init) => return Applied::Nothing,
        Storage::CsiNode(Init | InitDone) => return Applied::Nothing,
    }
    Applied::Changed
}
