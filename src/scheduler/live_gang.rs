//! The scheduling loop's side of Permit and gangs: a pod waits at Permit with a channel
//! the loop answers; the cycle decides which waiting members go on or are rejected, the
//! loop resolves their channels.

use super::{PermitWait, Scheduler};
use crate::scheduler::cycle::{GangRejection, Permit};

impl Scheduler {
    /// Permit's verdict for a placed pod: how long its binding waits (None: at once).
    /// Members the pod completed go on now.
    pub(super) fn permit_wait(&mut self, key: &str, permit: Permit) -> Option<PermitWait> {
        match permit {
            Permit::Allowed { released } => {
                for k in released {
                    self.resolve_waiting(&k, true);
                }
                None
            }
            Permit::Wait(timeout) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                self.waiting
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key.to_string(), tx);
                Some((timeout, rx))
            }
        }
    }

    /// Waiting members a failure took down: their bindings fail with the gang's message.
    pub(super) fn reject_waiting(&mut self, rejected: GangRejection) {
        for k in rejected.keys {
            self.gang_rejections
                .insert(k.clone(), rejected.message.clone());
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

    /// Pods waiting at Permit now.
    pub fn waiting_count(&self) -> usize {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).len()
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
