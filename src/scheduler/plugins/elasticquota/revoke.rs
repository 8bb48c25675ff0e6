//! Koordinator's over-use revoke controller (`QuotaOverUsedRevokeController`, on with
//! `monitorAllQuotas` and runtime quotas): a quota whose used stays above its runtime for
//! longer than `delayEvictTime` gives back pods — the least important preemptible ones
//! until it fits, then as many of those as fit given back again — which the live
//! scheduler evicts. Checked every `revokePodInterval`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{exceeded, non_preemptible};
use crate::api::extension::keys::{QUOTA_ROOT, QUOTA_SYSTEM};
use crate::api::pod::Amounts;
use crate::scheduler::framework::{ClusterState, PodInfo};
use crate::scheduler::plugins::preemption::more_important;

pub struct Revoker {
    delay: Duration,
    /// Quota → when it was last within its runtime.
    last_under: HashMap<String, Instant>,
}

/// `used` less (or plus) a pod's requests, on the pod's resources only (`quotav1.Mask`).
fn shift(used: &mut Amounts, req: &Amounts, sign: i64) {
    for (k, v) in req {
        let e = used.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(sign * v);
    }
}

impl Revoker {
    pub fn new(delay: Duration) -> Revoker {
        Revoker {
            delay,
            last_under: HashMap::new(),
        }
    }

    /// The pods to evict now (empty while every quota is within its runtime, or over it
    /// for less than the delay).
    pub fn due(&mut self, cluster: &ClusterState, now: Instant) -> Vec<Arc<PodInfo>> {
        let runtime = cluster.quota_runtime();
        let names: Vec<String> = cluster
            .quotas
            .infos
            .keys()
            .filter(|n| n.as_str() != QUOTA_SYSTEM && n.as_str() != QUOTA_ROOT)
            .cloned()
            .collect();
        self.last_under.retain(|n, _| names.contains(n));
        let mut out = Vec::new();
        for name in names {
            let used = cluster.quotas.sums(&name).used;
            let limit = runtime.get(&name).cloned().unwrap_or_default();
            let since = *self.last_under.entry(name.clone()).or_insert(now);
            if exceeded(&used, &limit).is_empty() {
                self.last_under.insert(name, now);
                continue;
            }
            if now.duration_since(since) <= self.delay {
                continue;
            }
            self.last_under.insert(name.clone(), now);
            out.extend(to_revoke(cluster, &name, used, &limit));
        }
        out
    }
}

/// `getToRevokePodList`.
fn to_revoke(
    cluster: &ClusterState,
    quota: &str,
    mut used: Amounts,
    runtime: &Amounts,
) -> Vec<Arc<PodInfo>> {
    let mut pods: Vec<Arc<PodInfo>> = cluster
        .quotas
        .assigned_to(quota)
        .iter()
        .filter_map(|k| {
            let node = cluster.node(cluster.placement(k)?)?;
            node.pods.iter().find(|p| &p.key == k).cloned()
        })
        .collect();
    // Least important first.
    pods.sort_by(|a, b| more_important(b, a, cluster.now_ms));
    let mut tried = Vec::new();
    for p in pods {
        if exceeded(&used, runtime).is_empty() {
            break;
        }
        if non_preemptible(&p) {
            continue;
        }
        shift(&mut used, &p.requests, -1);
        tried.push(p);
    }
    if !exceeded(&used, runtime).is_empty() {
        return tried;
    }
    let mut revoke = Vec::new();
    for p in tried.into_iter().rev() {
        shift(&mut used, &p.requests, 1);
        if !exceeded(&used, runtime).is_empty() {
            shift(&mut used, &p.requests, -1);
            revoke.push(p);
        }
    }
    revoke
}
