//! Quota and gang kinds: ElasticQuota and PodGroup (`scheduling.sigs.k8s.io/v1alpha1`,
//! from scheduler-plugins) and ElasticQuotaProfile (`quota.koordinator.sh/v1alpha1`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    shortname = "eq",
    shortname = "eqs",
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
    shortname = "pg",
    shortname = "pgs",
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
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ElasticQuotaProfileSpec {
    #[serde(default)]
    pub quota_name: String,
    pub quota_labels: Option<BTreeMap<String, String>>,
    pub resource_ratio: Option<String>,
    pub node_selector: Option<LabelSelector>,
}
