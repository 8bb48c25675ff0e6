//! `analysis.koordinator.sh/v1alpha1` Recommendation: resource recommendations for a
//! workload's (or a pod selector's) containers. koord serves the kind so Koordinator's
//! tooling finds it; it computes no recommendations yet.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "analysis.koordinator.sh",
    version = "v1alpha1",
    kind = "Recommendation",
    doc = "Recommendation is the Schema for the recommendations API",
    plural = "recommendations",
    namespaced,
    shortname = "recom",
    status = "RecommendationStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.target.type"),
    printcolumn(
        name = "Kind",
        type_ = "string",
        json_path = ".spec.target.workload.kind"
    ),
    printcolumn(
        name = "Name",
        type_ = "string",
        json_path = ".spec.target.workload.name"
    ),
    printcolumn(
        name = "LastUpdateTime",
        type_ = "date",
        json_path = ".status.updateTime"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationSpec {
    pub target: RecommendationTarget,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationTarget {
    /// `workload` or `podSelector`.
    #[serde(rename = "type")]
    pub type_: String,
    /// CrossVersionObjectReference without the autoscaling/v1 doc's `apiVersion` rule.
    pub workload: Option<CrossVersionObjectReference>,
    pub pod_selector: Option<LabelSelector>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationStatus {
    pub pod_status: Option<RecommendedPodStatus>,
    pub update_time: Option<Time>,
    pub conditions: Option<Vec<Condition>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedPodStatus {
    pub container_statuses: Option<Vec<RecommendedContainerStatus>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedContainerStatus {
    pub container_name: Option<String>,
    pub resources: Option<BTreeMap<String, Quantity>>,
}
