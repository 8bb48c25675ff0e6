//! The scheduler's view of the cluster: nodes with the pods on them (bound and assumed),
//! NodeMetrics, and the clock. One owner applies watch events between cycles; a cycle
//! only reads it, so there are no locks and no per-cycle copies.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::metric::MetricInfo;
use super::types::{NodeInfo, PodInfo};
use crate::api::slo::NodeMetric;
use crate::api::topology::NodeResourceTopology;
use crate::scheduler::model::topology::TopologyOptions;

#[derive(Default)]
pub struct ClusterState {
    pub nodes: Vec<NodeInfo>,
    index: HashMap<String, usize>,
    /// Pod key → node it is counted on.
    placed: HashMap<String, String>,
    pub metrics: HashMap<String, Arc<MetricInfo>>,
    /// Reservations by name, and what their owners hold (see `reservations.rs`).
    pub reservations: HashMap<String, crate::scheduler::model::reservation::ReservationInfo>,
    pub(super) reservation_by_uid: HashMap<String, String>,
    /// ReservationArgs' `reservationSelectorIndex`, when a profile turns it on.
    pub reservation_index: Option<crate::scheduler::model::reservation_index::SelectorIndex>,
    pub(super) reservation_owners:
        HashMap<String, std::collections::BTreeMap<String, crate::api::pod::Amounts>>,
    /// NodeNUMAResource's view of each node's NodeResourceTopology, by node name.
    pub topologies: HashMap<String, Arc<TopologyOptions>>,
    /// DeviceShare's view of each node's Device, by node name.
    pub devices: HashMap<String, Arc<crate::scheduler::model::devices::NodeDevices>>,
    /// DeviceShare's GPU shared-resource templates (the `gpu-shared-resource-templates`
    /// ConfigMap).
    pub gpu_templates: Arc<crate::scheduler::model::gpu_templates::GpuTemplates>,
    /// Pods (and reserve pods) counted on a node the watch has not shown yet.
    orphans: HashMap<String, Vec<Arc<PodInfo>>>,
    /// Pods assumed by this scheduler and not yet confirmed by the watch.
    pub assumed: HashMap<String, String>,
    pub now_ms: i64,
    /// Placed pods with pod (anti-)affinity terms: InterPodAffinity skips its scan at 0.
    pub pods_with_affinity: usize,
    /// ElasticQuota accounting (empty unless a profile enables ElasticQuota).
    pub quotas: super::quotas::QuotaState,
    /// Coscheduling's gangs (empty unless a profile enables Coscheduling).
    pub gangs: super::gangs::GangState,
    /// Preemptors waiting on the node PostFilter nominated.
    pub nominated: super::nominated::Nominated,
    /// PodDisruptionBudgets by `namespace/name` (DefaultPreemption spares what they protect).
    pub pdbs:
        std::collections::BTreeMap<String, Arc<k8s_openapi::api::policy::v1::PodDisruptionBudget>>,
    /// How many nodes have each image (normalized name; ImageLocality's spread).
    pub image_nodes: HashMap<String, u32>,
    /// Services' and controllers' selectors (default topology spreading).
    pub owners: crate::scheduler::model::owners::Owners,
    /// PersistentVolumes, claims, StorageClasses and CSINodes, with Reserve's assumptions.
    pub volumes: crate::scheduler::model::volumes::Volumes,
    /// The network-topology tree (a ClusterNetworkTopology `default` over the nodes), when
    /// the network-topology manager runs.
    pub network_topology: Option<Arc<crate::scheduler::model::network_topology::Tree>>,
    /// Each node's position in name order (ties between equal scores go to the first).
    rank: std::sync::OnceLock<Vec<u32>>,
}

impl ClusterState {
    /// Where node `name` sits in [`ClusterState::nodes`].
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.index.get(name).map(|i| &self.nodes[*i])
    }

    fn node_mut(&mut self, name: &str) -> Option<&mut NodeInfo> {
        self.index.get(name).copied().map(|i| &mut self.nodes[i])
    }

    pub fn upsert_node(&mut self, mut node: Arc<Node>) {
        use crate::scheduler::model::transform;
        if transform::node_needs(&node) {
            transform::transform_node(Arc::make_mut(&mut node));
        }
        // The image list is kept as name → size in the NodeInfo, not in the object.
        let images = node
            .status
            .as_ref()
            .and_then(|s| s.images.as_ref())
            .map(|list| Arc::new(super::types::image_sizes(list)));
        if images.is_some()
            && let Some(s) = Arc::make_mut(&mut node).status.as_mut()
        {
            s.images = None;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let quotas = self.quotas.enabled();
        let old_images = self.node(&name).and_then(|n| n.images.clone());
        count_images(&mut self.image_nodes, old_images.as_deref(), -1);
        count_images(&mut self.image_nodes, images.as_deref(), 1);
        match self.node_mut(&name) {
            Some(n) => {
                let before = quotas.then(|| n.allocatable.clone());
                n.set_node(node);
                n.images = images;
                if before.is_some_and(|b| b != n.allocatable) {
                    self.quotas.invalidate();
                }
            }
            None => {
                self.quotas.invalidate();
                let mut info = NodeInfo::new(node);
                info.images = images;
                info.topology = self.topologies.get(&name).cloned();
                for p in self.orphans.remove(&name).unwrap_or_default() {
                    self.pods_with_affinity += p.has_pod_affinity as usize;
                    info.add_pod(p);
                }
                self.index.insert(name, self.nodes.len());
                self.nodes.push(info);
                self.rank = Default::default();
            }
        }
    }

    /// An annotation the scheduler is about to write on a node, assumed until the watch
    /// brings the node back.
    pub fn annotate_node(&mut self, name: &str, (key, value): &(&str, String)) {
        let Some(n) = self.node(name) else {
            return;
        };
        let mut node = (*n.node).clone();
        let annotations = node
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(key.to_string(), value.clone());
        self.upsert_node(Arc::new(node));
    }

    pub fn remove_node(&mut self, name: &str) {
        let Some(i) = self.index.remove(name) else {
            return;
        };
        let removed = self.nodes.swap_remove(i);
        count_images(&mut self.image_nodes, removed.images.as_deref(), -1);
        self.rank = Default::default();
        self.quotas.invalidate();
        if i < self.nodes.len() {
            self.index.insert(self.nodes[i].name.clone(), i);
        }
        for p in removed.pods {
            self.placed.remove(&p.key);
            self.assumed.remove(&p.key);
            self.pods_with_affinity -= p.has_pod_affinity as usize;
        }
    }

    /// Node index → position in name order.
    pub fn name_rank(&self) -> &[u32] {
        self.rank.get_or_init(|| {
            let mut order: Vec<usize> = (0..self.nodes.len()).collect();
            order.sort_by(|a, b| self.nodes[*a].name.cmp(&self.nodes[*b].name));
            let mut rank = vec![0u32; self.nodes.len()];
            for (pos, i) in order.into_iter().enumerate() {
                rank[i] = pos as u32;
            }
            rank
        })
    }

    /// Where a pod is counted, if anywhere.
    pub fn placement(&self, key: &str) -> Option<&str> {
        self.placed.get(key).map(String::as_str)
    }

    /// A pod from the watch: counted on its node when bound and not finished; otherwise
    /// dropped from wherever it was. Confirms an assumed pod. Returns what it made of the
    /// pod, so the queue does not compute it again.
    pub fn upsert_pod(&mut self, mut pod: Arc<Pod>) -> Arc<PodInfo> {
        use crate::scheduler::model::transform;
        if transform::pod_needs(&pod) {
            transform::transform_pod(Arc::make_mut(&mut pod));
        }
        let mut info = PodInfo::new(pod);
        let finished = info
            .pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        let terminating = info.pod.metadata.deletion_timestamp.is_some();
        if info.node_name.is_some() && !finished {
            info.forget_containers();
        }
        let pod = info.pod.clone();
        let info = Arc::new(info);
        let key = info.key.clone();
        // A terminating pod still counts against its quota until it is gone (Koordinator,
        // with ElasticQuotaIgnoreTerminatingPod off); a finished one does not.
        if self.gangs.enabled() {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            let child = super::gangs::Child {
                bound: info.node_name.is_some(),
                running: phase == Some("Running"),
                succeeded: phase == Some("Succeeded"),
                failed: phase == Some("Failed"),
            };
            self.gangs.track(&pod, &key, child);
            self.gangs.keep_unbound(&info);
        }
        if finished {
            self.quotas.untrack(&key);
        } else if self.quotas.enabled() {
            let assigned = info.node_name.is_some() || self.assumed.contains_key(&key);
            self.quotas.track(&info, assigned);
        }
        self.track_nomination(&info, finished || terminating);
        match info.node_name.clone() {
            // A terminating pod holds its node's resources until it is gone, as in
            // kube-scheduler's cache: a preemptor waits for its victims to leave.
            Some(node) if !finished => {
                if self.assumed.remove(&key).is_some() {
                    self.volumes.settled(&key);
                }
                self.remove_pod(&key);
                self.place(info.clone(), &node);
            }
            _ if self.assumed.contains_key(&key) => {}
            _ => self.remove_pod(&key),
        }
        info
    }

    pub(super) fn place(&mut self, info: Arc<PodInfo>, node: &str) {
        let key = info.key.clone();
        let affinity = info.has_pod_affinity;
        let owner_of = info.reservation_allocated.clone();
        let requests = info.requests.clone();
        self.placed.insert(key.clone(), node.to_string());
        match self.node_mut(node) {
            Some(n) => {
                n.add_pod(info);
                self.pods_with_affinity += affinity as usize;
            }
            // The watch may show a pod (or a reservation) before its node: it waits for it.
            None => self.orphans.entry(node.to_string()).or_default().push(info),
        }
        if let Some(uid) = owner_of {
            self.owner_placed(&uid, key, requests);
        }
    }

    pub fn remove_pod(&mut self, key: &str) {
        self.assumed.remove(key);
        let Some(node) = self.placed.remove(key) else {
            return;
        };
        let mut owner_of = None;
        if let Some(n) = self.node_mut(&node) {
            let p = n.pods.iter().find(|p| p.key == key);
            let affinity = p.is_some_and(|p| p.has_pod_affinity);
            owner_of = p.and_then(|p| p.reservation_allocated.clone());
            n.remove_pod(key);
            self.pods_with_affinity -= affinity as usize;
        } else if let Some(list) = self.orphans.get_mut(&node) {
            if let Some(i) = list.iter().position(|p| p.key == key) {
                owner_of = list.remove(i).reservation_allocated.clone();
            }
            if list.is_empty() {
                self.orphans.remove(&node);
            }
        }
        if let Some(uid) = owner_of {
            self.owner_removed(&uid, key);
        }
    }

    /// Counts `pod` on `node` before the binding is confirmed (Reserve).
    pub fn assume(&mut self, pod: &PodInfo, node: &str) {
        self.nominated.clear(&pod.key);
        let mut info = pod.clone();
        info.node_name = Some(node.to_string());
        info.scheduled_at_ms = Some(self.now_ms);
        self.remove_pod(&pod.key);
        if self.quotas.enabled() {
            self.quotas.track(&info, true);
        }
        self.place(Arc::new(info), node);
        self.assumed.insert(pod.key.clone(), node.to_string());
    }

    /// Undoes [`assume`] after a failed binding: the pod is pending again.
    pub fn forget(&mut self, key: &str) {
        self.volumes.revert(key);
        if self.assumed.contains_key(key) {
            self.remove_pod(key);
            self.quotas.set_assigned(key, false);
        }
    }

    /// A pod deleted from the API: gone from its node and from every account.
    pub fn delete_pod(&mut self, key: &str) {
        self.volumes.revert(key);
        self.nominated.clear(key);
        self.remove_pod(key);
        self.quotas.untrack(key);
        self.gangs.untrack(key);
    }

    /// A pending pod's `status.nominatedNodeName` nominates it (an update without one keeps
    /// what this scheduler nominated: the status write may not have landed yet); a placed,
    /// finished or terminating pod is nominated nowhere.
    fn track_nomination(&mut self, info: &Arc<PodInfo>, gone: bool) {
        if gone || info.node_name.is_some() {
            self.nominated.clear(&info.key);
            return;
        }
        let from_status = info
            .pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty());
        let node = from_status
            .or_else(|| self.nominated.node_of(&info.key))
            .map(str::to_string);
        if let Some(node) = node {
            self.nominated.set(info.clone(), &node);
        }
    }

    pub fn upsert_pdb(&mut self, pdb: Arc<k8s_openapi::api::policy::v1::PodDisruptionBudget>) {
        let m = &pdb.metadata;
        let key = format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default()
        );
        self.pdbs.insert(key, pdb);
    }

    /// Σ allocatable of every node: what the main quota tree shares.
    pub fn total_allocatable(&self) -> crate::api::pod::Amounts {
        let mut total = crate::api::pod::Amounts::new();
        for n in &self.nodes {
            crate::api::pod::add(&mut total, &n.allocatable);
        }
        total
    }

    /// Every quota's runtime (cached until quotas, pods or nodes change).
    pub fn quota_runtime(
        &self,
    ) -> Arc<std::collections::BTreeMap<String, crate::api::pod::Amounts>> {
        self.quotas.runtime(|| self.total_allocatable())
    }

    /// A node's NodeMetric; the node changes with it (plugins derive from both).
    pub fn upsert_metric(&mut self, m: Arc<NodeMetric>) {
        if let Some(name) = m.metadata.name.clone() {
            if let Some(n) = self.node_mut(&name) {
                n.changed();
            }
            self.metrics.insert(name, Arc::new(MetricInfo::new(m)));
        }
    }

    pub fn remove_metric(&mut self, name: &str) {
        self.metrics.remove(name);
        if let Some(n) = self.node_mut(name) {
            n.changed();
        }
    }

    pub fn topology(&self, node: &str) -> Option<&Arc<TopologyOptions>> {
        self.topologies.get(node)
    }

    /// Parses a NodeResourceTopology once, when it changes.
    pub fn upsert_topology(&mut self, nrt: &NodeResourceTopology) {
        if let Some(name) = nrt.metadata.name.clone() {
            let t = Arc::new(TopologyOptions::from_nrt(nrt));
            if let Some(n) = self.node_mut(&name) {
                n.topology = Some(t.clone());
                n.changed();
            }
            self.topologies.insert(name, t);
        }
    }

    /// Parses a Device once, when it changes.
    pub fn upsert_device(&mut self, d: &crate::api::scheduling::device::Device) {
        if let Some(name) = d.metadata.name.clone() {
            let parsed = Arc::new(crate::scheduler::model::devices::NodeDevices::from_device(
                d,
            ));
            self.devices.insert(name, parsed);
        }
    }

    pub fn remove_device(&mut self, name: &str) {
        self.devices.remove(name);
    }

    pub fn remove_topology(&mut self, name: &str) {
        self.topologies.remove(name);
        if let Some(n) = self.node_mut(name) {
            n.topology = None;
            n.changed();
        }
    }
}

fn count_images(counts: &mut HashMap<String, u32>, images: Option<&HashMap<String, i64>>, by: i32) {
    for name in images.into_iter().flat_map(|m| m.keys()) {
        let n = counts.entry(name.clone()).or_default();
        *n = n.saturating_add_signed(by);
        if *n == 0 {
            counts.remove(name);
        }
    }
}

impl ClusterState {
    /// kube-scheduler's `PodEligibleToPreemptOthers` "terminating pod on the nominated
    /// node": the pod's victims there are still leaving, so it preempts nothing more.
    pub fn victims_leaving(&self, pod: &PodInfo) -> bool {
        let Some(node) = self.nominated.node_of(&pod.key).and_then(|n| self.node(n)) else {
            return false;
        };
        node.pods
            .iter()
            .any(|p| p.priority < pod.priority && p.pod.metadata.deletion_timestamp.is_some())
    }
}
