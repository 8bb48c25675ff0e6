//! Reservation: resources held on a node for the pods that own it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "scheduling.koordinator.sh",
    version = "v1alpha1",
    kind = "Reservation",
    doc = "Reservation is the Schema for the reservation API",
    plural = "reservations",
    status = "ReservationStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "The phase of reservation"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(name = "TTL", type_ = "string", json_path = ".spec.ttl"),
    printcolumn(name = "Expires", type_ = "string", json_path = ".spec.expires")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["owners", "template"]))]
pub struct ReservationSpec {
    /// Scheduled like a pod; a preset `template.spec.nodeName` pins the node.
    #[schemars(schema_with = "crate::api::schema::preserve_unknown_value")]
    pub template: Option<PodTemplateSpec>,
    /// Owner selectors, ORed.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub owners: Vec<ReservationOwner>,
    /// Go duration (`24h`); `0` disables expiry.
    #[schemars(extend("x-koord-default" = "24h"))]
    pub ttl: Option<String>,
    pub expires: Option<Time>,
    pub pre_allocation: Option<bool>,
    #[schemars(extend("x-koord-default" = true))]
    pub allocate_once: Option<bool>,
    /// `""`, `Aligned` or `Restricted`.
    #[schemars(extend("enum" = ["Aligned", "Restricted"]))]
    pub allocate_policy: Option<String>,
    pub unschedulable: Option<bool>,
    pub taints: Option<Vec<Taint>>,
    pub pre_allocation_policy: Option<PreAllocationPolicy>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreAllocationPolicy {
    /// `Default` or `Cluster`.
    #[schemars(extend("x-koord-default" = "Default", "enum" = ["Default", "Cluster"]))]
    pub mode: Option<String>,
    #[schemars(extend("x-koord-default" = false))]
    pub enable_multiple: Option<bool>,
}

/// Fields of one owner selector are ANDed.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ReservationOwner {
    pub object: Option<ObjectReference>,
    pub controller: Option<ReservationControllerReference>,
    pub label_selector: Option<LabelSelector>,
}

/// An OwnerReference plus the namespace it lives in.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend(
    "required" = ["apiVersion", "kind", "name", "uid"],
    "x-kubernetes-map-type" = "atomic"
))]
pub struct ReservationControllerReference {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub uid: Option<String>,
    pub controller: Option<bool>,
    pub block_owner_deletion: Option<bool>,
    pub namespace: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReservationStatus {
    /// `Pending`, `Available`, `Succeeded`, `Waiting` or `Failed`.
    #[schemars(extend("x-koord-default" = "Pending"))]
    pub phase: Option<String>,
    pub conditions: Option<Vec<ReservationCondition>>,
    pub current_owners: Option<Vec<ObjectReference>>,
    pub node_name: Option<String>,
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    pub allocated: Option<BTreeMap<String, Quantity>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReservationCondition {
    /// `Scheduled` or `Ready`.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub status: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_probe_time: Option<Time>,
    pub last_transition_time: Option<Time>,
}
