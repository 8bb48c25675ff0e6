//! What the framework knows about a pod and a node, computed once when the object enters
//! the cache (requests, ports, priority), so a scheduling cycle only reads.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};

use super::res::{R_PODS, ResVec};
use crate::api::extension::priority::{PriorityClass, pod_priority_class_with_default};
use crate::api::extension::resources::{CPU, MEMORY};
use crate::api::extension::resourcestatus::CpuAlloc;
use crate::api::pod::{Amounts, amounts, container_requests, pod_limits, pod_requests};
use crate::scheduler::model::topology::TopologyOptions;

/// Requests a pod without cpu/memory requests counts with when scoring (upstream).
pub const DEFAULT_MILLI_CPU: i64 = 100;
pub const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;

/// A host port in use: (protocol, host IP, port).
pub type HostPort = (String, String, i32);

#[derive(Debug, Clone)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    pub key: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub requests: Amounts,
    /// `requests` and the pod's limits as dense vectors (what the hot paths read; the
    /// limits are kept only in this form: 10,000 pending pods held two maps each).
    pub req: ResVec,
    pub lim: ResVec,
    /// (cpu milli, memory) with upstream's non-zero defaults, for scoring.
    pub non_zero: (i64, i64),
    pub priority: i32,
    pub class: PriorityClass,
    pub node_name: Option<String>,
    /// When the pod was bound or assumed (ms since the epoch), for LoadAware estimation.
    pub scheduled_at_ms: Option<i64>,
    pub host_ports: Vec<HostPort>,
    pub daemonset: bool,
    pub labels: BTreeMap<String, String>,
    pub created_ms: i64,
    /// `status.startTime` (ms since the epoch): preemption keeps the longest-running pods.
    pub started_ms: Option<i64>,
    /// The pod has pod affinity or anti-affinity terms (required or preferred).
    pub has_pod_affinity: bool,
    /// The CPUs / NUMA resources NodeNUMAResource gave it (`resource-status`).
    pub cpu_alloc: Option<Arc<CpuAlloc>>,
    /// The UID of the reservation it was placed into (`reservation-allocated`).
    pub reservation_allocated: Option<String>,
    /// Set on a reservation's reserve pod: the reservation's name.
    pub reserve_of: Option<String>,
    /// The gang (`namespace/name`) the pod belongs to, if any.
    pub gang: Option<String>,
    /// The devices DeviceShare gave it (`device-allocated`).
    pub devices: Option<Arc<crate::scheduler::model::devices::Allocations>>,
    /// What plugins derive from the pod (its usage estimate, …), computed once.
    pub memo: super::memo::Memo,
}

fn ts_ms(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    t.0.as_millisecond()
}

impl PodInfo {
    pub fn new(pod: Arc<Pod>) -> PodInfo {
        let meta = &pod.metadata;
        let namespace = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let spec = pod.spec.as_ref();
        let scheduled_at_ms = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.type_ == "PodScheduled" && c.status == "True")
            })
            .and_then(|c| c.last_transition_time.as_ref())
            .map(ts_ms);
        let (requests, limits) = (pod_requests(&pod), pod_limits(&pod));
        PodInfo {
            key: format!("{namespace}/{name}"),
            uid: meta.uid.clone().unwrap_or_default(),
            req: ResVec::from_amounts(&requests),
            lim: ResVec::from_amounts(&limits),
            requests,
            non_zero: non_zero_requests(&pod),
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            class: pod_priority_class_with_default(&pod),
            node_name: spec
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            scheduled_at_ms,
            host_ports: host_ports(&pod),
            daemonset: meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "DaemonSet" && o.controller == Some(true)),
            labels: meta.labels.clone().unwrap_or_default(),
            has_pod_affinity: spec
                .and_then(|s| s.affinity.as_ref())
                .is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some()),
            created_ms: meta.creation_timestamp.as_ref().map(ts_ms).unwrap_or(0),
            started_ms: pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(ts_ms),
            cpu_alloc: CpuAlloc::of(&pod).map(Arc::new),
            reservation_allocated: reservation_allocated(&pod),
            reserve_of: None,
            gang: crate::api::scheduling::gang::gang_of(&pod),
            devices: crate::scheduler::model::devices::of_annotation(&pod).map(Arc::new),
            memo: Default::default(),
            namespace,
            name,
            pod,
        }
    }

    /// Drops the containers of a pod counted on a node, once everything the scheduler reads
    /// from them (requests, limits, host ports) is in this PodInfo: nothing reads a placed
    /// pod's containers, and they were a third of what each placed pod kept (a `Container`
    /// alone is 2 KiB). Only when this PodInfo holds the pod alone.
    pub fn forget_containers(&mut self) {
        if let Some(spec) = Arc::get_mut(&mut self.pod).and_then(|p| p.spec.as_mut()) {
            spec.containers = Vec::new();
            spec.init_containers = None;
            spec.ephemeral_containers = None;
        }
    }

    pub fn spec(&self) -> Option<&k8s_openapi::api::core::v1::PodSpec> {
        self.pod.spec.as_ref()
    }
}

/// The `uid` of `scheduling.koordinator.sh/reservation-allocated` (`{"name","uid"}`).
fn reservation_allocated(pod: &Pod) -> Option<String> {
    let raw = pod
        .metadata
        .annotations
        .as_ref()?
        .get(crate::api::extension::keys::ANNOTATION_RESERVATION_ALLOCATED)?;
    let v: serde_json::Value = serde_json::from_str(raw).ok()?;
    v.get("uid")?.as_str().map(str::to_string)
}

fn non_zero_requests(pod: &Pod) -> (i64, i64) {
    let Some(spec) = pod.spec.as_ref() else {
        return (0, 0);
    };
    let mut cpu = 0i64;
    let mut mem = 0i64;
    for c in &spec.containers {
        let r = container_requests(c);
        cpu = cpu.saturating_add(
            r.get(CPU)
                .copied()
                .filter(|v| *v > 0)
                .unwrap_or(DEFAULT_MILLI_CPU),
        );
        mem = mem.saturating_add(
            r.get(MEMORY)
                .copied()
                .filter(|v| *v > 0)
                .unwrap_or(DEFAULT_MEMORY),
        );
    }
    // Pod-level requests replace the containers' (defaults included), as kube's
    // `PodRequests` does before the non-zero defaults matter.
    let own = crate::api::pod::pod_level(spec, |r| r.requests.as_ref());
    cpu = own.get(CPU).copied().unwrap_or(cpu);
    mem = own.get(MEMORY).copied().unwrap_or(mem);
    let overhead = amounts(spec.overhead.as_ref());
    (
        cpu.saturating_add(overhead.get(CPU).copied().unwrap_or(0)),
        mem.saturating_add(overhead.get(MEMORY).copied().unwrap_or(0)),
    )
}

fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .map(|p| {
            (
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                p.host_ip
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".into()),
                p.host_port.unwrap_or(0),
            )
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub name: String,
    /// The name again, shared: a cycle keys a verdict for each of thousands of nodes by it
    /// without copying the text.
    pub key: Arc<str>,
    pub node: Arc<Node>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub allocatable: Amounts,
    pub requested: Amounts,
    /// `allocatable` and `requested` as dense vectors.
    pub alloc: ResVec,
    pub req: ResVec,
    pub non_zero_requested: (i64, i64),
    pub pods: Vec<Arc<PodInfo>>,
    pub used_ports: HashSet<HostPort>,
    /// The node's NodeResourceTopology as NodeNUMAResource reads it.
    pub topology: Option<Arc<TopologyOptions>>,
    /// Its images by normalized name → size in bytes (`status.images`; ImageLocality).
    pub images: Option<Arc<std::collections::HashMap<String, i64>>>,
    /// What plugins derive from this state of the node (emptied on every change).
    pub memo: super::memo::Memo,
}

impl NodeInfo {
    /// Starts loading what Filter and Score read from behind this node's pointers (its
    /// memo values, the Node object), a few nodes before the cycle reaches it.
    #[inline]
    pub fn prefetch(&self) {
        self.memo.prefetch();
        crate::os::tuning::prefetch(&*self.node);
        if let Some(t) = &self.topology {
            crate::os::tuning::prefetch(&**t);
        }
    }

    pub fn new(node: Arc<Node>) -> NodeInfo {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut info = NodeInfo {
            key: name.as_str().into(),
            name,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            unschedulable: false,
            allocatable: Amounts::new(),
            requested: Amounts::new(),
            alloc: ResVec::default(),
            req: ResVec::default(),
            non_zero_requested: (0, 0),
            pods: Vec::new(),
            used_ports: HashSet::new(),
            topology: None,
            images: None,
            memo: Default::default(),
            node: node.clone(),
        };
        info.set_node(node);
        info
    }

    /// Replaces the Node object, keeping the pods.
    pub fn set_node(&mut self, node: Arc<Node>) {
        self.labels = node.metadata.labels.clone().unwrap_or_default();
        let spec = node.spec.as_ref();
        self.taints = spec.and_then(|s| s.taints.clone()).unwrap_or_default();
        self.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        self.allocatable = amounts(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
        self.alloc = ResVec::from_amounts(&self.allocatable);
        self.node = node;
        self.changed();
    }

    /// A new state of the node (its object, pods, metric or topology): what plugins
    /// derived from the old state is dropped.
    pub fn changed(&mut self) {
        self.memo = Default::default();
    }

    pub fn allowed_pods(&self) -> i64 {
        self.alloc.get(R_PODS)
    }

    pub fn add_pod(&mut self, p: Arc<PodInfo>) {
        for (k, v) in &p.requests {
            let e = self.requested.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
        self.req.add(&p.req);
        self.non_zero_requested.0 += p.non_zero.0;
        self.non_zero_requested.1 += p.non_zero.1;
        self.used_ports.extend(p.host_ports.iter().cloned());
        self.pods.push(p);
        self.changed();
    }

    /// Removes the pod with `key`; false when it was not here.
    pub fn remove_pod(&mut self, key: &str) -> bool {
        let Some(i) = self.pods.iter().position(|p| p.key == key) else {
            return false;
        };
        let p = self.pods.swap_remove(i);
        for (k, v) in &p.requests {
            if let Some(e) = self.requested.get_mut(k) {
                *e = e.saturating_sub(*v);
            }
        }
        self.req.sub(&p.req);
        self.non_zero_requested.0 -= p.non_zero.0;
        self.non_zero_requested.1 -= p.non_zero.1;
        self.used_ports = self
            .pods
            .iter()
            .flat_map(|p| p.host_ports.iter().cloned())
            .collect();
        self.changed();
        true
    }
}

/// The pod as PreBind plugins leave it: copied on the first change, so the pods no plugin
/// changes (most of them) cost no copy of the whole object.
pub struct PodDraft<'a> {
    original: &'a k8s_openapi::api::core::v1::Pod,
    copy: Option<k8s_openapi::api::core::v1::Pod>,
}

impl<'a> PodDraft<'a> {
    pub fn new(original: &'a k8s_openapi::api::core::v1::Pod) -> PodDraft<'a> {
        PodDraft {
            original,
            copy: None,
        }
    }

    /// The pod with the changes so far.
    pub fn get(&self) -> &k8s_openapi::api::core::v1::Pod {
        self.copy.as_ref().unwrap_or(self.original)
    }

    pub fn get_mut(&mut self) -> &mut k8s_openapi::api::core::v1::Pod {
        let original = self.original;
        self.copy.get_or_insert_with(|| original.clone())
    }

    pub fn annotations_mut(&mut self) -> &mut BTreeMap<String, String> {
        self.get_mut()
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
    }

    /// The changed pod, if it differs from the original.
    pub fn changed(self) -> Option<k8s_openapi::api::core::v1::Pod> {
        let original = self.original;
        self.copy.filter(|c| c != original)
    }
}

/// kube-scheduler's `normalizedImageName`: a name without a tag gets `:latest`.
pub fn normalized_image_name(name: &str) -> String {
    let at = |c: char| name.rfind(c).map_or(-1, |i| i as i64);
    if at(':') <= at('/') {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

/// Every name of every image on a node, normalized, with the image's size.
pub fn image_sizes(
    list: &[k8s_openapi::api::core::v1::ContainerImage],
) -> std::collections::HashMap<String, i64> {
    list.iter()
        .flat_map(|i| {
            let size = i.size_bytes.unwrap_or(0);
            i.names
                .iter()
                .flatten()
                .map(move |n| (normalized_image_name(n), size))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::PodDraft;

    /// A pod counted on a node keeps no containers; what they ask stays counted.
    #[test]
    fn a_placed_pod_keeps_its_requests_not_its_containers() {
        use crate::scheduler::test_util::{cluster, node_json};
        let mut c = cluster(vec![node_json("n1", "4", "8Gi")]);
        let pod = |node: Option<&str>| {
            let mut v = serde_json::json!({"metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "app",
                    "resources": {"requests": {"cpu": "1"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}]}]}});
            if let Some(n) = node {
                v["spec"]["nodeName"] = n.into();
            }
            std::sync::Arc::new(serde_json::from_value(v).unwrap())
        };
        let pending = c.upsert_pod(pod(None));
        assert_eq!(pending.pod.spec.as_ref().unwrap().containers.len(), 1);
        let placed = c.upsert_pod(pod(Some("n1")));
        assert!(placed.pod.spec.as_ref().unwrap().containers.is_empty());
        let n = c.node("n1").unwrap();
        assert_eq!(n.requested["cpu"], 1000);
        assert_eq!(n.used_ports.len(), 1);
        assert_eq!(n.pods[0].requests, placed.requests);
    }

    #[test]
    fn a_draft_copies_the_pod_only_when_changed() {
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}})).unwrap();
        let draft = PodDraft::new(&pod);
        assert!(
            draft.changed().is_none(),
            "nothing written: no copy, no patch"
        );
        let mut draft = PodDraft::new(&pod);
        draft.annotations_mut().insert("a".into(), "1".into());
        assert_eq!(draft.get().metadata.annotations.as_ref().unwrap()["a"], "1");
        let changed = draft.changed().unwrap();
        assert_eq!(changed.metadata.annotations.unwrap()["a"], "1");
        assert!(
            pod.metadata.annotations.is_none(),
            "the original is untouched"
        );
        let mut same = PodDraft::new(&pod);
        same.get_mut();
        assert!(
            same.changed().is_none(),
            "a copy equal to the original is no change"
        );
    }
}
