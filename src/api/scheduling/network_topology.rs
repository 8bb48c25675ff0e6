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

/// The root of every topology tree.
pub const CLUSTER_LAYER: &str = "ClusterTopologyLayer";
/// The leaf layer: one domain per node.
pub const NODE_LAYER: &str = "NodeTopologyLayer";
/// The ClusterNetworkTopology the scheduler builds its tree from.
pub const DEFAULT_NAME: &str = "default";

/// `gang.scheduling.koordinator.sh/network-topology-spec` on a PodGroup (or its pods):
/// where the gang's members should gather.
pub const ANN_SPEC: &str = "gang.scheduling.koordinator.sh/network-topology-spec";
/// `gang.scheduling.koordinator.sh/network-topology-index`: a member's place in the
/// gang's order (members with an index first, then by name).
pub const ANN_INDEX: &str = "gang.scheduling.koordinator.sh/network-topology-index";
/// `scheduling.koordinator.sh/network-topology-selector`: pods sharing a value are kept
/// close (topology-ordered scoring).
pub const ANN_SELECTOR: &str = "scheduling.koordinator.sh/network-topology-selector";

/// The annotation's value.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatherSpec {
    #[serde(default)]
    pub gather_strategy: Vec<GatherRule>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatherRule {
    pub layer: String,
    /// `MustGather` or `PreferGather`.
    pub strategy: String,
    #[serde(default)]
    pub pod_count_multiple: i64,
}

impl GatherSpec {
    /// The spec in `annotations`; a malformed one is `Err` (Koordinator logs it and the
    /// gang has no spec).
    pub fn from_annotations(
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<GatherSpec>, serde_json::Error> {
        match annotations.get(ANN_SPEC).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => serde_json::from_str(s).map(Some),
        }
    }
}
