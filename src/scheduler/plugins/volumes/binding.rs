//! VolumeBinding, as kube-scheduler's: a pod's claims must be bound, or bindable on the
//! node (`WaitForFirstConsumer`: an Available PV that fits, or a class that provisions
//! there). Reserve picks the PVs and the claims to provision; the binding cycle writes them
//! (`scheduler/volume_binder.rs`) and waits for the PV controller before the pod is bound.

use crate::api::field::FieldError;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::scheduler::framework::{
    ClusterState, Code, CycleState, NodeInfo, PodInfo, Point, Status,
};
use crate::scheduler::framework::{Plugin, PreFilterResult};
use crate::scheduler::model::volumes::{self as v, ANN_SELECTED_NODE, PodVolumes, StaticBinding};

pub const NAME: &str = "VolumeBinding";
const STATE: &str = "VolumeBinding";
const CHOSEN: &str = "VolumeBinding/chosen";

pub const ERR_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const ERR_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const ERR_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
pub const ERR_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// Provisioners that do not provision (local volumes).
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Args {
    /// How long PreBind waits for the PV controller (kube-scheduler's default: 600 s).
    pub bind_timeout_seconds: i64,
    /// Only with the VolumeCapacityPriority feature gate, which koord does not score.
    pub shape: Option<serde_json::Value>,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            bind_timeout_seconds: 600,
            shape: None,
        }
    }
}

pub struct VolumeBinding {
    pub args: Args,
}

impl VolumeBinding {
    pub fn new(args: Args) -> Result<VolumeBinding, FieldError> {
        if args.bind_timeout_seconds < 0 {
            return Err(FieldError::invalid(
                "bindTimeoutSeconds",
                "invalid BindTimeoutSeconds, should not be a negative value",
            ));
        }
        Ok(VolumeBinding { args })
    }
}

/// PreFilter's sorting of the pod's claims.
struct Claims {
    bound: Vec<Arc<PersistentVolumeClaim>>,
    delayed: Vec<Arc<PersistentVolumeClaim>>,
}

/// Reserve's choice and how long PreBind may wait for it.
struct Chosen {
    volumes: PodVolumes,
    timeout: std::time::Duration,
}

/// What Reserve chose for the pod (read by the cycle to assume it, and by the binder).
pub fn chosen(state: &CycleState) -> Option<&PodVolumes> {
    let c = state.read::<Chosen>(CHOSEN)?;
    (!c.volumes.is_empty()).then_some(&c.volumes)
}

/// How long the binding cycle waits for the PV controller (`bindTimeoutSeconds`).
pub fn bind_timeout(state: &CycleState) -> std::time::Duration {
    state
        .read::<Chosen>(CHOSEN)
        .map(|c| c.timeout)
        .unwrap_or(std::time::Duration::from_secs(600))
}

impl VolumeBinding {
    /// `podHasPVCs` + `GetPodVolumeClaims`.
    fn claims(pod: &PodInfo, cluster: &ClusterState) -> Result<Option<Claims>, Status> {
        let uses = v::pod_claims(&pod.pod);
        if uses.is_empty() {
            return Ok(None);
        }
        let vols = &cluster.volumes;
        let mut out = Claims {
            bound: Vec::new(),
            delayed: Vec::new(),
        };
        let mut immediate = false;
        for u in uses {
            let pvc = check_claim(pod, &u, cluster)?;
            if v::fully_bound(&pvc) {
                out.bound.push(pvc);
            } else if v::delay_binding(&pvc, &vols.classes) && v::claim_volume_name(&pvc).is_empty()
            {
                out.delayed.push(pvc);
            } else {
                immediate = true;
            }
        }
        if immediate {
            return Err(Status::unresolvable(ERR_UNBOUND_IMMEDIATE));
        }
        Ok(Some(out))
    }
}

/// The claim exists, is not lost or being deleted, and (ephemeral) belongs to the pod.
pub(super) fn check_claim(
    pod: &PodInfo,
    u: &v::ClaimUse,
    cluster: &ClusterState,
) -> Result<Arc<PersistentVolumeClaim>, Status> {
    let Some(pvc) = cluster.volumes.pvc(&pod.namespace, &u.name) else {
        return Err(Status::unresolvable(if u.ephemeral {
            format!(
                "waiting for ephemeral volume controller to create the persistentvolumeclaim {:?}",
                u.name
            )
        } else {
            v::claim_not_found(&u.name)
        }));
    };
    if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
        return Err(Status::unresolvable(format!(
            "persistentvolumeclaim {:?} bound to non-existent persistentvolume {:?}",
            u.name,
            v::claim_volume_name(pvc)
        )));
    }
    if pvc.metadata.deletion_timestamp.is_some() {
        return Err(Status::unresolvable(format!(
            "persistentvolumeclaim {:?} is being deleted",
            u.name
        )));
    }
    let owned = pvc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "Pod" && o.uid == pod.uid);
    if u.ephemeral && !owned {
        return Err(Status::unresolvable(format!(
            "PVC {}/{} was not created for pod {} (pod is not owner)",
            pod.namespace, u.name, pod.key
        )));
    }
    Ok(pvc.clone())
}

/// `FindPodVolumes` for one node: the PVs and provisions that would serve the pod's
/// claims there, or kube-scheduler's reasons (or an error) why not.
fn find_pod_volumes(
    claims: &Claims,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Result<PodVolumes, Status> {
    let vols = &cluster.volumes;
    let mut reasons = Vec::new();
    let mut out = PodVolumes::default();
    for pvc in &claims.bound {
        match vols.pv(v::claim_volume_name(pvc)) {
            None => return Err(conflict(vec![ERR_PV_NOT_EXIST])),
            Some(pv) if !v::node_affinity_ok(pv, &node.labels) => {
                reasons.push(ERR_NODE_CONFLICT);
                break;
            }
            Some(_) => {}
        }
    }
    let mut to_match = Vec::new();
    let mut to_provision = Vec::new();
    for pvc in &claims.delayed {
        let selected = pvc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_SELECTED_NODE));
        match selected {
            Some(n) if n != &node.name => {
                reasons.push(ERR_BIND_CONFLICT);
                return Err(conflict(reasons));
            }
            Some(_) => to_provision.push(pvc.clone()),
            None => to_match.push(pvc.clone()),
        }
    }
    let mut satisfied = true;
    let mut sufficient = true;
    // Smallest claims first, so each gets the smallest PV that fits.
    to_match.sort_by_key(|c| v::claim_request(c));
    for pvc in to_match {
        let taken: Vec<&str> = out
            .bindings
            .iter()
            .filter_map(|b| b.pv.metadata.name.as_deref())
            .collect();
        match v::find_matching_volume(&pvc, vols.all_pvs(), Some(&node.labels), &taken) {
            Some(pv) => out.bindings.push(StaticBinding { pv, pvc }),
            None => {
                satisfied = false;
                to_provision.push(pvc);
            }
        }
    }
    if !to_provision.is_empty() {
        (satisfied, sufficient) = provisionable(&to_provision, node, cluster)?;
        if satisfied && sufficient {
            out.provisions = to_provision;
        }
    }
    if !satisfied {
        reasons.push(ERR_BIND_CONFLICT);
    }
    if !sufficient {
        reasons.push(ERR_NOT_ENOUGH_SPACE);
    }
    if reasons.is_empty() {
        Ok(out)
    } else {
        Err(conflict(reasons))
    }
}

fn conflict(reasons: Vec<&str>) -> Status {
    Status {
        code: Code::UnschedulableAndUnresolvable,
        reasons: reasons.into_iter().map(|r| r.to_string().into()).collect(),
    }
}

/// `checkVolumeProvisions`: (every claim's class provisions, on a node its allowed
/// topologies include; the node can reach enough CSIStorageCapacity for each).
fn provisionable(
    claims: &[Arc<PersistentVolumeClaim>],
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Result<(bool, bool), Status> {
    for pvc in claims {
        let class_name = v::claim_class(pvc);
        let key = v::claim_key(pvc);
        if class_name.is_empty() {
            return Err(Status::error(format!("no class for claim {key:?}")));
        }
        let Some(class) = cluster.volumes.classes.get(class_name) else {
            return Err(Status::error(format!(
                "failed to find storage class {class_name:?}"
            )));
        };
        if class.provisioner.is_empty() || class.provisioner == NO_PROVISIONER {
            return Ok((false, true));
        }
        if !topology_allows(class.allowed_topologies.as_deref(), &node.labels) {
            return Ok((false, true));
        }
        if !cluster
            .volumes
            .has_enough_capacity(pvc, class, &node.labels)
        {
            return Ok((true, false));
        }
    }
    Ok((true, true))
}

/// `MatchTopologySelectorTerms`: no terms, or one whose every expression the labels meet.
pub(super) fn topology_allows(
    terms: Option<&[k8s_openapi::api::core::v1::TopologySelectorTerm]>,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    let terms = terms.unwrap_or_default();
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_label_expressions
                .iter()
                .flatten()
                .all(|e| labels.get(&e.key).is_some_and(|v| e.values.contains(v)))
        })
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events(&self) -> crate::scheduler::framework::events::Events {
        super::events()
    }
    fn points(&self) -> &'static [Point] {
        &[
            Point::PreFilter,
            Point::Filter,
            Point::PreScore,
            Point::Score,
            Point::Reserve,
            Point::PreBind,
        ]
    }
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> (Status, PreFilterResult) {
        match Self::claims(pod, cluster) {
            Err(s) => (s, None),
            Ok(None) => (Status::skip(), None),
            Ok(Some(c)) => {
                state.write(STATE, c);
                (Status::success(), None)
            }
        }
    }
    fn filter(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let Some(claims) = state.read::<Claims>(STATE) else {
            return Status::success();
        };
        match find_pod_volumes(claims, node, cluster) {
            Ok(_) => Status::success(),
            Err(s) => s,
        }
    }
    /// Scoring needs the VolumeCapacityPriority gate (off by default): Skip, as upstream.
    fn pre_score(&self, _: &mut CycleState, _: &PodInfo, _: &[usize], _: &ClusterState) -> Status {
        Status::skip()
    }
    fn reserve(
        &self,
        state: &mut CycleState,
        _: &PodInfo,
        node: &str,
        cluster: &ClusterState,
    ) -> Status {
        let Some(claims) = state.read::<Claims>(STATE) else {
            return Status::success();
        };
        if claims.delayed.is_empty() {
            return Status::success();
        }
        let Some(info) = cluster.node(node) else {
            return Status::error(format!("node {node:?} not found"));
        };
        let mut chosen = match find_pod_volumes(claims, info, cluster) {
            Ok(c) => c,
            Err(s) if s.code == Code::Error => return s,
            Err(s) => return Status::error(s.message()),
        };
        for b in &mut chosen.bindings {
            if let Some(pv) = v::bind_volume_to_claim(&b.pv, &b.pvc) {
                b.pv = Arc::new(pv);
            }
        }
        for c in &mut chosen.provisions {
            let mut pvc = (**c).clone();
            pvc.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANN_SELECTED_NODE.into(), node.to_string());
            *c = Arc::new(pvc);
        }
        let timeout = std::time::Duration::from_secs(self.args.bind_timeout_seconds.max(1) as u64);
        let chosen = Chosen {
            volumes: chosen,
            timeout,
        };
        state.write(CHOSEN, chosen);
        Status::success()
    }
    fn unreserve(&self, state: &mut CycleState, _: &PodInfo, _: &str) {
        state.remove(CHOSEN);
    }
    fn report(&self, state: &CycleState) -> Option<(&'static str, serde_json::Value)> {
        let c = chosen(state)?;
        let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            format!(
                "{}/{}",
                m.namespace.as_deref().unwrap_or_default(),
                m.name.as_deref().unwrap_or_default()
            )
        };
        let bind: Vec<_> = c
            .bindings
            .iter()
            .map(|b| serde_json::json!({"claim": name(&b.pvc.metadata), "volume": b.pv.metadata.name}))
            .collect();
        let provision: Vec<_> = c.provisions.iter().map(|p| name(&p.metadata)).collect();
        Some((
            "volumes",
            serde_json::json!({"bind": bind, "provision": provision}),
        ))
    }
}
