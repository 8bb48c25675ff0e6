//! PodMigrationJob: the descheduler's unit of work.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ReservationSpec;

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "scheduling.koordinator.sh",
    version = "v1alpha1",
    kind = "PodMigrationJob",
    doc = "PodMigrationJob is the Schema for the PodMigrationJob API",
    plural = "podmigrationjobs",
    shortname = "pmj",
    status = "PodMigrationJobStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "The phase of PodMigrationJob"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.status",
        description = "The status of PodMigrationJob"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(
        name = "Reservation",
        type_ = "string",
        json_path = ".spec.reservationOptions.reservationRef.name"
    ),
    printcolumn(
        name = "PodNamespace",
        type_ = "string",
        json_path = ".spec.podRef.namespace"
    ),
    printcolumn(name = "Pod", type_ = "string", json_path = ".spec.podRef.name"),
    printcolumn(name = "NewPod", type_ = "string", json_path = ".status.podRef.name"),
    printcolumn(name = "TTL", type_ = "string", json_path = ".spec.ttl")
)]
#[serde(rename_all = "camelCase")]
pub struct PodMigrationJobSpec {
    pub paused: Option<bool>,
    pub ttl: Option<String>,
    /// `ReservationFirst` (default) or `EvictDirectly`.
    pub mode: Option<String>,
    #[schemars(required)]
    pub pod_ref: Option<ObjectReference>,
    pub reservation_options: Option<PodMigrateReservationOptions>,
    pub delete_options: Option<DeleteOptions>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodMigrateReservationOptions {
    pub reservation_ref: Option<ObjectReference>,
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::preserve_unknown_value")]
    pub template: Option<ReservationTemplateSpec>,
    /// Koordinator's `PodMigrationJobPreemptionOptions` has no fields yet.
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::empty_object")]
    pub preemption_options: Option<serde_json::Value>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ReservationTemplateSpec {
    pub metadata: Option<ObjectMeta>,
    pub spec: Option<ReservationSpec>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodMigrationJobStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Aborted`.
    pub phase: Option<String>,
    pub status: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub conditions: Option<Vec<PodMigrationJobCondition>>,
    pub node_name: Option<String>,
    pub pod_ref: Option<ObjectReference>,
    pub preempted_pods_ref: Option<Vec<ObjectReference>>,
    #[serde(rename = "preemptedPodsReservation")]
    pub preempted_pods_reservations: Option<Vec<PodMigrationJobPreemptedReservation>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodMigrationJobPreemptedReservation {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub node_name: Option<String>,
    pub phase: Option<String>,
    pub preempted_pod_ref: Option<ObjectReference>,
    pub pods_ref: Option<Vec<ObjectReference>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodMigrationJobCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[schemars(extend("x-koord-nullable" = true))]
    pub last_probe_time: Option<Time>,
    #[schemars(extend("x-koord-nullable" = true))]
    pub last_transition_time: Option<Time>,
    pub reason: Option<String>,
    pub message: Option<String>,
}
