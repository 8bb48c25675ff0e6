//! ClusterNetworkTopology: the layers of a cluster's network (e.g. spine, block, node),
//! each named by the node labels that carry it; the scheduler places network-topology
//! aware gangs within one domain of a layer.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "scheduling.koordinator.sh",
    version = "v1alpha1",
    kind = "ClusterNetworkTopology",
    doc = "ClusterNetworkTopology is the Schema for the clusternetworktopologies API",
    plural = "clusternetworktopologies",
    status = "ClusterNetworkTopologyStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["networkTopologySpec"]))]
pub struct ClusterNetworkTopologySpec {
    #[serde(default)]
    pub network_topology_spec: Vec<NetworkTopologyLayer>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologyLayer {
    /// Node label keys whose values name this layer's domains.
    pub label_key: Option<Vec<String>>,
    pub parent_topology_layer: Option<String>,
    pub topology_layer: String,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkTopologyStatus {
    pub detail_status: Option<Vec<NetworkTopologyDetailStatus>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologyDetailStatus {
    pub topology_info: TopologyInfo,
    pub parent_topology_info: Option<TopologyInfo>,
    pub child_topology_layer: Option<String>,
    pub child_topology_names: Option<Vec<String>>,
    pub node_num: i32,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyInfo {
    pub topology_layer: String,
    pub topology_name: String,
}
