//! Warm caches of the objects the controllers read (every replica keeps them, so a new
//! leader starts warm), and the set of nodes whose inputs changed since the last pass.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use tokio::sync::Notify;

use crate::api::scheduling::device::Device;
use crate::api::slo::{NodeMetric, NodeSLO};
use crate::kernel::{Shutdown, Tasks};

/// Nodes to reconcile next; `all` after a resync or a config change.
#[derive(Default)]
pub struct Dirty {
    nodes: Mutex<(bool, HashSet<String>)>,
    pub notify: Notify,
}

impl Dirty {
    pub fn mark(&self, node: &str) {
        if node.is_empty() {
            return;
        }
        self.lock().1.insert(node.to_string());
        self.notify.notify_one();
    }

    pub fn mark_all(&self) {
        self.lock().0 = true;
        self.notify.notify_one();
    }

    /// Takes the pending set: `None` means every node.
    pub fn take(&self) -> Option<HashSet<String>> {
        let mut g = self.lock();
        let all = std::mem::take(&mut g.0);
        let set = std::mem::take(&mut g.1);
        (!all).then_some(set)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, HashSet<String>)> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Clone)]
pub struct Caches {
    pub nodes: Store<Node>,
    pub pods: Store<Pod>,
    pub metrics: Store<NodeMetric>,
    pub slos: Store<NodeSLO>,
    /// Each node's Device (GPUDeviceResource / RDMADeviceResource).
    pub devices: Store<Device>,
    /// Each node's NodeResourceTopology (CPUNormalization reads its `cpu-basic-info`).
    pub topologies: Store<crate::api::topology::NodeResourceTopology>,
}

impl Caches {
    pub fn start(
        client: &kube::Client,
        dirty: &Arc<Dirty>,
        tasks: &Tasks,
        shutdown: &Shutdown,
    ) -> Caches {
        let by_name = |n: &Node| n.metadata.name.clone();
        let pod_node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
        let metric_node = |m: &NodeMetric| m.metadata.name.clone();
        let slo_node = |m: &NodeSLO| m.metadata.name.clone();
        let device_node = |d: &Device| d.metadata.name.clone();
        let nrt_node = |t: &crate::api::topology::NodeResourceTopology| t.metadata.name.clone();
        Caches {
            nodes: reflect(client.clone(), "nodes", by_name, dirty, tasks, shutdown),
            pods: reflect(client.clone(), "pods", pod_node, dirty, tasks, shutdown),
            metrics: reflect(
                client.clone(),
                "nodemetrics",
                metric_node,
                dirty,
                tasks,
                shutdown,
            ),
            slos: reflect(client.clone(), "nodeslos", slo_node, dirty, tasks, shutdown),
            devices: reflect(
                client.clone(),
                "devices",
                device_node,
                dirty,
                tasks,
                shutdown,
            ),
            topologies: reflect(
                client.clone(),
                "noderesourcetopologies",
                nrt_node,
                dirty,
                tasks,
                shutdown,
            ),
        }
    }

    /// Resolves once every cache has listed; false if the process drains first.
    pub async fn wait_synced(&self, shutdown: &Shutdown) -> bool {
        let all = async {
            let _ = self.nodes.wait_until_ready().await;
            let _ = self.pods.wait_until_ready().await;
            let _ = self.metrics.wait_until_ready().await;
            let _ = self.slos.wait_until_ready().await;
            let _ = self.devices.wait_until_ready().await;
            let _ = self.topologies.wait_until_ready().await;
        };
        tokio::select! {
            _ = all => true,
            _ = shutdown.draining() => false,
        }
    }
}

/// A reflector whose every event marks the node it concerns.
pub(crate) fn reflect<K>(
    client: Client,
    what: &'static str,
    node_of: fn(&K) -> Option<String>,
    dirty: &Arc<Dirty>,
    tasks: &Tasks,
    shutdown: &Shutdown,
) -> Store<K>
where
    K: crate::kernel::watch::Watchable,
{
    let dirty = dirty.clone();
    let (reader, index) = crate::kernel::pump::reflect::<K, _>(move |o| match o {
        Some(o) => {
            if let Some(n) = node_of(o) {
                dirty.mark(&n);
            }
        }
        None => dirty.mark_all(),
    });
    let cfg = watcher::Config::default().page_size(500);
    let name = format!("manager/cache/{what}");
    crate::kernel::pump::spawn::<K, _>(tasks, name, client, None, cfg, index, shutdown);
    reader
}
