//! A pod's watch event into the cluster state and the queue: counted where it runs,
//! queued while it is ours and pending, and the cluster events its arrival, relabelling or
//! departure are.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::Scheduler;
use crate::scheduler::framework::events::{ClusterEvent, Events};

/// What Koordinator's pod informer does to a pod as it arrives (the scheduler-name label,
/// deprecated resource names), before the queue or a profile looks at it.
fn transform_arrived(pod: &mut Pod) {
    use crate::scheduler::model::transform;
    if transform::pod_needs(pod) {
        transform::transform_pod(pod);
    }
}

impl Scheduler {
    pub(super) fn apply_pod(&mut self, mut pod: Pod, deleted: bool) {
        transform_arrived(&mut pod);
        let key = super::key_of(&pod.metadata);
        let allocated = pod.metadata.annotations.as_ref().is_some_and(|a| {
            a.contains_key(crate::api::extension::keys::ANNOTATION_RESERVATION_ALLOCATED)
        });
        if allocated {
            // An owner bound, finished or gone: its reservation may complete now.
            self.reservation_kick.notify_one();
        }
        if deleted {
            // A pod deleted while waiting at Permit stops waiting (kube-scheduler rejects it).
            self.resolve_waiting(&key, false);
            let held = self
                .cluster
                .placement(&key)
                .or(self.cluster.nominated.node_of(&key));
            let held = held.map(str::to_string);
            let charged = self.cluster.quotas.quota_of(&key).map(str::to_string);
            self.cluster.delete_pod(&key);
            self.queue.remove(&key);
            self.pod_left(held, charged);
            return;
        }
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let ours = self.framework_for(&pod).is_some();
        let gone = pod.metadata.deletion_timestamp.is_some();
        let finished = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        let held = self.cluster.placement(&key).map(str::to_string);
        let charged = self.cluster.quotas.quota_of(&key).map(str::to_string);
        let freed = (gone || finished) && held.is_some();
        let pod = Arc::new(pod);
        let new_gang_member = self.cluster.gangs.enabled()
            && !bound
            && crate::scheduler::framework::gangs::gang_of(&pod).is_some()
            && self.cluster.gangs.gang_id(&key).is_none();
        let before = held.as_deref().and_then(|n| self.cluster.node(n));
        let before = before.and_then(|n| n.pods.iter().find(|p| p.key == key).cloned());
        let info = self.cluster.upsert_pod(pod);
        let placed = self.cluster.placement(&key).map(str::to_string);
        match (held.as_deref(), placed) {
            // Bound by someone else, or our binding seen: pods that wait for company
            // (affinity, spreading) may fit now.
            (None, Some(node)) => {
                self.cluster_changed(ClusterEvent::on_node(Events::POD_ASSIGNED_ADD, &node))
            }
            // Relabelled where it runs: it may select, or stop repelling, a waiting pod.
            (Some(was), Some(node))
                if was == node && before.is_some_and(|b| b.labels != info.labels) =>
            {
                self.cluster_changed(ClusterEvent::on_node(Events::POD_ASSIGNED_UPDATE, &node))
            }
            _ => {}
        }
        if new_gang_member {
            // Its siblings may have waited at PreEnqueue for it.
            self.queue.ungate_all();
        }
        if freed {
            // A terminating or finished pod no longer counts: waiting pods may fit now.
            self.pod_left(held, charged);
        }
        if bound || gone || !ours {
            self.queue.remove(&key);
        } else if !self.cluster.assumed.contains_key(&key) {
            self.queue.add(info);
        }
    }
}
