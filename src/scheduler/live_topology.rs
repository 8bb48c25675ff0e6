//! The network-topology manager (Koordinator's `--enable-network-topology-manager`): the
//! tree of the ClusterNetworkTopology `default` over the nodes, rebuilt at most once a
//! second after a node or the topology changed (Koordinator rebuilds every 10 s), and its
//! status published for the leader to write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::watcher::Event;

use super::Scheduler;
use crate::api::scheduling::network_topology::{
    ClusterNetworkTopology, ClusterNetworkTopologyStatus, DEFAULT_NAME,
};
use crate::scheduler::framework::ClusterState;
use crate::scheduler::model::network_topology;
use crate::scheduler::status_writer::Publisher;

const REBUILD_EVERY: Duration = Duration::from_secs(1);

pub struct Manager {
    cnt: Option<Arc<ClusterNetworkTopology>>,
    dirty: bool,
    built: Option<Instant>,
    generation: u64,
    /// The topology was listed (the scheduler places nothing before).
    pub synced: bool,
    pub status: Publisher<ClusterNetworkTopologyStatus>,
}

impl Manager {
    /// A manager whose status goes nowhere (tests that drive the scheduler in process).
    pub fn detached() -> Manager {
        Manager::new(Publisher::detached(figures, version))
    }

    pub fn new(status: Publisher<ClusterNetworkTopologyStatus>) -> Manager {
        Manager {
            cnt: None,
            dirty: false,
            built: None,
            generation: 0,
            synced: false,
            status,
        }
    }
}

/// The status to write, by object name.
pub fn figures(
    c: &ClusterState,
) -> std::collections::BTreeMap<String, ClusterNetworkTopologyStatus> {
    c.network_topology
        .iter()
        .map(|t| (DEFAULT_NAME.to_string(), t.status()))
        .collect()
}

pub fn version(c: &ClusterState) -> Option<u64> {
    c.network_topology.as_ref().map(|t| t.generation)
}

impl Scheduler {
    /// A node changed: the tree follows at the next rebuild.
    pub(super) fn topology_node_changed(&mut self) {
        if let Some(m) = self.topology.as_mut() {
            m.dirty = true;
        }
    }

    pub(super) fn apply_topology(&mut self, ev: Event<ClusterNetworkTopology>) {
        let Some(m) = self.topology.as_mut() else {
            return;
        };
        let is_default =
            |c: &ClusterNetworkTopology| c.metadata.name.as_deref() == Some(DEFAULT_NAME);
        match ev {
            Event::Apply(c) | Event::InitApply(c) if is_default(&c) => m.cnt = Some(Arc::new(c)),
            Event::Delete(c) if is_default(&c) => m.cnt = None,
            Event::InitDone => m.synced = true,
            _ => return,
        }
        // The topology itself changes seldom: its tree is rebuilt at once.
        m.dirty = true;
        m.built = None;
    }

    /// Rebuilds the tree when due and publishes its status; when to wake for the next.
    pub(super) fn topology_tick(&mut self, now: Instant) -> Option<Instant> {
        use crate::scheduler::framework::events::{ClusterEvent, Events};
        match self.rebuild_topology(now)? {
            Rebuild::Due(at) => return Some(at),
            // Gangs refused for want of a tree, or planned in the old one, try again.
            Rebuild::Done => self.cluster_changed(ClusterEvent::of(Events::NETWORK_TOPOLOGY)),
            Rebuild::Clean => {}
        }
        let m = self.topology.as_mut()?;
        m.status.tick(&self.cluster, now)
    }

    /// Rebuilds the tree when it is dirty and due.
    fn rebuild_topology(&mut self, now: Instant) -> Option<Rebuild> {
        let m = self.topology.as_mut()?;
        if m.dirty {
            let due = m.built.map(|b| b + REBUILD_EVERY).filter(|at| *at > now);
            if let Some(at) = due {
                return Some(Rebuild::Due(at));
            }
            m.dirty = false;
            m.built = Some(now);
            m.generation += 1;
            self.cluster.network_topology = m.cnt.as_ref().and_then(|cnt| {
                let nodes = self
                    .cluster
                    .nodes
                    .iter()
                    .map(|n| (n.name.as_str(), &n.labels));
                match network_topology::build(cnt, nodes) {
                    Ok(mut t) => {
                        t.generation = m.generation;
                        Some(Arc::new(t))
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "ClusterNetworkTopology default: no tree");
                        None
                    }
                }
            });
            return Some(Rebuild::Done);
        }
        Some(Rebuild::Clean)
    }
}

enum Rebuild {
    Clean,
    Done,
    /// Dirty, rebuilt at this instant.
    Due(Instant),
}

/// Writes the ClusterNetworkTopology's status (the leader only, through the writer).
pub async fn write(
    client: kube::Client,
    name: String,
    status: ClusterNetworkTopologyStatus,
) -> Result<(), kube::Error> {
    use kube::api::{Patch, PatchParams};
    let api: kube::Api<ClusterNetworkTopology> = kube::Api::all(client);
    let body = serde_json::json!({"status": status});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}
