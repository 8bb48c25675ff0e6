//! NodeVolumeLimits (kube-scheduler's CSI limits): the CSI volumes attached to a node per
//! driver, the pod's new ones included, stay within what the node's CSINode (or its
//! `attachable-volumes-csi-*` allocatable) allows.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use crate::scheduler::framework::{ClusterState, CycleState, NodeInfo, PodInfo, Point, Status};
use crate::scheduler::framework::{Plugin, PreFilterResult};
use crate::scheduler::model::volumes::{self as v, Volumes};

pub const NAME: &str = "NodeVolumeLimits";
pub const ERR_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";
const ATTACH_LIMIT_PREFIX: &str = "attachable-volumes-csi-";

pub struct NodeVolumeLimits;

/// (driver, volume handle) of the volume behind a claim: the bound PV's CSI source, else
/// (unbound, or its PV not watched yet) the class's provisioner and a per-claim handle.
fn csi_volume(pvc: &PersistentVolumeClaim, vols: &Volumes) -> Option<(String, String)> {
    let pv = vols.pv(v::claim_volume_name(pvc));
    if let Some(pv) = pv.filter(|_| !v::claim_volume_name(pvc).is_empty()) {
        let csi = pv.spec.as_ref()?.csi.as_ref()?;
        return Some((csi.driver.clone(), csi.volume_handle.clone()));
    }
    let class = vols.classes.get(v::claim_class(pvc))?;
    let handle = format!(
        "pvc-{}/{}",
        pvc.metadata.namespace.as_deref().unwrap_or_default(),
        pvc.metadata.name.as_deref().unwrap_or_default()
    );
    Some((class.provisioner.clone(), handle))
}

/// `filterAttachableVolumes`: unique volume name → driver, for a pod's claims. A new pod's
/// missing claim is an error; an existing pod's is not counted.
fn attachable(
    pod: &Pod,
    vols: &Volumes,
    new_pod: bool,
    out: &mut HashMap<String, String>,
) -> Result<(), Status> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    for u in v::pod_claims(pod) {
        let Some(pvc) = vols.pvc(ns, &u.name) else {
            if new_pod {
                return Err(Status::unresolvable(format!(
                    "looking up PVC {ns}/{}: {}",
                    u.name,
                    v::claim_not_found(&u.name)
                )));
            }
            continue;
        };
        if let Some((driver, handle)) = csi_volume(pvc, vols)
            && !driver.is_empty()
            && !handle.is_empty()
        {
            out.insert(format!("{driver}/{handle}"), driver);
        }
    }
    Ok(())
}

/// Attach limits by driver: the node's `attachable-volumes-csi-<driver>` allocatable,
/// overridden by its CSINode's per-driver counts.
fn limits(node: &NodeInfo, cluster: &ClusterState) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let alloc = node
        .node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref());
    for (k, q) in alloc.into_iter().flatten() {
        if let Some(driver) = k.strip_prefix(ATTACH_LIMIT_PREFIX) {
            out.insert(driver.to_string(), crate::api::quantity::q_value(q));
        }
    }
    if let Some(csi) = cluster.volumes.csi_nodes.get(&node.name) {
        for d in &csi.spec.drivers {
            if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
                out.insert(d.name.clone(), i64::from(count));
            }
        }
    }
    out
}

impl Plugin for NodeVolumeLimits {
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
        _: &mut CycleState,
        pod: &PodInfo,
        _: &ClusterState,
    ) -> (Status, PreFilterResult) {
        if v::pod_claims(&pod.pod).is_empty() {
            (Status::skip(), None)
        } else {
            (Status::success(), None)
        }
    }
    fn filter(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let vols = &cluster.volumes;
        let mut new = HashMap::new();
        if let Err(s) = attachable(&pod.pod, vols, true, &mut new) {
            return s;
        }
        if new.is_empty() {
            return Status::success();
        }
        let limits = limits(node, cluster);
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = HashMap::new();
        for p in &node.pods {
            let _ = attachable(&p.pod, vols, false, &mut attached);
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for (unique, driver) in &attached {
            // A volume the node already has is not attached again.
            new.remove(unique);
            *attached_count.entry(driver).or_default() += 1;
        }
        let mut new_count: HashMap<&str, i64> = HashMap::new();
        for driver in new.values() {
            *new_count.entry(driver).or_default() += 1;
        }
        let over = new_count.iter().any(|(driver, n)| {
            limits
                .get(*driver)
                .is_some_and(|max| attached_count.get(driver).copied().unwrap_or(0) + n > *max)
        });
        if over {
            Status::unschedulable(ERR_MAX_VOLUME_COUNT)
        } else {
            Status::success()
        }
    }
}
