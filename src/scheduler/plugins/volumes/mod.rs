//! kube-scheduler's volume plugins over the storage model (`model/volumes.rs`): a pod's
//! claims bound or bindable on the node (VolumeBinding), its PVs' zones (VolumeZone), CSI
//! attach limits (NodeVolumeLimits), disks that cannot be shared and ReadWriteOncePod
//! claims (VolumeRestrictions). Reasons are kube-scheduler's words.

pub mod binding;
pub mod limits;
pub mod restrictions;
pub mod zone;

#[cfg(test)]
mod filter_tests;
#[cfg(test)]
mod tests;

/// What the volume plugins register for: the volume objects (PersistentVolumes, claims,
/// classes, CSINodes), a node added, relabelled (zones) or grown (attachable volumes), a
/// pod gone from a node.
fn events() -> crate::scheduler::framework::events::Events {
    use crate::scheduler::framework::events::Events as E;
    E::STORAGE
        .or(E::NODE_ADD)
        .or(E::NODE_LABEL)
        .or(E::NODE_ALLOCATABLE)
        .or(E::POD_ASSIGNED_DELETE)
}
