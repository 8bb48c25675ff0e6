//! NodeResourceTopology (`topology.node.k8s.io/v1alpha1`): NUMA zones of a node, written
//! by the koordlet and read by the scheduler. v1alpha1 has no `spec`: its fields sit at
//! the root of the object.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "topology.node.k8s.io",
    version = "v1alpha1",
    kind = "NodeResourceTopology",
    doc = "NodeResourceTopology describes node resources and their topology",
    plural = "noderesourcetopologies",
    shortname = "node-res-topo",
    no_spec,
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourceTopologyFields {
    #[serde(default)]
    pub topology_policies: Vec<String>,
    #[serde(default)]
    pub zones: Vec<Zone>,
    pub attributes: Option<Vec<AttributeInfo>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Zone {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub parent: Option<String>,
    pub costs: Option<Vec<CostInfo>>,
    pub attributes: Option<Vec<AttributeInfo>>,
    pub resources: Option<Vec<ResourceInfo>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct CostInfo {
    pub name: String,
    pub value: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct AttributeInfo {
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ResourceInfo {
    pub name: String,
    pub capacity: Quantity,
    pub allocatable: Quantity,
    pub available: Quantity,
}
