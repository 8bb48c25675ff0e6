//! The ElasticQuota status writer (Koordinator's quota controller, 1 s period): the loop
//! publishes every quota's figures at most once a second when they changed; this task
//! writes, on the leader only, the quotas whose figures differ from what it last wrote.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{Patch, PatchParams};
use tokio::sync::watch;

use crate::api::quota::ElasticQuota;
use crate::kernel::lease::Leadership;
use crate::kernel::{Shutdown, Tasks};
use crate::scheduler::framework::ClusterState;
use crate::scheduler::plugins::elasticquota::status::{Figures, figures, patch};

pub const PERIOD: Duration = Duration::from_secs(1);

/// The loop's side: when to publish next.
pub struct Publisher {
    tx: watch::Sender<BTreeMap<String, Figures>>,
    version: u64,
    last: Option<Instant>,
}

impl Publisher {
    /// Publishes when the quotas changed and a period has passed; otherwise, the instant
    /// the loop should wake to publish (None: nothing pending).
    pub fn tick(&mut self, cluster: &ClusterState, now: Instant) -> Option<Instant> {
        if !cluster.quotas.enabled() || cluster.quotas.version == self.version {
            return None;
        }
        if let Some(at) = self.last.map(|l| l + PERIOD).filter(|at| *at > now) {
            return Some(at);
        }
        self.version = cluster.quotas.version;
        self.last = Some(now);
        let _ = self.tx.send(figures(cluster));
        None
    }
}

async fn write(client: &kube::Client, name: &str, f: &Figures) -> Result<(), kube::Error> {
    let api: Api<ElasticQuota> = Api::namespaced(client.clone(), &f.namespace);
    let body = patch(f);
    let pp = PatchParams::default();
    api.patch(
        name,
        &pp,
        &Patch::Merge(&serde_json::json!({"metadata": body["metadata"]})),
    )
    .await?;
    api.patch_status(
        name,
        &pp,
        &Patch::Merge(&serde_json::json!({"status": body["status"]})),
    )
    .await?;
    Ok(())
}

/// Starts the writer; the returned publisher belongs to the scheduling loop.
pub fn spawn(
    client: kube::Client,
    leadership: Leadership,
    tasks: &Tasks,
    shutdown: &Shutdown,
) -> Publisher {
    let (tx, mut rx) = watch::channel(BTreeMap::<String, Figures>::new());
    let shutdown = shutdown.clone();
    tasks.spawn("scheduler/quota-status", async move {
        let mut written: BTreeMap<String, Figures> = BTreeMap::new();
        let mut leadership = leadership;
        let mut retry = false;
        loop {
            tokio::select! {
                _ = shutdown.draining() => return Ok(()),
                r = rx.changed() => if r.is_err() { return Ok(()) },
                _ = leadership.changed() => {}
                _ = tokio::time::sleep(Duration::from_secs(10)), if retry => {}
            }
            if !leadership.is_leader() {
                // A new leader writes everything again.
                written.clear();
                continue;
            }
            let now = rx.borrow_and_update().clone();
            written.retain(|k, _| now.contains_key(k));
            retry = false;
            for (name, f) in now {
                if written.get(&name) == Some(&f) {
                    continue;
                }
                match write(&client, &name, &f).await {
                    Ok(()) => {
                        written.insert(name, f);
                    }
                    Err(e) => {
                        tracing::debug!(quota = %name, error = %e, "quota status not written; retrying");
                        written.remove(&name);
                        retry = true;
                    }
                }
            }
        }
    });
    Publisher {
        tx,
        version: 0,
        last: None,
    }
}

/// A publisher with no writer (tests, explain).
pub fn detached() -> Publisher {
    Publisher {
        tx: watch::channel(BTreeMap::new()).0,
        version: 0,
        last: None,
    }
}
