//! ElasticQuota's PostFilter. Koordinator's victims: preemptible pods of the same quota
//! with lower priority (never the default quota's, with disableDefaultQuotaPreemption).
//! koord adds min reclaim: while the preemptor's quota stays within its min, pods of
//! quotas using more than their runtime are victims too, whatever their priority — what
//! Koordinator's revoke controller would evict later (monitorAllQuotas), done at once.
//! Victim selection is upstream's: remove all, check the pod fits, give back (PDB-protected
//! pods first, then the rest, most important first) while it still fits and its quota stays
//! within its limit.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ElasticQuota, QuotaCycle, exceeded, non_preemptible, sum};
use crate::api::extension::keys::QUOTA_DEFAULT;
use crate::api::pod::Amounts;
use crate::scheduler::framework::quotas::masked;
use crate::scheduler::framework::runtime::Verdicts;
use crate::scheduler::framework::{ClusterState, Fits, NodeInfo, Nomination, PodInfo, Status};
use crate::scheduler::plugins::preemption::{self, Victims};

struct Rules<'a> {
    plugin: &'a ElasticQuota,
    cycle: &'a QuotaCycle,
    pod: &'a PodInfo,
    cluster: &'a ClusterState,
    /// The preemptor's quota stays within its min: over-used quotas give back.
    reclaim: bool,
    runtime: Arc<BTreeMap<String, Amounts>>,
}

impl Rules<'_> {
    fn victim_quota<'p>(&'p self, p: &'p PodInfo) -> Option<&'p str> {
        self.cluster.quotas.quota_of(&p.key)
    }

    fn eligible(&self, p: &PodInfo) -> bool {
        if non_preemptible(p) {
            return false;
        }
        let Some(q) = self.victim_quota(p) else {
            return false;
        };
        if self.plugin.args.disable_default_quota_preemption && q == QUOTA_DEFAULT {
            return false;
        }
        if q == self.cycle.quota {
            return p.priority < self.pod.priority;
        }
        self.reclaim && self.over_used(q)
    }

    fn over_used(&self, q: &str) -> bool {
        let Some(max) = self.cluster.quotas.max_of(q) else {
            return false;
        };
        let used = masked(&self.cluster.quotas.sums(q).used, &max);
        let runtime = self.runtime.get(q).cloned().unwrap_or_default();
        !exceeded(&used, &runtime).is_empty()
    }

    /// The preemptor's quota with `freed` (its own victims' requests) given back.
    fn quota_fits(&self, freed: &Amounts) -> bool {
        let mut used = self.cycle.used.clone();
        for (k, v) in masked(freed, &self.cycle.limit) {
            *used.entry(k).or_insert(0) -= v;
        }
        exceeded(&sum(&used, &self.cycle.request), &self.cycle.limit).is_empty()
    }

    /// Koordinator's `SelectVictimsOnNode`: kube-scheduler's (PDB-protected pods given
    /// back first) with the preemptor's quota checked as well.
    fn victims_on(&self, node: &NodeInfo, fits: &Fits<'_>) -> Option<Victims> {
        let mut candidates: Vec<Arc<PodInfo>> = node
            .pods
            .iter()
            .filter(|p| self.eligible(p))
            .cloned()
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let mut trial = node.clone();
        let mut freed = Amounts::new();
        for v in &candidates {
            trial.remove_pod(&v.key);
            if self.victim_quota(v) == Some(self.cycle.quota.as_str()) {
                freed = sum(&freed, &v.requests);
            }
        }
        if !fits(&trial) || !self.quota_fits(&freed) {
            return None;
        }
        let now = self.cluster.now_ms;
        candidates.sort_by(|a, b| preemption::more_important(a, b, now));
        let (violating, fine) = preemption::split_by_pdb(candidates, self.cluster.pdbs.values());
        let mut out = Victims {
            pods: Vec::new(),
            pdb_violations: 0,
        };
        let tagged = violating.into_iter().map(|v| (true, v));
        for (protected, v) in tagged.chain(fine.into_iter().map(|v| (false, v))) {
            trial.add_pod(v.clone());
            let own = self.victim_quota(&v) == Some(self.cycle.quota.as_str());
            let mut without = freed.clone();
            if own {
                for (k, x) in &v.requests {
                    *without.entry(k.clone()).or_insert(0) -= x;
                }
            }
            if fits(&trial) && self.quota_fits(&without) {
                freed = without;
            } else {
                trial.remove_pod(&v.key);
                out.pdb_violations += protected as usize;
                out.pods.push(v);
            }
        }
        (!out.pods.is_empty()).then_some(out)
    }
}

pub fn post_filter(
    plugin: &ElasticQuota,
    cycle: &QuotaCycle,
    pod: &PodInfo,
    cluster: &ClusterState,
    rejected: &Verdicts,
    fits: &Fits<'_>,
) -> (Status, Option<Nomination>) {
    if pod.spec().and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
        return (
            Status::unschedulable("preemption: not eligible due to preemptionPolicy=Never."),
            None,
        );
    }
    let min = cluster
        .quotas
        .info(&cycle.quota)
        .map(|q| q.min.clone())
        .unwrap_or_default();
    let rules = Rules {
        plugin,
        cycle,
        pod,
        cluster,
        reclaim: !min.is_empty() && exceeded(&sum(&cycle.used, &cycle.request), &min).is_empty(),
        runtime: cluster.quota_runtime(),
    };
    match preemption::pick_node(cluster, rejected, |node| rules.victims_on(node, fits)) {
        Some(n) => (Status::success(), Some(n)),
        None => (
            Status::unschedulable("preemption: No preemption victims found for incoming pod"),
            None,
        ),
    }
}
