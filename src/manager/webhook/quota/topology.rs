//! The ElasticQuota tree the quota webhooks check against: every known quota (from the
//! cache, overlaid with what this replica admitted moments ago) by name, with a virtual
//! root.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use crate::api::extension::keys::*;
use crate::api::pod::{Amounts, amounts};
use crate::api::quota::ElasticQuota;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaInfo {
    pub name: String,
    pub namespace: String,
    pub parent: String,
    pub is_parent: bool,
    pub is_root: bool,
    pub tree_id: String,
    pub allow_force_update: bool,
    pub namespaces: Vec<String>,
    pub min: Amounts,
    pub max: Amounts,
    pub shared_weight: Option<Amounts>,
    pub used: Amounts,
    pub strict_keys: Vec<String>,
}

fn flag(m: &BTreeMap<String, String>, key: &str) -> bool {
    m.get(key).is_some_and(|v| v == "true")
}

impl QuotaInfo {
    /// Reads a quota; errors name the annotation that does not parse.
    pub fn from_quota(q: &ElasticQuota) -> Result<QuotaInfo, String> {
        let labels = q.metadata.labels.clone().unwrap_or_default();
        let ann = q.metadata.annotations.clone().unwrap_or_default();
        let json_list = |key: &str| -> Result<Vec<String>, String> {
            match ann.get(key).map(|s| s.trim()).filter(|s| !s.is_empty()) {
                None => Ok(Vec::new()),
                Some(raw) => serde_json::from_str(raw).map_err(|e| {
                    format!("metadata.annotations[{key}]: not a JSON list of strings: {e}")
                }),
            }
        };
        let shared_weight = match ann.get(ANNOTATION_QUOTA_SHARED_WEIGHT).map(|s| s.trim()) {
            None | Some("") => None,
            Some(raw) => {
                let list: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> =
                    serde_json::from_str(raw).map_err(|e| {
                        format!("metadata.annotations[{ANNOTATION_QUOTA_SHARED_WEIGHT}]: not a resource list: {e}")
                    })?;
                Some(amounts(Some(&list)))
            }
        };
        let name = q.metadata.name.clone().unwrap_or_default();
        Ok(QuotaInfo {
            parent: labels
                .get(LABEL_QUOTA_PARENT)
                .filter(|s| !s.is_empty())
                .cloned()
                .unwrap_or_else(|| QUOTA_ROOT.to_string()),
            is_parent: flag(&labels, LABEL_QUOTA_IS_PARENT),
            is_root: flag(&labels, LABEL_QUOTA_IS_ROOT) || name == QUOTA_ROOT,
            tree_id: labels.get(LABEL_QUOTA_TREE_ID).cloned().unwrap_or_default(),
            allow_force_update: flag(&labels, LABEL_QUOTA_ALLOW_FORCE_UPDATE)
                || flag(&ann, LABEL_QUOTA_ALLOW_FORCE_UPDATE),
            namespaces: json_list(ANNOTATION_QUOTA_NAMESPACES)?,
            strict_keys: json_list(ANNOTATION_QUOTA_STRICT_KEYS)?,
            min: amounts(q.spec.min.as_ref()),
            max: amounts(q.spec.max.as_ref()),
            shared_weight,
            used: amounts(q.status.as_ref().and_then(|s| s.used.as_ref())),
            namespace: q.metadata.namespace.clone().unwrap_or_default(),
            name,
        })
    }

    pub fn from_value(v: &Value) -> Result<QuotaInfo, String> {
        let q: ElasticQuota = serde_json::from_value(v.clone())
            .map_err(|e| format!("decoding the ElasticQuota: {e}"))?;
        QuotaInfo::from_quota(&q)
    }
}

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
