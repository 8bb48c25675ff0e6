//! Watch events into the scheduler's cluster state and queue, one method per kind; each
//! first list's end marks its watch synced.

use std::sync::Arc;

use kube::runtime::watcher::Event::{self, *};

use super::super::framework::events::{ClusterEvent, Events, node_change};
use super::super::live_storage::{self, Applied};
use super::super::live_sync::Watch;
use super::super::live_watch::{self, Ev};
use super::{Scheduler, key_of};
use crate::api::quota::{ElasticQuota, PodGroup};
use crate::api::scheduling::device::Device;
use crate::api::scheduling::reservation::Reservation;
use crate::api::slo::NodeMetric;
use crate::api::topology::NodeResourceTopology;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

impl Scheduler {
    /// Applies one watch event to the cluster state and the queue.
    pub fn apply(&mut self, ev: Ev) {
        match ev {
            Ev::Pod(e) => self.on_pod(e),
            Ev::NetworkTopology(e) => self.apply_topology(e),
            Ev::Node(e) => self.on_node(e),
            Ev::Metric(e) => self.on_metric(e),
            Ev::Topology(e) => self.on_topology(e),
            Ev::Device(e) => self.on_device(e),
            Ev::Reservation(e) => self.on_reservation(e),
            Ev::Quota(e) => self.on_quota(e),
            Ev::PodGroup(e) => self.on_pod_group(e),
            Ev::GpuTemplates(e) => self.apply_gpu_templates(*e),
            Ev::Explanation(e) => {
                if let Some(x) = self.explanations.as_mut() {
                    x.apply(*e);
                }
            }
            Ev::Pdb(e) => self.on_pdb(*e),
            Ev::Owner(e) => {
                if live_storage::apply_owner(&mut self.cluster.owners, *e) {
                    self.cluster_changed(ClusterEvent::of(Events::OWNER));
                }
            }
            Ev::Storage(e) => match live_storage::apply(&mut self.cluster.volumes, *e) {
                Applied::Synced(watch) => self.unsynced.listed(watch),
                Applied::Changed => self.cluster_changed(ClusterEvent::of(Events::STORAGE)),
                Applied::Nothing => {}
            },
        }
    }

    fn on_pod(&mut self, e: Event<Pod>) {
        match e {
            Apply(mut p) | InitApply(mut p) => {
                live_watch::slim_pod(&mut p);
                self.apply_pod(p, false)
            }
            Delete(p) => self.apply_pod(p, true),
            InitDone => self.unsynced.listed(Watch::Pods),
            Init => {}
        }
    }

    fn on_node(&mut self, e: Event<Node>) {
        match e {
            Apply(mut n) | InitApply(mut n) => {
                self.topology_node_changed();
                live_watch::slim_node(&mut n);
                let name = n.metadata.name.clone().unwrap_or_default();
                let kind = node_change(self.cluster.node(&name), &n);
                self.cluster.upsert_node(Arc::new(n));
                self.cluster_changed(ClusterEvent::on_node(kind, &name));
            }
            Delete(n) => {
                self.topology_node_changed();
                self.cluster
                    .remove_node(n.metadata.name.as_deref().unwrap_or(""));
            }
            InitDone => self.unsynced.listed(Watch::Nodes),
            Init => {}
        }
    }

    fn on_metric(&mut self, e: Event<NodeMetric>) {
        match e {
            Apply(m) | InitApply(m) => {
                let name = m.metadata.name.clone().unwrap_or_default();
                self.cluster.upsert_metric(Arc::new(m));
                self.cluster_changed(ClusterEvent::on_node(Events::NODE_METRIC, &name));
            }
            Delete(m) => {
                let name = m.metadata.name.clone().unwrap_or_default();
                self.cluster.remove_metric(&name);
                self.cluster_changed(ClusterEvent::on_node(Events::NODE_METRIC, &name));
            }
            InitDone => self.unsynced.listed(Watch::NodeMetrics),
            Init => {}
        }
    }

    fn on_topology(&mut self, e: Event<NodeResourceTopology>) {
        match e {
            Apply(t) | InitApply(t) => {
                self.cluster.upsert_topology(&t);
                let name = t.metadata.name.clone().unwrap_or_default();
                self.cluster_changed(ClusterEvent::on_node(Events::TOPOLOGY, &name));
            }
            Delete(t) => self
                .cluster
                .remove_topology(t.metadata.name.as_deref().unwrap_or("")),
            // Not waited for: a cluster without the NRT CRD still schedules (pinned pods
            // then wait for a topology, requeued when one arrives).
            Init | InitDone => {}
        }
    }

    fn on_device(&mut self, e: Event<Device>) {
        match e {
            Apply(d) | InitApply(d) => {
                self.note_device(&d, false);
                self.cluster.upsert_device(&d);
                let name = d.metadata.name.clone().unwrap_or_default();
                self.cluster_changed(ClusterEvent::on_node(Events::DEVICE, &name));
            }
            Delete(d) => {
                self.note_device(&d, true);
                self.cluster
                    .remove_device(d.metadata.name.as_deref().unwrap_or(""))
            }
            // Waited for, as kube-scheduler waits for every informer: a node whose
            // Device is not known yet passes DeviceShare, so a GPU pod placed before the
            // sync would be bound with no device allocated (and its GPU given twice).
            InitDone => self.unsynced.listed(Watch::Devices),
            Init => {}
        }
    }

    fn on_reservation(&mut self, e: Event<Reservation>) {
        match e {
            Apply(r) | InitApply(r) => {
                self.reservation_kick.notify_one();
                self.apply_reservation(Arc::new(r));
                self.cluster_changed(ClusterEvent::of(Events::RESERVATION));
            }
            Delete(r) => {
                let name = r.metadata.name.clone().unwrap_or_default();
                self.cluster.remove_reservation(&name);
                self.assumed_reservations.remove(&name);
                self.queue
                    .remove(&super::super::framework::reservations::reserve_key(&name));
                self.cluster_changed(ClusterEvent::of(Events::RESERVATION));
            }
            // Waited for (Koordinator needs its CRDs too): before it, an owner could be
            // placed outside its reservation and a non-owner on reserved capacity.
            InitDone => self.unsynced.listed(Watch::Reservations),
            Init => {}
        }
    }

    fn on_quota(&mut self, e: Event<ElasticQuota>) {
        match e {
            Apply(q) | InitApply(q) => {
                let name = q.metadata.name.clone().unwrap_or_default();
                // An update names its quota; an addition may help any pod.
                let updated = self.cluster.quotas.info(&name).is_some().then_some(name);
                if let Err(e) = self.cluster.quotas.upsert(&q) {
                    tracing::warn!(quota = %key_of(&q.metadata), error = %e, "ElasticQuota ignored");
                }
                self.cluster_changed(ClusterEvent::of(Events::QUOTA).with_quota(updated));
            }
            Delete(q) => {
                self.cluster
                    .quotas
                    .remove(q.metadata.name.as_deref().unwrap_or(""));
                self.cluster_changed(ClusterEvent::of(Events::QUOTA));
            }
            InitDone => self.unsynced.listed(Watch::ElasticQuotas),
            Init => {}
        }
    }

    fn on_pod_group(&mut self, e: Event<PodGroup>) {
        match e {
            Apply(g) | InitApply(g) => {
                self.cluster.gangs.upsert_pod_group(&g);
                self.queue.ungate_all();
            }
            Delete(g) => self.cluster.gangs.remove_pod_group(&key_of(&g.metadata)),
            Init | InitDone => {}
        }
    }

    fn on_pdb(&mut self, e: Event<PodDisruptionBudget>) {
        match e {
            Apply(p) | InitApply(p) => self.cluster.upsert_pdb(Arc::new(p)),
            Delete(p) => {
                let key = key_of(&p.metadata);
                self.cluster.pdbs.remove(&key);
            }
            // Waited for, as kube-scheduler waits for every informer: a preemption before
            // the PDBs are known would pick the victims they protect.
            InitDone => self.unsynced.listed(Watch::PodDisruptionBudgets),
            Init => {}
        }
    }
}
