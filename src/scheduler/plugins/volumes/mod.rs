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
