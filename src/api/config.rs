//! `config.koordinator.sh/v1alpha1`: ClusterColocationProfile.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Turns matching pods into colocated pods at admission: QoS, priority, scheduler,
/// labels/annotations and a free-form `patch`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "config.koordinator.sh",
    version = "v1alpha1",
    kind = "ClusterColocationProfile",
    doc = "ClusterColocationProfile is the Schema for the ClusterColocationProfile API",
    plural = "clustercolocationprofiles",
    status = "ClusterColocationProfileStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterColocationProfileSpec {
    pub namespace_selector: Option<LabelSelector>,
    pub selector: Option<LabelSelector>,
    pub probability: Option<IntOrString>,
    #[serde(default)]
    #[schemars(schema_with = "qos_class_schema")]
    pub qos_class: Option<String>,
    pub priority_class_name: Option<String>,
    pub koordinator_priority: Option<i32>,
    pub labels: Option<BTreeMap<String, String>>,
    pub annotations: Option<BTreeMap<String, String>>,
    pub label_keys_mapping: Option<BTreeMap<String, String>>,
    pub annotation_keys_mapping: Option<BTreeMap<String, String>>,
    pub label_suffixes: Option<BTreeMap<String, String>>,
    pub scheduler_name: Option<String>,
    /// A strategic-merge patch applied to the pod; kept verbatim.
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::preserve_unknown_value")]
    pub patch: Option<Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ClusterColocationProfileStatus {}

fn qos_class_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["LSE", "LSR", "LS", "BE", "SYSTEM"]
    })
}
