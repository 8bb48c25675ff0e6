//! The XPU device file (`/var/run/koordlet/xpu-device-infos/*`): written by the device
//! daemon (`koord device-scan`, Koordinator's koord-device-daemon), read by the koordlet
//! into the node's Device. Field names are Koordinator's (`pkg/koordlet/util/device.go`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct XpuDevice {
    #[serde(default)]
    pub vendor: String,
    #[serde(default)]
    pub model: String,
    /// The device's identifier.
    #[serde(default)]
    pub uuid: String,
    /// `/dev/<name><minor>`, as a string.
    #[serde(default)]
    pub minor: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<XpuTopology>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<XpuStatus>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct XpuTopology {
    #[serde(default, rename = "p2pLinks", skip_serializing_if = "Vec::is_empty")]
    pub p2p_links: Vec<P2pLink>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub must_honor_partition: bool,
    #[serde(default, rename = "socketID", skip_serializing_if = "String::is_empty")]
    pub socket_id: String,
    #[serde(default, rename = "nodeID", skip_serializing_if = "String::is_empty")]
    pub node_id: String,
    #[serde(default, rename = "pcieID", skip_serializing_if = "String::is_empty")]
    pub pcie_id: String,
    #[serde(default, rename = "busID", skip_serializing_if = "String::is_empty")]
    pub bus_id: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct P2pLink {
    #[serde(default)]
    pub peer_minor: String,
    #[serde(default, rename = "type")]
    pub type_: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct XpuStatus {
    #[serde(default)]
    pub healthy: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub err_code: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub err_message: String,
}
