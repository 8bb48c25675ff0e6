//! Status writers in the style of Koordinator's controllers (1 s period): the scheduling
//! loop publishes figures computed from its cluster state at most once a period when they
//! changed; a task writes, on the leader only, the objects whose figures differ from what
//! it last wrote. Used for ElasticQuota and PodGroup status.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::kernel::lease::Leadership;
use crate::kernel::{Shutdown, Tasks};
use crate::scheduler::framework::ClusterState;

pub const PERIOD: Duration = Duration::from_secs(1);

/// Figures by object key, computed from the cluster state.
pub type Compute<F> = fn(&ClusterState) -> BTreeMap<String, F>;
/// The version of what the figures depend on (None: not tracked).
pub type Version = fn(&ClusterState) -> Option<u64>;

/// The loop's side: when to publish next.
pub struct Publisher<F> {
    tx: watch::Sender<BTreeMap<String, F>>,
    compute: Compute<F>,
    version_of: Version,
    version: u64,
    last: Option<Instant>,
}

impl<F> Publisher<F> {
    /// Publishes when the figures' inputs changed and a period has passed; otherwise,
    /// the instant the loop should wake to publish (None: nothing pending).
    pub fn tick(&mut self, cluster: &ClusterState, now: Instant) -> Option<Instant> {
        let v = (self.version_of)(cluster)?;
        if v == self.version {
            return None;
        }
        if let Some(at) = self.last.map(|l| l + PERIOD).filter(|at| *at > now) {
            return Some(at);
        }
        self.version = v;
        self.last = Some(now);
        let _ = self.tx.send((self.compute)(cluster));
        None
    }

    /// Hands the writer figures computed elsewhere (outside the cluster state).
    pub fn publish(&self, figures: BTreeMap<String, F>) {
        let _ = self.tx.send(figures);
    }

    /// A publisher with no writer.
    pub fn detached(compute: Compute<F>, version_of: Version) -> Publisher<F> {
        Publisher {
            tx: watch::channel(BTreeMap::new()).0,
            compute,
            version_of,
            version: 0,
            last: None,
        }
    }
}

/// Starts a writer; the returned publisher belongs to the scheduling loop.
pub fn spawn<F, W, Fut>(
    what: &'static str,
    client: kube::Client,
    leadership: Leadership,
    (tasks, shutdown): (&Tasks, &Shutdown),
    (compute, version_of): (Compute<F>, Version),
    write: W,
) -> Publisher<F>
where
    F: Clone + PartialEq + Send + Sync + 'static,
    W: Fn(kube::Client, String, F) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), kube::Error>> + Send,
{
    let (tx, mut rx) = watch::channel(BTreeMap::<String, F>::new());
    let shutdown = shutdown.clone();
    tasks.spawn(format!("scheduler/{what}-status"), async move {
        let mut written: BTreeMap<String, F> = BTreeMap::new();
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
            for (key, f) in now {
                if written.get(&key) == Some(&f) {
                    continue;
                }
                match write(client.clone(), key.clone(), f.clone()).await {
                    Ok(()) => {
                        written.insert(key, f);
                    }
                    Err(e) => {
                        tracing::debug!(what, object = %key, error = %e, "status not written; retrying");
                        written.remove(&key);
                        retry = true;
                    }
                }
            }
        }
    });
    Publisher {
        tx,
        compute,
        version_of,
        version: 0,
        last: None,
    }
}

/// Writes an ElasticQuota's annotations and status in one merge patch of the object:
/// Koordinator's CRD (as scheduler-plugins') has no status subresource.
pub async fn write_quota(
    client: kube::Client,
    name: String,
    f: crate::scheduler::plugins::elasticquota::status::Figures,
) -> Result<(), kube::Error> {
    use kube::api::{Patch, PatchParams};
    let api: kube::Api<crate::api::quota::ElasticQuota> =
        kube::Api::namespaced(client, &f.namespace);
    let body = crate::scheduler::plugins::elasticquota::status::patch(&f);
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}

/// Writes a PodGroup's status, a merge patch of the object (no status subresource, as
/// for ElasticQuotas).
pub async fn write_pod_group(
    client: kube::Client,
    _key: String,
    f: crate::scheduler::plugins::coscheduling::status::Figures,
) -> Result<(), kube::Error> {
    use kube::api::{Patch, PatchParams};
    let api: kube::Api<crate::api::quota::PodGroup> = kube::Api::namespaced(client, &f.namespace);
    let body = crate::scheduler::plugins::coscheduling::status::patch(&f);
    api.patch(&f.name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}
