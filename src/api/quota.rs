//! Quota and gang kinds: ElasticQuota and PodGroup (`scheduling.sigs.k8s.io/v1alpha1`,
//! from scheduler-plugins) and ElasticQuotaProfile (`quota.koordinator.sh/v1alpha1`).

use crate::api::field::FieldError;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::extension::keys::*;
use crate::api::pod::{Amounts, amounts};

pub type ResourceList = BTreeMap<String, Quantity>;

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "scheduling.sigs.k8s.io",
    version = "v1alpha1",
    kind = "ElasticQuota",
    doc = "ElasticQuota sets elastic quota restrictions per namespace",
    plural = "elasticquotas",
    namespaced,
    status = "ElasticQuotaStatus",
    derive = "PartialEq",
    derive = "Default"
)]
pub struct ElasticQuotaSpec {
    pub min: Option<ResourceList>,
    pub max: Option<ResourceList>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ElasticQuotaStatus {
    pub used: Option<ResourceList>,
}

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "scheduling.sigs.k8s.io",
    version = "v1alpha1",
    kind = "PodGroup",
    doc = "PodGroup is a collection of Pod; used for batch workload",
    plural = "podgroups",
    namespaced,
    status = "PodGroupStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    pub min_member: Option<i32>,
    pub min_resources: Option<ResourceList>,
    pub schedule_timeout_seconds: Option<i32>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// `Pending`, `PreScheduling`, `Scheduling`, `Scheduled`, `Running`, `Finished`,
    /// `Failed` or `Unknown`.
    pub phase: Option<String>,
    pub occupied_by: Option<String>,
    pub scheduled: Option<i32>,
    pub running: Option<i32>,
    pub succeeded: Option<i32>,
    pub failed: Option<i32>,
    pub schedule_start_time: Option<Time>,
}

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "quota.koordinator.sh",
    version = "v1alpha1",
    kind = "ElasticQuotaProfile",
    doc = "ElasticQuotaProfile is the Schema for the ElasticQuotaProfile API",
    plural = "elasticquotaprofiles",
    namespaced,
    shortname = "eqp",
    status = "ElasticQuotaProfileStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["nodeSelector", "quotaName"]))]
pub struct ElasticQuotaProfileSpec {
    #[serde(default)]
    pub quota_name: String,
    pub quota_labels: Option<BTreeMap<String, String>>,
    pub resource_ratio: Option<String>,
    pub node_selector: Option<LabelSelector>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ElasticQuotaProfileStatus {}

/// An ElasticQuota as the webhooks and the scheduler read it: tree position, bounds and
/// Koordinator's labels and annotations, parsed once.
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
    /// `allow-lent-resource` (default true): an idle quota lends its min.
    pub lends: bool,
    /// A tree root's `total-resource` annotation (what its tree shares).
    pub total_resource: Option<Amounts>,
}

fn flag(m: &BTreeMap<String, String>, key: &str) -> bool {
    m.get(key).is_some_and(|v| v == "true")
}

impl QuotaInfo {
    /// Reads a quota; errors name the annotation that does not parse.
    pub fn from_quota(q: &ElasticQuota) -> Result<QuotaInfo, FieldError> {
        let labels = q.metadata.labels.clone().unwrap_or_default();
        let ann = q.metadata.annotations.clone().unwrap_or_default();
        let field = |key: &str| format!("metadata.annotations[{key}]");
        let json_list = |key: &str| -> Result<Vec<String>, FieldError> {
            match ann.get(key).map(|s| s.trim()).filter(|s| !s.is_empty()) {
                None => Ok(Vec::new()),
                Some(raw) => serde_json::from_str(raw).map_err(|e| {
                    FieldError::new(field(key), format!("not a JSON list of strings: {e}"))
                }),
            }
        };
        let resource_list = |key: &str| -> Result<Option<Amounts>, FieldError> {
            match ann.get(key).map(|s| s.trim()) {
                None | Some("") => Ok(None),
                Some(raw) => {
                    let list: ResourceList = serde_json::from_str(raw).map_err(|e| {
                        FieldError::new(field(key), format!("not a resource list: {e}"))
                    })?;
                    Ok(Some(amounts(Some(&list))))
                }
            }
        };
        let shared_weight = resource_list(ANNOTATION_QUOTA_SHARED_WEIGHT)?;
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
            total_resource: resource_list(ANNOTATION_QUOTA_TOTAL_RESOURCE)?,
            lends: labels
                .get(LABEL_QUOTA_ALLOW_LENT)
                .is_none_or(|v| v != "false"),
            used: amounts(q.status.as_ref().and_then(|s| s.used.as_ref())),
            namespace: q.metadata.namespace.clone().unwrap_or_default(),
            name,
        })
    }

    pub fn from_value(v: &serde_json::Value) -> Result<QuotaInfo, FieldError> {
        let q: ElasticQuota = crate::api::decode::from_value(v.clone())
            .map_err(|e| FieldError::whole(format!("decoding the ElasticQuota: {e}")))?;
        QuotaInfo::from_quota(&q)
    }
}
