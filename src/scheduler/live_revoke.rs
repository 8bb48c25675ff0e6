//! The live side of ElasticQuota's over-use revoke controller: every `revokePodInterval`
//! the leader asks the [`Revoker`] which pods over-used quotas give back, and evicts them
//! (policy/v1 Eviction, as Koordinator's `EvictPod`).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::EvictParams;

use super::{BindDone, Scheduler};
use crate::scheduler::plugins::elasticquota::revoke::Revoker;

/// The controller's state in the live loop.
pub struct Revoke {
    pub revoker: Revoker,
    pub every: Duration,
    pub next: Instant,
}

impl Revoke {
    pub fn new(delay: Duration, every: Duration) -> Revoke {
        Revoke {
            revoker: Revoker::new(delay),
            every: every.max(Duration::from_millis(100)),
            next: Instant::now(),
        }
    }
}

impl Scheduler {
    /// Runs a due round (leader only) and says when the next one is.
    pub(super) fn revoke_tick(&mut self, now: Instant) -> Option<Instant> {
        let leader = self.leadership.is_leader();
        let r = self.revoke.as_mut()?;
        if now >= r.next {
            r.next = now + r.every;
            if leader {
                for pod in r.revoker.due(&self.cluster, now) {
                    let client = self.client.clone();
                    self.binds.spawn(async move {
                        let api: Api<Pod> = Api::namespaced(client, &pod.namespace);
                        match api.evict(&pod.name, &EvictParams::default()).await {
                            Ok(_) => tracing::info!(pod = %pod.key, "revoked: its quota is over its runtime"),
                            Err(e) => tracing::warn!(pod = %pod.key, error = %e, "failed to revoke pod due to quota overused"),
                        }
                        BindDone {
                            pod,
                            node: String::new(),
                            result: Ok(()),
                        }
                    });
                }
            }
        }
        self.revoke.as_ref().map(|r| r.next)
    }
}
