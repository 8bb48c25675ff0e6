//! ScheduleExplanation (`sched-exp`): a user names a pending pod (or job) in
//! `spec.questionObjectKey`, the scheduler answers in `status` why it is pending, per
//! topology domain and failing plugin, and whether preemption might help.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "scheduling.koordinator.sh",
    version = "v1alpha1",
    kind = "ScheduleExplanation",
    doc = "ScheduleExplanation is the Schema for the scheduleexplanations API",
    plural = "scheduleexplanations",
    namespaced,
    shortname = "sched-exp",
    status = "ScheduleExplanationStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleExplanationSpec {
    /// `namespace/name` of the pod (or job) asked about.
    pub question_object_key: Option<String>,
    /// The object itself, for a question about one not yet created.
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::preserve_unknown_value")]
    pub question_object_template: Option<serde_json::Value>,
    /// How long the answer is kept (Go duration).
    #[schemars(extend("x-koord-default" = "24h"))]
    pub ttl: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleExplanationStatus {
    pub schedulable: Option<bool>,
    pub schedulable_after_preemption: Option<bool>,
    pub failed_message: Option<String>,
    pub detailed_explanation: Option<Vec<DetailedExplanation>>,
    pub last_update_time: Option<Time>,
}

/// The answer for one topology domain (the whole cluster when not topology-aware).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DetailedExplanation {
    pub topology_domain: Option<String>,
    pub schedulable: Option<bool>,
    pub schedulable_after_preemption: Option<bool>,
    pub failed_message: Option<String>,
    pub schedule_explanation: Option<Explanation>,
    pub preempt_explanation: Option<Explanation>,
    pub node_possible_victims: Option<Vec<NodePossibleVictims>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub schedulable: Option<bool>,
    pub failed_message: Option<String>,
    pub node_failed_details: Option<Vec<NodeFailedDetail>>,
    pub feasible_scheduling_result: Option<Vec<FeasibleSchedulingResult>>,
}

/// The nodes one plugin refused for one reason.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeFailedDetail {
    pub failed_plugin: Option<String>,
    pub reason: Option<String>,
    pub failed_nodes: Option<Vec<String>>,
    pub preempt_might_help: Option<bool>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FeasibleSchedulingResult {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub uid: Option<String>,
    pub node_name: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodePossibleVictims {
    pub node_name: Option<String>,
    pub possible_victims: Option<Vec<PossibleVictim>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PossibleVictim {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub uid: Option<String>,
    pub is_nominated_pod: Option<bool>,
}
