//! The live scheduler's watches: each kind's events forwarded, unchanged, to the loop.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher;
use tokio::sync::mpsc;

use crate::api::scheduling::device::Device;
use crate::api::scheduling::reservation::Reservation;
use crate::api::slo::NodeMetric;
use crate::api::topology::NodeResourceTopology;
use crate::kernel::{Shutdown, Tasks};

/// Watch events, moved once through the channel (boxing them would only add allocations).
#[allow(clippy::large_enum_variant)]
pub enum Ev {
    Pod(watcher::Event<Pod>),
    Node(watcher::Event<Node>),
    Metric(watcher::Event<NodeMetric>),
    Topology(watcher::Event<NodeResourceTopology>),
    Device(watcher::Event<Device>),
    NetworkTopology(
        watcher::Event<crate::api::scheduling::network_topology::ClusterNetworkTopology>,
    ),
    Reservation(watcher::Event<Reservation>),
    Quota(watcher::Event<crate::api::quota::ElasticQuota>),
    PodGroup(watcher::Event<crate::api::quota::PodGroup>),
    /// Rare next to pods: boxed, so they do not widen every pod event.
    Storage(Box<Storage>),
    Pdb(Box<watcher::Event<k8s_openapi::api::policy::v1::PodDisruptionBudget>>),
    Owner(Box<Owner>),
    /// Questions asked of the scheduler.
    Explanation(Box<watcher::Event<crate::api::scheduling::explanation::ScheduleExplanation>>),
    /// The GPU shared-resource templates ConfigMap.
    GpuTemplates(Box<watcher::Event<k8s_openapi::api::core::v1::ConfigMap>>),
}

/// What default topology spreading reads a pod's selector from.
#[allow(clippy::large_enum_variant)]
pub enum Owner {
    ReplicaSet(watcher::Event<k8s_openapi::api::apps::v1::ReplicaSet>),
    StatefulSet(watcher::Event<k8s_openapi::api::apps::v1::StatefulSet>),
    Rc(watcher::Event<k8s_openapi::api::core::v1::ReplicationController>),
    Service(watcher::Event<k8s_openapi::api::core::v1::Service>),
}

/// The storage kinds the volume plugins read.
#[allow(clippy::large_enum_variant)]
pub enum Storage {
    Pv(watcher::Event<k8s_openapi::api::core::v1::PersistentVolume>),
    Pvc(watcher::Event<k8s_openapi::api::core::v1::PersistentVolumeClaim>),
    Class(watcher::Event<k8s_openapi::api::storage::v1::StorageClass>),
    CsiNode(watcher::Event<k8s_openapi::api::storage::v1::CSINode>),
    CsiDriver(watcher::Event<k8s_openapi::api::storage::v1::CSIDriver>),
    Capacity(watcher::Event<k8s_openapi::api::storage::v1::CSIStorageCapacity>),
}

/// A pod as the scheduler keeps it for its whole life: of its status only what the
/// scheduler reads (phase, the PodScheduled condition, the nominated node, QoS class, the
/// start time preemption compares);
/// container statuses, IPs and the rest are dropped on arrival.
pub fn slim_pod(pod: &mut k8s_openapi::api::core::v1::Pod) {
    if let Some(s) = pod.status.as_mut() {
        let kept = k8s_openapi::api::core::v1::PodStatus {
            phase: s.phase.take(),
            conditions: s.conditions.take().map(|cs| {
                cs.into_iter()
                    .filter(|c| c.type_ == "PodScheduled")
                    .collect()
            }),
            nominated_node_name: s.nominated_node_name.take(),
            start_time: s.start_time.take(),
            qos_class: s.qos_class.take(),
            ..Default::default()
        };
        *s = kept;
    }
}

/// A node as the scheduler keeps it: of its status only capacity, allocatable and images
/// (which the cluster state turns into a name → size map).
pub fn slim_node(node: &mut Node) {
    if let Some(s) = node.status.as_mut() {
        let kept = k8s_openapi::api::core::v1::NodeStatus {
            allocatable: s.allocatable.take(),
            capacity: s.capacity.take(),
            // ImageLocality's: kept as name → size by the cluster state, then dropped.
            images: s.images.take(),
            ..Default::default()
        };
        *s = kept;
    }
}

/// Forwards one kind's watch events to the loop.
pub fn watch<K, F>(
    client: kube::Client,
    what: &'static str,
    wrap: F,
    tx: mpsc::UnboundedSender<Ev>,
    tasks: &Tasks,
    shutdown: &Shutdown,
) where
    K: crate::kernel::watch::Watchable,
    F: Fn(watcher::Event<K>) -> Ev + Send + 'static,
{
    let cfg = watcher::Config::default().page_size(500);
    let index = crate::kernel::pump::forward(move |e: watcher::Event<K>| tx.send(wrap(e)).is_ok());
    let name = format!("scheduler/watch/{what}");
    crate::kernel::pump::spawn::<K, _>(tasks, name, client, None, cfg, index, shutdown);
}
