//! VolumeRestrictions, as kube-scheduler's: a disk that cannot be shared (GCE PD and iSCSI
//! unless every user mounts it read-only, AWS EBS always, RBD images unless read-only)
//! is not mounted by two pods on a node, and a `ReadWriteOncePod` claim has one user.

use k8s_openapi::api::core::v1::{PodSpec, RBDVolumeSource, Volume};

use crate::scheduler::framework::{ClusterState, CycleState, NodeInfo, PodInfo, Point, Status};
use crate::scheduler::framework::{Plugin, PreFilterResult};
use crate::scheduler::model::volumes as v;

pub const NAME: &str = "VolumeRestrictions";
const STATE: &str = "VolumeRestrictions";
pub const ERR_DISK_CONFLICT: &str = "node(s) had no available disk";
pub const ERR_RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

pub struct VolumeRestrictions;

/// PreFilter's finding: how many of the pod's ReadWriteOncePod claims another pod uses.
struct Found {
    conflicting_claims: usize,
}

fn needs_disk_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.rbd.is_some()
        || v.iscsi.is_some()
}

fn ro(b: Option<bool>) -> bool {
    b.unwrap_or(false)
}

fn rbd_conflict(a: &RBDVolumeSource, b: &RBDVolumeSource) -> bool {
    let overlap = a.monitors.iter().any(|m| b.monitors.contains(m));
    let pool = |r: &RBDVolumeSource| r.pool.clone().unwrap_or_else(|| "rbd".into());
    overlap && pool(a) == pool(b) && a.image == b.image && !(ro(a.read_only) && ro(b.read_only))
}

/// `isVolumeConflict`: the volume clashes with one of an existing pod's volumes.
fn conflicts(vol: &Volume, existing: &PodSpec) -> bool {
    existing.volumes.iter().flatten().any(|e| {
        if let (Some(a), Some(b)) = (&vol.gce_persistent_disk, &e.gce_persistent_disk)
            && a.pd_name == b.pd_name
            && !(ro(a.read_only) && ro(b.read_only))
        {
            return true;
        }
        if let (Some(a), Some(b)) = (&vol.aws_elastic_block_store, &e.aws_elastic_block_store)
            && a.volume_id == b.volume_id
        {
            return true;
        }
        if let (Some(a), Some(b)) = (&vol.iscsi, &e.iscsi)
            && a.iqn == b.iqn
            && !(ro(a.read_only) && ro(b.read_only))
        {
            return true;
        }
        matches!((&vol.rbd, &e.rbd), (Some(a), Some(b)) if rbd_conflict(a, b))
    })
}

/// Placed pods (any node) that use claim `name` in `namespace`.
fn claim_in_use(cluster: &ClusterState, namespace: &str, name: &str) -> bool {
    cluster
        .nodes
        .iter()
        .flat_map(|n| n.pods.iter())
        .any(|p| p.namespace == namespace && v::pod_claims(&p.pod).iter().any(|c| c.name == name))
}

/// The pod's ReadWriteOncePod claims another placed pod already uses (a missing claim
/// is an error, as upstream).
fn rwop_conflicts(pod: &PodInfo, cluster: &ClusterState) -> Result<usize, Status> {
    let mut n = 0;
    let volumes = v::pod_volumes(&pod.pod);
    for vol in volumes {
        let Some(c) = &vol.persistent_volume_claim else {
            continue;
        };
        let Some(pvc) = cluster.volumes.pvc(&pod.namespace, &c.claim_name) else {
            return Err(Status::unresolvable(v::claim_not_found(&c.claim_name)));
        };
        let modes = pvc.spec.as_ref().and_then(|s| s.access_modes.as_deref());
        let rwop = modes
            .unwrap_or_default()
            .iter()
            .any(|m| m == "ReadWriteOncePod");
        if rwop && claim_in_use(cluster, &pod.namespace, &c.claim_name) {
            n += 1;
        }
    }
    Ok(n)
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events(&self) -> crate::scheduler::framework::events::Events {
        super::events()
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PreFilter, Point::Filter]
    }
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> (Status, PreFilterResult) {
        let volumes = v::pod_volumes(&pod.pod);
        if volumes.is_empty() {
            return (Status::skip(), None);
        }
        let needs_check = volumes.iter().any(needs_disk_check);
        let conflicting_claims = match rwop_conflicts(pod, cluster) {
            Ok(n) => n,
            Err(s) => return (s, None),
        };
        if !needs_check && conflicting_claims == 0 {
            return (Status::skip(), None);
        }
        state.write(STATE, Found { conflicting_claims });
        (Status::success(), None)
    }
    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Status {
        let volumes = v::pod_volumes(&pod.pod);
        let disk_clash = volumes.iter().filter(|v| needs_disk_check(v)).any(|vol| {
            node.pods
                .iter()
                .filter_map(|p| p.spec())
                .any(|spec| conflicts(vol, spec))
        });
        if disk_clash {
            return Status::unschedulable(ERR_DISK_CONFLICT);
        }
        if state
            .read::<Found>(STATE)
            .is_some_and(|f| f.conflicting_claims > 0)
        {
            return Status::unschedulable(ERR_RWOP_CONFLICT);
        }
        Status::success()
    }
}
