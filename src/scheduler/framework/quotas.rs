//! ElasticQuota accounting kept beside the nodes (Koordinator's group quota manager): the
//! quotas, every live pod's charge (pending and assigned) and the sums per quota, and the
//! runtime quota computed from them on demand. Tracked only when a profile enables
//! ElasticQuota (`settings` set), so other clusters pay nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use crate::api::extension::keys::{
    LABEL_QUOTA_NAME, LABEL_QUOTA_PREEMPTIBLE, QUOTA_DEFAULT, QUOTA_ROOT, QUOTA_SYSTEM,
};
use crate::api::pod::Amounts;
use crate::api::quota::{ElasticQuota, QuotaInfo};
use crate::scheduler::model::quota::{self as runtime, Quota};

/// What the runtime calculation and pod resolution need from `ElasticQuotaArgs`.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaSettings {
    pub enable_min_quota_scale: bool,
    pub default_max: Amounts,
    pub system_max: Amounts,
}

/// One pod's claim on its quota.
#[derive(Debug, Clone)]
struct Charge {
    namespace: String,
    /// The pod's `quota.scheduling.koordinator.sh/name` label.
    label: Option<String>,
    quota: String,
    req: Amounts,
    assigned: bool,
    non_preemptible: bool,
}

/// Per quota: Σ requests of its pods (pending + assigned), of its assigned pods, and of
/// its assigned non-preemptible pods.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sums {
    pub request: Amounts,
    pub used: Amounts,
    pub non_preemptible_used: Amounts,
}

#[derive(Default)]
pub struct QuotaState {
    pub settings: Option<QuotaSettings>,
    pub infos: BTreeMap<String, QuotaInfo>,
    charges: HashMap<String, Charge>,
    sums: HashMap<String, Sums>,
    /// Bumped on every change, so a writer knows when to look again.
    pub version: u64,
    runtime: OnceLock<Arc<BTreeMap<String, Amounts>>>,
    /// Σ node allocatable, kept until a node's allocatable changes (pods come and go far
    /// more often than nodes).
    total: OnceLock<Amounts>,
}

fn add(into: &mut Amounts, a: &Amounts, sign: i64) {
    for (k, v) in a {
        let e = into.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(sign * v);
    }
}

/// `a` kept to the resource names `mask` has (`quotav1.Mask`).
pub fn masked(a: &Amounts, mask: &Amounts) -> Amounts {
    a.iter()
        .filter(|(k, _)| mask.contains_key(*k))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

impl QuotaState {
    pub fn enabled(&self) -> bool {
        self.settings.is_some()
    }

    /// Something the runtime depends on changed outside the quotas (node allocatable).
    pub fn invalidate(&mut self) {
        if self.enabled() {
            self.total = OnceLock::new();
            self.changed();
        }
    }

    fn changed(&mut self) {
        self.version += 1;
        self.runtime = OnceLock::new();
    }

    /// Only `used` of `quota` changed (a pod assumed, bound or forgotten): the runtime
    /// reads requests, not use — except the default and system quotas' use, which the
    /// main tree's total leaves out. So an assume does not recompute every quota.
    fn used_changed(&mut self, quota: &str) {
        self.version += 1;
        if quota == QUOTA_DEFAULT || quota == QUOTA_SYSTEM {
            self.runtime = OnceLock::new();
        }
    }

    /// The quota a pod is charged to: its label, a quota named like its namespace, one
    /// listing its namespace, else the default quota; an unknown name → the default.
    pub fn resolve(&self, namespace: &str, label: Option<&str>) -> String {
        if let Some(n) = label.filter(|n| !n.is_empty()) {
            if self.infos.contains_key(n) || n == QUOTA_SYSTEM {
                return n.to_string();
            }
            return QUOTA_DEFAULT.to_string();
        }
        if self.infos.contains_key(namespace) {
            return namespace.to_string();
        }
        let mut listing = self
            .infos
            .values()
            .filter(|q| q.namespaces.iter().any(|n| n == namespace));
        match listing.next() {
            Some(q) => q.name.clone(),
            None => QUOTA_DEFAULT.to_string(),
        }
    }

    pub fn info(&self, name: &str) -> Option<&QuotaInfo> {
        self.infos.get(name)
    }

    /// The bounds of a quota, with the built-in default and system quotas (max from the
    /// args) when no object overrides them.
    pub fn max_of(&self, name: &str) -> Option<Amounts> {
        if let Some(q) = self.infos.get(name) {
            return Some(q.max.clone());
        }
        let s = self.settings.as_ref()?;
        match name {
            QUOTA_DEFAULT => Some(s.default_max.clone()),
            QUOTA_SYSTEM => Some(s.system_max.clone()),
            _ => None,
        }
    }

    pub fn sums(&self, name: &str) -> Sums {
        self.sums.get(name).cloned().unwrap_or_default()
    }

    fn apply(&mut self, c: &Charge, sign: i64) {
        let s = self.sums.entry(c.quota.clone()).or_default();
        add(&mut s.request, &c.req, sign);
        if c.assigned {
            add(&mut s.used, &c.req, sign);
            if c.non_preemptible {
                add(&mut s.non_preemptible_used, &c.req, sign);
            }
        }
    }

    /// A live pod (pending or assigned) and whether it is assigned now.
    pub fn track(&mut self, pod: &super::PodInfo, assigned: bool) {
        if !self.enabled() || pod.reserve_of.is_some() {
            return;
        }
        let label = pod.labels.get(LABEL_QUOTA_NAME).cloned();
        let charge = Charge {
            quota: self.resolve(&pod.namespace, label.as_deref()),
            namespace: pod.namespace.clone(),
            label,
            req: pod.requests.clone(),
            assigned,
            non_preemptible: pod
                .labels
                .get(LABEL_QUOTA_PREEMPTIBLE)
                .is_some_and(|v| v == "false"),
        };
        let before = self.charges.remove(&pod.key);
        if let Some(b) = &before {
            self.apply(b, -1);
        }
        self.apply(&charge, 1);
        let only_use = before.as_ref().is_some_and(|b| {
            b.quota == charge.quota
                && b.req == charge.req
                && b.non_preemptible == charge.non_preemptible
        });
        let quota = charge.quota.clone();
        self.charges.insert(pod.key.clone(), charge);
        if !only_use {
            self.changed();
        } else if before.is_some_and(|b| b.assigned) != self.charges[&pod.key].assigned {
            self.used_changed(&quota);
        }
    }

    /// A pod that is gone or finished.
    pub fn untrack(&mut self, key: &str) {
        if let Some(c) = self.charges.remove(key) {
            self.apply(&c, -1);
            self.changed();
        }
    }

    /// A pod assumed (true) or forgotten after a failed binding (false).
    pub fn set_assigned(&mut self, key: &str, assigned: bool) {
        let Some(mut c) = self.charges.remove(key) else {
            return;
        };
        let changed = c.assigned != assigned;
        if changed {
            self.apply(&c, -1);
            c.assigned = assigned;
            self.apply(&c, 1);
        }
        let quota = c.quota.clone();
        self.charges.insert(key.to_string(), c);
        if changed {
            self.used_changed(&quota);
        }
    }

    /// The keys of the assigned pods charged to `quota`.
    pub fn assigned_to(&self, quota: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .charges
            .iter()
            .filter(|(_, c)| c.assigned && c.quota == quota)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// The quota a tracked pod is charged to.
    pub fn quota_of(&self, key: &str) -> Option<&str> {
        self.charges.get(key).map(|c| c.quota.as_str())
    }

    pub fn upsert(&mut self, q: &ElasticQuota) -> Result<(), crate::api::field::FieldError> {
        let info = QuotaInfo::from_quota(q)?;
        let before = self.infos.insert(info.name.clone(), info.clone());
        match before {
            // Only what the scheduler itself writes (status.used) changed.
            Some(b)
                if QuotaInfo {
                    used: info.used.clone(),
                    ..b.clone()
                } == info => {}
            Some(b) if b.namespaces == info.namespaces => self.changed(),
            _ => self.reresolve(),
        }
        Ok(())
    }

    pub fn remove(&mut self, name: &str) {
        if self.infos.remove(name).is_some() {
            self.reresolve();
        }
    }

    /// Quotas came or went: every pod's quota is looked up again.
    fn reresolve(&mut self) {
        let charges = std::mem::take(&mut self.charges);
        self.sums.clear();
        for (k, mut c) in charges {
            c.quota = self.resolve(&c.namespace, c.label.as_deref());
            self.apply(&c, 1);
            self.charges.insert(k, c);
        }
        self.changed();
    }

    /// Every quota's runtime, computed once per change: the main tree shares the cluster
    /// (less what the default and system quotas use); a tree of its own (`tree-id`) shares
    /// its root's `total-resource` annotation, else its root's min.
    pub fn runtime(
        &self,
        cluster_total: impl FnOnce() -> Amounts,
    ) -> Arc<BTreeMap<String, Amounts>> {
        self.runtime
            .get_or_init(|| {
                let total = self.total.get_or_init(cluster_total).clone();
                Arc::new(self.compute_runtime(total))
            })
            .clone()
    }

    fn compute_runtime(&self, cluster_total: Amounts) -> BTreeMap<String, Amounts> {
        let Some(settings) = &self.settings else {
            return BTreeMap::new();
        };
        let mut trees: BTreeMap<&str, Vec<Quota>> = BTreeMap::new();
        let mut roots: BTreeMap<&str, &QuotaInfo> = BTreeMap::new();
        for q in self.infos.values() {
            if [QUOTA_ROOT, QUOTA_DEFAULT, QUOTA_SYSTEM].contains(&q.name.as_str()) {
                continue;
            }
            if q.is_root {
                roots.insert(q.tree_id.as_str(), q);
                continue;
            }
            trees.entry(q.tree_id.as_str()).or_default().push(Quota {
                name: q.name.clone(),
                parent: Some(q.parent.clone()).filter(|p| p != QUOTA_ROOT),
                min: q.min.clone(),
                max: q.max.clone(),
                weight: q.shared_weight.clone(),
                pods_request: self.sums(&q.name).request,
                lends: q.lends,
            });
        }
        let mut out = BTreeMap::new();
        for (tree, quotas) in trees {
            let total = match roots.get(tree) {
                Some(root) if !tree.is_empty() => root_total(root),
                _ => {
                    let mut t = cluster_total.clone();
                    for q in [QUOTA_DEFAULT, QUOTA_SYSTEM] {
                        add(&mut t, &self.sums(q).used, -1);
                    }
                    t
                }
            };
            let computed = runtime::runtime_tree(&quotas, &total, settings.enable_min_quota_scale);
            out.extend(computed);
            if let Some(root) = roots.get(tree) {
                out.insert(root.name.clone(), total);
            }
        }
        for q in [QUOTA_DEFAULT, QUOTA_SYSTEM] {
            if let Some(max) = self.max_of(q) {
                out.insert(q.to_string(), max);
            }
        }
        out
    }
}

/// A separate tree's total: the root's `total-resource` annotation (written by the
/// ElasticQuotaProfile controller), else its min.
fn root_total(root: &QuotaInfo) -> Amounts {
    root.total_resource
        .clone()
        .unwrap_or_else(|| root.min.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::PodInfo;
    use serde_json::json;

    fn pod(name: &str, quota: &str) -> PodInfo {
        let p = json!({"metadata": {"name": name, "namespace": "d",
            "labels": {"quota.scheduling.koordinator.sh/name": quota}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        PodInfo::new(Arc::new(serde_json::from_value(p).unwrap()))
    }

    fn state() -> QuotaState {
        let mut s = QuotaState {
            settings: Some(QuotaSettings {
                enable_min_quota_scale: false,
                default_max: Amounts::from([("cpu".into(), 1_000_000)]),
                system_max: Amounts::from([("cpu".into(), 1_000_000)]),
            }),
            ..Default::default()
        };
        let q: ElasticQuota =
            serde_json::from_value(json!({"metadata": {"name": "leaf", "namespace": "d"},
            "spec": {"min": {"cpu": "2"}, "max": {"cpu": "10"}}}))
            .unwrap();
        s.upsert(&q).unwrap();
        s
    }

    /// Assuming a pod changes only its quota's use: the runtime (from requests) is kept,
    /// not recomputed for every quota — and equals a fresh computation.
    #[test]
    fn an_assume_keeps_the_runtime_a_new_pod_recomputes_it() {
        let total = || Amounts::from([("cpu".to_string(), 100_000)]);
        let mut s = state();
        let p = pod("a", "leaf");
        s.track(&p, false);
        let before = s.runtime(total);
        let version = s.version;
        s.track(&p, true);
        s.set_assigned("d/a", false);
        s.set_assigned("d/a", true);
        assert!(Arc::ptr_eq(&before, &s.runtime(total)), "kept");
        assert!(s.version > version, "status writers still see the new use");
        assert_eq!(s.sums("leaf").used["cpu"], 1000);
        assert_eq!(*s.runtime(total), s.compute_runtime(total()));
        s.track(&pod("b", "leaf"), false);
        assert!(
            !Arc::ptr_eq(&before, &s.runtime(total)),
            "a new request recomputes"
        );
        assert_eq!(*s.runtime(total), s.compute_runtime(total()));
        // The default quota's use shrinks the main tree's total: that recomputes.
        let r = s.runtime(total);
        let d = pod("c", "nope");
        s.track(&d, false);
        let r2 = s.runtime(total);
        assert!(!Arc::ptr_eq(&r, &r2));
        s.set_assigned("d/c", true);
        assert!(!Arc::ptr_eq(&r2, &s.runtime(total)));
        assert_eq!(*s.runtime(total), s.compute_runtime(total()));
    }
}
