//! The ElasticQuota tree the quota webhooks check against: every known quota (from the
//! cache, overlaid with what this replica admitted moments ago) by name, with a virtual
//! root.

use std::collections::HashMap;

use serde::Serialize;

use k8s_openapi::api::core::v1::Pod;

use crate::api::extension::keys::{LABEL_QUOTA_NAME, QUOTA_DEFAULT, QUOTA_ROOT};
pub use crate::api::quota::QuotaInfo;

#[derive(Debug, Default, Clone, Serialize)]
pub struct Topology {
    pub quotas: HashMap<String, QuotaInfo>,
}

impl Topology {
    pub fn build(infos: impl IntoIterator<Item = QuotaInfo>) -> Topology {
        Topology {
            quotas: infos.into_iter().map(|q| (q.name.clone(), q)).collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&QuotaInfo> {
        self.quotas.get(name)
    }

    /// Known quotas, plus the virtual root that always exists.
    pub fn exists(&self, name: &str) -> bool {
        name == QUOTA_ROOT || self.quotas.contains_key(name)
    }

    pub fn children<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a QuotaInfo> + 'a {
        self.quotas
            .values()
            .filter(move |q| q.parent == name && q.name != name)
    }

    /// A quota listing `ns` in its namespaces annotation.
    pub fn bound_to_namespace(&self, ns: &str) -> Option<&QuotaInfo> {
        let mut bound: Vec<_> = self
            .quotas
            .values()
            .filter(|q| q.namespaces.iter().any(|n| n == ns))
            .collect();
        bound.sort_by(|a, b| a.name.cmp(&b.name));
        bound.into_iter().next()
    }
}

/// The quota a pod is charged to: label, namespace-named quota, annotated namespaces,
/// then the default quota.
pub fn quota_name_of(topo: &Topology, pod: &Pod, ns: &str, by_namespace: bool) -> String {
    if let Some(n) = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_QUOTA_NAME))
        .filter(|s| !s.is_empty())
    {
        return n.to_string();
    }
    if by_namespace && topo.get(ns).is_some() {
        return ns.to_string();
    }
    if let Some(q) = topo.bound_to_namespace(ns) {
        return q.name.clone();
    }
    QUOTA_DEFAULT.to_string()
}
