//! VolumeZone, as kube-scheduler's: a node that carries zone or region labels must carry
//! the zone/region of every bound PV the pod uses.

use std::collections::BTreeMap;

use crate::scheduler::framework::{ClusterState, CycleState, NodeInfo, PodInfo, Point, Status};
use crate::scheduler::framework::{Plugin, PreFilterResult};
use crate::scheduler::model::volumes as v;

pub const NAME: &str = "VolumeZone";
const STATE: &str = "VolumeZone";
pub const ERR_CONFLICT: &str = "node(s) had no available volume zone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

pub struct VolumeZone;

/// One PV's topology constraint: a label key and the values it allows.
struct PvTopology {
    key: &'static str,
    values: Vec<String>,
}

fn ga_label(key: &str) -> &str {
    match key {
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        k => k,
    }
}

/// `getPVbyPod`: the topology labels of the PVs behind the pod's bound claims;
/// unbound `WaitForFirstConsumer` claims are skipped (VolumeBinding places them).
fn pv_topologies(pod: &PodInfo, cluster: &ClusterState) -> Result<Vec<PvTopology>, Status> {
    let vols = &cluster.volumes;
    let mut out = Vec::new();
    let volumes = v::pod_volumes(&pod.pod);
    for vol in volumes {
        let Some(c) = &vol.persistent_volume_claim else {
            continue;
        };
        if c.claim_name.is_empty() {
            return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
        }
        let Some(pvc) = vols.pvc(&pod.namespace, &c.claim_name) else {
            return Err(Status::unresolvable(v::claim_not_found(&c.claim_name)));
        };
        let pv_name = v::claim_volume_name(pvc);
        if pv_name.is_empty() {
            let class = v::claim_class(pvc);
            if class.is_empty() {
                return Err(Status::unresolvable(
                    "PersistentVolumeClaim had no pv name and storageClass name",
                ));
            }
            let Some(sc) = vols.classes.get(class) else {
                return Err(Status::unresolvable(format!(
                    "storageclass.storage.k8s.io {class:?} not found"
                )));
            };
            match sc.volume_binding_mode.as_deref() {
                None => {
                    return Err(Status::unresolvable(format!(
                        "VolumeBindingMode not set for StorageClass {class:?}"
                    )));
                }
                Some("WaitForFirstConsumer") => continue,
                Some(_) => {}
            }
            return Err(Status::unresolvable("PersistentVolume had no name"));
        }
        let Some(pv) = vols.pv(pv_name) else {
            return Err(Status::unresolvable(format!(
                "persistentvolume {pv_name:?} not found"
            )));
        };
        let labels = pv.metadata.labels.as_ref();
        for key in TOPOLOGY_LABELS {
            if let Some(value) = labels.and_then(|l| l.get(key)) {
                // `LabelZonesToSet`: several zones joined by "__".
                let values = value.split("__").map(str::to_string).collect();
                out.push(PvTopology { key, values });
            }
        }
    }
    Ok(out)
}

fn fits(topologies: &[PvTopology], labels: &BTreeMap<String, String>) -> bool {
    if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
        // A node without zone or region labels has no constraint to break.
        return true;
    }
    topologies.iter().all(|t| {
        let v = labels.get(t.key).or_else(|| labels.get(ga_label(t.key)));
        v.is_some_and(|v| t.values.contains(v))
    })
}

impl Plugin for VolumeZone {
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
        match pv_topologies(pod, cluster) {
            Err(s) => (s, None),
            Ok(t) if t.is_empty() => (Status::skip(), None),
            Ok(t) => {
                state.write(STATE, t);
                (Status::success(), None)
            }
        }
    }
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let Some(t) = state.read::<Vec<PvTopology>>(STATE) else {
            return Status::success();
        };
        if fits(t, &node.labels) {
            Status::success()
        } else {
            Status::unresolvable(ERR_CONFLICT)
        }
    }
}
