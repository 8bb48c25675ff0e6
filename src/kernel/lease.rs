//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does:
//! the holder renews every retry period; others take over once they have seen no renewal
//! for a lease duration (measured on their own clock, so clock skew does not matter).
//! Every replica keeps running (warm caches, fast takeover); only the leader writes.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::{PostParams, ResourceExt};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::{Shutdown, Tasks};

/// Settings of one election (Koordinator's manager: `koordinator-system/koordinator-manager`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LeaseConfig {
    pub enabled: bool,
    pub namespace: String,
    pub name: String,
    pub lease_duration_seconds: u64,
    pub renew_deadline_seconds: u64,
    pub retry_period_seconds: u64,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig::named("koordinator-manager")
    }
}

impl LeaseConfig {
    pub fn named(name: &str) -> LeaseConfig {
        LeaseConfig {
            enabled: true,
            namespace: "koordinator-system".into(),
            name: name.into(),
            lease_duration_seconds: 15,
            renew_deadline_seconds: 10,
            retry_period_seconds: 2,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.retry_period_seconds == 0
            || self.renew_deadline_seconds <= self.retry_period_seconds
        {
            return Err("renewDeadlineSeconds must exceed retryPeriodSeconds (> 0)".into());
        }
        if self.lease_duration_seconds <= self.renew_deadline_seconds {
            return Err("leaseDurationSeconds must exceed renewDeadlineSeconds".into());
        }
        Ok(())
    }
}

/// Whether this replica leads now.
#[derive(Clone)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
    /// Keeps the channel open when nobody campaigns.
    _fixed: Option<std::sync::Arc<watch::Sender<bool>>>,
    /// When the lease was last renewed, and for how long a renewal counts.
    renewed: Option<(std::sync::Arc<std::sync::Mutex<Option<Instant>>>, Duration)>,
}

impl Leadership {
    /// Always the leader (election disabled).
    pub fn always() -> Leadership {
        let (tx, rx) = watch::channel(true);
        Leadership {
            rx,
            _fixed: Some(std::sync::Arc::new(tx)),
            renewed: None,
        }
    }

    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// Leading, with a renewal younger than the renew deadline: what a write only the
    /// leader may make (a binding) checks first. A replica that was paused still believes
    /// it leads until its elector runs again; by the clock its lease may already be
    /// another's.
    pub fn fresh(&self) -> bool {
        if !self.is_leader() {
            return false;
        }
        let Some((renewed, deadline)) = &self.renewed else {
            return true;
        };
        let last = *renewed.lock().unwrap_or_else(|p| p.into_inner());
        last.is_some_and(|t| t.elapsed() < *deadline)
    }

    /// Resolves when leadership changes.
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Starts campaigning; `identity` should be unique per replica.
pub fn start(
    client: kube::Client,
    cfg: LeaseConfig,
    identity: String,
    tasks: &Tasks,
    shutdown: &Shutdown,
) -> Leadership {
    if !cfg.enabled {
        return Leadership::always();
    }
    let (tx, rx) = watch::channel(false);
    let renewed = std::sync::Arc::new(std::sync::Mutex::new(None));
    let deadline = Duration::from_secs(cfg.renew_deadline_seconds);
    let shutdown = shutdown.clone();
    let shared = renewed.clone();
    let name = format!("lease/{}", cfg.name);
    tasks.spawn(name, async move {
        let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
        let mut elector = Elector {
            api,
            cfg,
            identity,
            observed: None,
            last_renew: None,
            held: None,
            renewed: shared,
        };
        elector.campaign(&tx, &shutdown).await;
        if *tx.borrow() {
            tx.send_replace(false);
            elector.release().await;
        }
        Ok(())
    });
    Leadership {
        rx,
        _fixed: None,
        renewed: Some((renewed, deadline)),
    }
}

struct Elector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    identity: String,
    /// The other holder's record and when we first saw it.
    observed: Option<(String, Instant)>,
    last_renew: Option<Instant>,
    /// The lease as our last write left it, while we hold it: renewing replaces it directly
    /// (its resourceVersion still guards against another writer) instead of reading it
    /// first — one request per retry period instead of two, for every role that elects.
    held: Option<Lease>,
    /// `last_renew`, shared with every [`Leadership`] handle.
    renewed: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl Elector {
    async fn campaign(&mut self, tx: &watch::Sender<bool>, shutdown: &Shutdown) {
        let period = Duration::from_secs(self.cfg.retry_period_seconds.max(1));
        loop {
            let leading = self.try_acquire_or_renew().await;
            let was = *tx.borrow();
            if leading != was {
                tracing::info!(lease = %self.cfg.name, identity = %self.identity, leading, "leadership changed");
                tx.send_replace(leading);
            }
            if !shutdown.sleep(period).await {
                return;
            }
        }
    }

    /// One round; returns whether we lead afterwards.
    async fn try_acquire_or_renew(&mut self) -> bool {
        if let Some(lease) = self.held.take()
            && self.write(lease, false).await
        {
            return true;
        }
        let lease = match self.api.get_opt(&self.cfg.name).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "reading the lease failed");
                return self.still_within_deadline();
            }
        };
        let Some(lease) = lease else {
            return self.create().await;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder == self.identity {
            return self.write(lease, false).await || self.still_within_deadline();
        }
        if !holder.is_empty() && !self.expired(&lease) {
            self.last_renew = None;
            return false;
        }
        self.write(lease, true).await
    }

    fn renewed_now(&mut self) {
        self.last_renew = Some(Instant::now());
        *self.renewed.lock().unwrap_or_else(|p| p.into_inner()) = self.last_renew;
    }

    fn still_within_deadline(&self) -> bool {
        self.last_renew
            .is_some_and(|t| t.elapsed() < Duration::from_secs(self.cfg.renew_deadline_seconds))
    }

    /// Whether the other holder's record has not changed for a lease duration.
    fn expired(&mut self, lease: &Lease) -> bool {
        let spec = lease.spec.as_ref();
        let record = format!(
            "{}|{}|{}",
            spec.and_then(|s| s.holder_identity.clone())
                .unwrap_or_default(),
            spec.and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            lease.resource_version().unwrap_or_default()
        );
        let duration = spec
            .and_then(|s| s.lease_duration_seconds)
            .map(|d| d.max(1) as u64)
            .unwrap_or(self.cfg.lease_duration_seconds);
        match &self.observed {
            Some((r, at)) if *r == record => at.elapsed() >= Duration::from_secs(duration),
            _ => {
                self.observed = Some((record, Instant::now()));
                false
            }
        }
    }

    async fn create(&mut self) -> bool {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.cfg.name.clone()),
                namespace: Some(self.cfg.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.cfg.lease_duration_seconds as i32),
                acquire_time: Some(now_micro()),
                renew_time: Some(now_micro()),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.renewed_now();
                self.held = Some(created);
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "creating the lease failed");
                false
            }
        }
    }

    /// Renews, or takes over (`acquire`), with the resourceVersion as optimistic lock.
    async fn write(&mut self, mut lease: Lease, acquire: bool) -> bool {
        let spec = lease.spec.get_or_insert_with(Default::default);
        if acquire {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(now_micro());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.lease_duration_seconds = Some(self.cfg.lease_duration_seconds as i32);
        spec.renew_time = Some(now_micro());
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.renewed_now();
                self.observed = None;
                self.held = Some(written);
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, acquire, "writing the lease failed");
                false
            }
        }
    }

    /// On a clean stop the next replica need not wait out the lease.
    async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now_micro());
        if let Err(e) = self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "releasing the lease failed");
        } else {
            tracing::info!(lease = %self.cfg.name, "lease released");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica paused past its renew deadline still reads `leading` from its channel
    /// (its elector has not run since); `fresh` goes by the clock.
    #[test]
    fn a_paused_leader_is_not_fresh() {
        let (tx, rx) = watch::channel(true);
        let renewed = std::sync::Arc::new(std::sync::Mutex::new(Some(Instant::now())));
        let lease = Leadership {
            rx,
            _fixed: Some(std::sync::Arc::new(tx)),
            renewed: Some((renewed.clone(), Duration::from_secs(10))),
        };
        assert!(lease.is_leader() && lease.fresh());
        *renewed.lock().unwrap() = Instant::now().checked_sub(Duration::from_secs(11));
        assert!(lease.is_leader(), "the channel still says leading");
        assert!(!lease.fresh(), "but the last renewal is past the deadline");
        assert!(Leadership::always().fresh(), "no election: always");
    }
}
