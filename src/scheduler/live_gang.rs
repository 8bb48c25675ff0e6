//! The scheduling loop's side of Permit and gangs: a pod waits at Permit with a channel
//! the loop answers; a gang passing Permit releases its waiting members, a Strict gang
//! whose member fails rejects them.

use std::sync::Arc;
use std::time::Instant;

use super::{PermitWait, Scheduler};
use crate::scheduler::framework::{CycleState, PodInfo};

impl Scheduler {
    /// Permit for an assumed pod: None when rejected (the pod is forgotten and requeued);
    /// otherwise whether (and how long) its binding waits.
    pub(super) fn permit(
        &mut self,
        fi: usize,
        state: &mut CycleState,
        pod: &Arc<PodInfo>,
        node: &str,
    ) -> Option<Option<PermitWait>> {
        let frameworks = self.frameworks.clone();
        let fw = &frameworks[fi];
        Some(match fw.permit(state, pod, node, &self.cluster) {
            Err((plugin, s)) => {
                tracing::info!(pod = %pod.key, plugin, reason = %s.message(), "rejected at Permit");
                self.cluster.forget(&pod.key);
                fw.unreserve(state, pod, node);
                self.gang_member_failed(&pod.key, &s.message());
                self.queue.requeue_backoff(pod.clone(), Instant::now());
                return None;
            }
            Ok(None) => {
                self.release_gang(&pod.key);
                None
            }
            Ok(Some(timeout)) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                self.waiting
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(pod.key.clone(), tx);
                self.cluster.gangs.wait(&pod.key);
                Some((timeout, rx))
            }
        })
    }

    /// A gang member passed Permit: the members of its group waiting there go on.
    pub(super) fn release_gang(&mut self, key: &str) {
        for k in self.cluster.gangs.release(key) {
            self.resolve_waiting(&k, true);
        }
    }

    /// A gang member failed: in Strict mode its group's waiting members are rejected
    /// (their places released), with Koordinator's message.
    pub(super) fn gang_member_failed(&mut self, key: &str, reason: &str) {
        let rejected = self.cluster.gangs.member_failed(key);
        if rejected.is_empty() {
            return;
        }
        let group = self
            .cluster
            .gangs
            .gang_id(key)
            .map(|id| self.cluster.gangs.group_id(id))
            .unwrap_or_default();
        let msg = crate::scheduler::plugins::coscheduling::rejected_message(
            &group,
            key,
            reason,
            rejected.len(),
        );
        for k in rejected {
            self.gang_rejections.insert(k.clone(), msg.clone());
            self.resolve_waiting(&k, false);
        }
    }

    /// Lets a pod waiting at Permit go on (`allow`) or fails it; false when not waiting.
    pub fn resolve_waiting(&self, key: &str, allow: bool) -> bool {
        let tx = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        tx.is_some_and(|t| t.send(allow).is_ok())
    }

    /// Keys of pods waiting at Permit.
    pub fn waiting_pods(&self) -> Vec<String> {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}
