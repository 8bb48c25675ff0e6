//! NodeMetric: the koordlet's usage report for one node, the input of batch overcommit
//! and load-aware scheduling.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ExtensionsMap;
use crate::api::scheduling::DeviceInfo;

pub type ResourceList = BTreeMap<String, Quantity>;

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "slo.koordinator.sh",
    version = "v1alpha1",
    kind = "NodeMetric",
    doc = "NodeMetric is the Schema for the nodemetrics API",
    plural = "nodemetrics",
    status = "NodeMetricStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetricSpec {
    pub metric_collect_policy: Option<NodeMetricCollectPolicy>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetricCollectPolicy {
    pub aggregate_duration_seconds: Option<i64>,
    pub report_interval_seconds: Option<i64>,
    pub node_aggregate_policy: Option<AggregatePolicy>,
    /// `usageWithoutPageCache` (default), `usageWithPageCache` or `usageWithHotPageCache`.
    #[schemars(extend(
        "enum" = ["usageWithHotPageCache", "usageWithoutPageCache", "usageWithPageCache"]
    ))]
    pub node_memory_collect_policy: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct AggregatePolicy {
    /// Go durations such as `5m0s`.
    pub durations: Option<Vec<String>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetricStatus {
    pub update_time: Option<Time>,
    pub node_metric: Option<NodeMetricInfo>,
    pub pods_metric: Option<Vec<PodMetricInfo>>,
    pub host_application_metric: Option<Vec<HostApplicationMetricInfo>>,
    pub prod_reclaimable_metric: Option<ReclaimableMetric>,
    pub prod_peak_metric: Option<ReclaimableMetric>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetricInfo {
    #[serde(default)]
    pub node_usage: ResourceMap,
    pub aggregated_node_usages: Option<Vec<AggregatedUsage>>,
    #[serde(default)]
    pub system_usage: ResourceMap,
    pub aggregated_system_usages: Option<Vec<AggregatedUsage>>,
    pub numa_usages: Option<Vec<NUMAMetricInfo>>,
}

/// `{resources: ResourceList, devices: []DeviceInfo}`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ResourceMap {
    pub resources: Option<ResourceList>,
    pub devices: Option<Vec<DeviceInfo>>,
}

impl ResourceMap {
    pub fn from_resources(resources: ResourceList) -> Self {
        Self {
            resources: Some(resources),
            devices: None,
        }
    }

    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.resources.as_ref().and_then(|r| r.get(name))
    }

    pub fn is_empty(&self) -> bool {
        self.resources.as_ref().is_none_or(|r| r.is_empty())
            && self.devices.as_ref().is_none_or(|d| d.is_empty())
    }
}

/// Usage aggregated over one duration; keys of `usage` are `avg`, `p50`, `p90`, `p95`, `p99`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct AggregatedUsage {
    pub usage: Option<BTreeMap<String, ResourceMap>>,
    pub duration: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NUMAMetricInfo {
    #[serde(rename = "numaNodeID")]
    pub numa_node_id: i32,
    #[serde(default)]
    pub node_usage: ResourceMap,
    #[serde(default)]
    pub system_usage: ResourceMap,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodMetricInfo {
    pub name: Option<String>,
    pub namespace: Option<String>,
    #[serde(default)]
    pub pod_usage: ResourceMap,
    /// Koordinator priority class name (`koord-prod`, ...).
    pub priority: Option<String>,
    /// Koordinator QoS class name (`LS`, `BE`, ...).
    pub qos: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::extensions_map")]
    pub extensions: Option<ExtensionsMap>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct HostApplicationMetricInfo {
    pub name: Option<String>,
    #[serde(default)]
    pub usage: ResourceMap,
    pub priority: Option<String>,
    pub qos: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ReclaimableMetric {
    #[serde(default)]
    pub resource: ResourceMap,
}
