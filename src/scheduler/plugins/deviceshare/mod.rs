//! DeviceShare (`pkg/scheduler/plugins/deviceshare`): pods asking for GPUs (whole, shared
//! by memory ratio / memory / core), RDMA or FPGA get specific devices of the node's
//! `Device`, chosen at Reserve and written at PreBind as
//! `scheduling.koordinator.sh/device-allocated`, from which the koordlet's hooks inject
//! `NVIDIA_VISIBLE_DEVICES` and the RDMA devices. What is taken is read back from the pods'
//! annotations, so allocations survive a scheduler restart; a pod placed into a
//! Reservation takes the reservation's devices first.

pub mod adapter;
pub mod alloc;
pub mod args;
pub mod error;
pub mod hint;
pub mod numa;
pub mod request;
pub mod used;

#[cfg(test)]
mod tests;

use crate::api::field::FieldError;
use crate::scheduler::model::devices::{self, Allocations};
use alloc::{Ctx, Scorer};
use request::{JointAllocate, Request};

use crate::api::extension::keys::{ANNOTATION_DEVICE_ALLOCATED, LABEL_GPU_MODEL, LABEL_GPU_VENDOR};
use crate::scheduler::framework::{
    ClusterState, CycleState, NodeInfo, Plugin, PodDraft, PodInfo, Point, PreFilterResult, Status,
};

pub const NAME: &str = "DeviceShare";
const ALLOC_KEY: &str = "DeviceShare/allocation";
const ADAPTED_KEY: &str = "DeviceShare/adapted";

pub struct DeviceShare {
    scorer: Scorer,
    /// `disableDeviceNUMATopologyAlignment` unset: devices follow NodeNUMAResource's NUMA
    /// choice and offer it their hints.
    numa_align: bool,
    unsupported_models: Vec<args::Model>,
    /// Resources whose shares must match a GPU shared-resource template.
    template_resources: Vec<String>,
    /// The `DevicePluginAdaption` feature gate.
    adaption: bool,
}

/// Koordinator's `ErrNoMatchedGPUSharedResourceTemplate`.
pub const NO_TEMPLATE: &str = "no matched GPU shared resource template";

impl DeviceShare {
    pub fn new(a: args::Args) -> Result<DeviceShare, FieldError> {
        Ok(DeviceShare {
            scorer: a.scorer()?,
            numa_align: !a.disable_numa_alignment,
            template_resources: a.templates().matched_resources,
            unsupported_models: a.unsupported_models,
            adaption: false,
        })
    }

    /// With the `DevicePluginAdaption` gate's value.
    pub fn with_adaption(mut self, on: bool) -> DeviceShare {
        self.adaption = on;
        self
    }

    /// Reserve's adaption of the pod's devices for third-party device plugins. Not for a
    /// reserve pod: no device plugin allocates for a Reservation.
    fn adapt(
        &self,
        pod: &PodInfo,
        n: &NodeInfo,
        a: &Allocations,
        cluster: &ClusterState,
    ) -> Result<Option<adapter::Adapted>, Status> {
        if !self.adaption || pod.reserve_of.is_some() {
            return Ok(None);
        }
        let dev = cluster.devices.get(&n.name);
        let no_labels = Default::default();
        let meta = &pod.pod.metadata;
        let t = adapter::Target {
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref().unwrap_or_default(),
            labels: meta.labels.as_ref().unwrap_or(&no_labels),
            node: &n.name,
            node_annotations: n.node.metadata.annotations.as_ref().unwrap_or(&no_labels),
            vendor: dev.map_or("", |d| d.vendor.as_str()),
            model: dev.map_or("", |d| d.model.as_str()),
            now_ms: cluster.now_ms,
            alive: &|key| cluster.placement(key).is_some(),
        };
        adapter::adapt(&t, a).map(Some).map_err(Status::error)
    }

    /// `parseGPURequirements`: a shared GPU request naming a templated resource must equal
    /// a template; the matching templates by GPU model (None: no template enforced).
    fn templates_for(
        &self,
        req: &Request,
        cluster: &ClusterState,
    ) -> Result<Option<std::collections::BTreeMap<String, Vec<String>>>, Status> {
        let Some(gpu) = req.by_type.get("gpu").filter(|_| req.shared_gpu) else {
            return Ok(None);
        };
        if !self
            .template_resources
            .iter()
            .any(|r| gpu.per.contains_key(r))
        {
            return Ok(None);
        }
        let matched = cluster.gpu_templates.matching(&gpu.per);
        if matched.is_empty() {
            return Err(Status::unresolvable(NO_TEMPLATE));
        }
        Ok(Some(matched))
    }

    fn share_refused(&self, st: &PreState, node: &NodeInfo) -> Option<Status> {
        if !st.req.shared_gpu {
            return None;
        }
        let vendor = node.labels.get(LABEL_GPU_VENDOR).map_or("", String::as_str);
        let model = node.labels.get(LABEL_GPU_MODEL).map_or("", String::as_str);
        self.unsupported_models
            .iter()
            .any(|m| m.vendor == vendor && m.model == model)
            .then(|| {
                Status::unresolvable(format!(
                    "model {model:?} of vendor {vendor:?} does not support GPU Share"
                ))
            })
    }

    /// The pod's devices on `node`, or why not; `Ok(None)` for a node without a Device.
    fn plan(
        &self,
        state: &CycleState,
        st: &PreState,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<Option<Allocations>, Status> {
        let template = match &st.templates {
            None => None,
            Some(by_model) => template_on(by_model, node)?,
        };
        let planned = with_ctx(state, node, cluster, aligned_to(state, st, node), |ctx| {
            alloc::allocate(ctx, &st.req, st.joint.as_ref())
        })
        .transpose()
        .map_err(|e| Status::unschedulable(e.to_string()))?;
        Ok(planned.map(|mut a| {
            for g in a.get_mut("gpu").into_iter().flatten() {
                g.template = template.clone();
            }
            a
        }))
    }
}

/// The NUMA nodes NodeNUMAResource chose for the pod on `node`, when devices follow them.
fn aligned_to(state: &CycleState, st: &PreState, node: &NodeInfo) -> Option<u64> {
    if !st.numa_align {
        return None;
    }
    crate::scheduler::plugins::numa::affinity::get(state, &node.name)
}

/// `f` over this node's devices as this pod sees them (its usable reservations' devices
/// free and preferred; only those on the `numa` nodes when aligned); None for a node
/// without a Device or a pod DeviceShare skipped.
fn with_ctx<R>(
    state: &CycleState,
    node: &NodeInfo,
    cluster: &ClusterState,
    numa: Option<u64>,
    f: impl FnOnce(&Ctx) -> R,
) -> Option<R> {
    let devs = cluster.devices.get(&node.name)?;
    let st = state.read::<PreState>(NAME)?;
    let usable = crate::scheduler::plugins::reservation::plugin::matched_on(state, &node.name);
    let (used, reserved) = used::used_on(node, &usable);
    let vfs_used = if st.hints.values().any(|h| h.vf_selector.is_some()) {
        used::vfs_on(node)
    } else {
        Default::default()
    };
    Some(f(&Ctx {
        devices: devs,
        used: &used,
        reserved: &reserved,
        scorer: &st.scorer,
        hints: &st.hints,
        vfs_used: &vfs_used,
        numa,
    }))
}

/// `allocateByTemplate` on one node: its GPU model's templates equal to the request —
/// none refuses the node, one names the allocation, several leave it unnamed.
fn template_on(
    by_model: &std::collections::BTreeMap<String, Vec<String>>,
    node: &NodeInfo,
) -> Result<Option<String>, Status> {
    let vendor = node.labels.get(LABEL_GPU_VENDOR).map_or("", String::as_str);
    let model = node.labels.get(LABEL_GPU_MODEL).map_or("", String::as_str);
    let key = crate::scheduler::model::gpu_templates::key(vendor, model);
    match by_model.get(&key).map(Vec::as_slice) {
        None | Some([]) => Err(Status::unresolvable(NO_TEMPLATE)),
        Some([one]) => Ok(Some(one.clone())),
        Some(_) => Ok(None),
    }
}

/// `allocateStrategy: RequestsAsCount` (`DefaultDeviceHandler`; not GPUs, and a request
/// of several whole devices keeps its count): the amount is a number of devices, each
/// taken for 1 unit — a whole device with `exclusivePolicy: DeviceLevel`.
fn requests_as_count(req: &mut Request, hints: &hint::Hints) {
    for (kind, need) in req.by_type.iter_mut() {
        let Some(h) = hints.get(kind).filter(|h| h.is(hint::REQUESTS_AS_COUNT)) else {
            continue;
        };
        if kind == "gpu" || need.count > 1 || need.per.len() != 1 {
            continue;
        }
        let Some((name, v)) = need.per.iter().next().map(|(k, v)| (k.clone(), *v)) else {
            continue;
        };
        let unit = if h.exclusive.as_deref() == Some(hint::DEVICE_LEVEL) {
            100
        } else {
            1
        };
        need.count = v.max(0) as usize;
        need.per = [(name, unit)].into();
    }
}

/// What PreFilter learned about the pod.
struct PreState {
    req: Request,
    joint: Option<JointAllocate>,
    hints: hint::Hints,
    /// The GPU shared-resource templates the request matched, by GPU model.
    templates: Option<std::collections::BTreeMap<String, Vec<String>>>,
    scorer: Scorer,
    numa_align: bool,
}

/// The Node lock DevicePluginAdaption took at Reserve for this pod: (annotation, value).
pub fn node_lock(state: &CycleState) -> Option<&(&'static str, String)> {
    state
        .read::<adapter::Adapted>(ADAPTED_KEY)?
        .node_lock
        .as_ref()
}

/// The devices DeviceShare gave the pod in this cycle, as the annotation value.
pub fn reserved_devices(state: &CycleState) -> Option<serde_json::Value> {
    let a = state.read::<Allocations>(ALLOC_KEY)?;
    serde_json::from_str(&devices::format(a)).ok()
}

impl Plugin for DeviceShare {
    fn name(&self) -> &'static str {
        NAME
    }
    /// A node added, its Device changed, a pod gone from a node, a Reservation changed.
    fn events(&self) -> crate::scheduler::framework::events::Events {
        use crate::scheduler::framework::events::Events as E;
        E::NODE_ADD
            .or(E::DEVICE)
            .or(E::POD_ASSIGNED_DELETE)
            .or(E::RESERVATION)
    }

    fn points(&self) -> &'static [Point] {
        &[
            Point::PreFilter,
            Point::Filter,
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
        let req = match request::of_requests(&pod.requests) {
            Err(e) => return (Status::unresolvable(e.to_string()), None),
            Ok(None) => return (Status::skip(), None),
            Ok(Some(r)) => r,
        };
        let joint = match JointAllocate::of(&pod.pod) {
            Err(e) => return (Status::unresolvable(e.to_string()), None),
            Ok(j) => j,
        };
        let hints = match hint::of(&pod.pod) {
            Err(e) => return (Status::unresolvable(e.to_string()), None),
            Ok(h) => h,
        };
        let mut req = req;
        requests_as_count(&mut req, &hints);
        let templates = match self.templates_for(&req, cluster) {
            Ok(t) => t,
            Err(s) => return (s, None),
        };
        state.write(
            NAME,
            PreState {
                req,
                joint,
                hints,
                templates,
                scorer: self.scorer.clone(),
                numa_align: self.numa_align,
            },
        );
        if self.numa_align {
            // Where NodeNUMAResource records the NUMA nodes it chose, for Filter to read.
            crate::scheduler::plugins::numa::affinity::init(state);
        }
        (Status::success(), None)
    }

    fn filter(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let Some(st) = state.read::<PreState>(NAME) else {
            return Status::success();
        };
        if let Some(s) = self.share_refused(st, node) {
            return s;
        }
        match self.plan(state, st, node, cluster) {
            Ok(_) => Status::success(),
            Err(s) => s,
        }
    }

    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<i64, Status> {
        let Some(st) = state.read::<PreState>(NAME) else {
            return Ok(0);
        };
        let numa = aligned_to(state, st, node);
        Ok(with_ctx(state, node, cluster, numa, |ctx| {
            alloc::node_score(ctx, &st.req)
        })
        .unwrap_or(0))
    }

    /// A pod asking for no device (PreFilter skipped) scores 0 on every node.
    fn scores_nothing(&self, state: &CycleState, _: &PodInfo) -> bool {
        state.read::<PreState>(NAME).is_none()
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        super::taint::default_normalize(scores, false);
    }

    fn reserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
        cluster: &ClusterState,
    ) -> Status {
        let Some(st) = state.read::<PreState>(NAME) else {
            return Status::success();
        };
        let Some(n) = cluster.node(node) else {
            return Status::error(format!("node {node} not found"));
        };
        let a = match self.plan(state, st, n, cluster) {
            Err(s) => return s,
            Ok(None) => return Status::success(),
            Ok(Some(a)) => a,
        };
        match self.adapt(pod, n, &a, cluster) {
            Err(s) => return s,
            Ok(Some(adapted)) => state.write(ADAPTED_KEY, adapted),
            Ok(None) => {}
        }
        state.write(ALLOC_KEY, a);
        Status::success()
    }

    fn report(&self, state: &CycleState) -> Option<(&'static str, serde_json::Value)> {
        reserved_devices(state).map(|v| ("devices", v))
    }

    fn unreserve(&self, state: &mut CycleState, _: &PodInfo, _: &str) {
        state.remove(ALLOC_KEY);
        state.remove(ADAPTED_KEY);
    }

    fn pre_bind(
        &self,
        state: &CycleState,
        _: &PodInfo,
        _: &str,
        modified: &mut PodDraft,
    ) -> Status {
        let Some(a) = state.read::<Allocations>(ALLOC_KEY) else {
            return Status::success();
        };
        modified
            .annotations_mut()
            .insert(ANNOTATION_DEVICE_ALLOCATED.to_string(), devices::format(a));
        if let Some(adapted) = state.read::<adapter::Adapted>(ADAPTED_KEY) {
            adapter::write(adapted, modified);
        }
        Status::success()
    }
}
