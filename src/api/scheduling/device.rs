//! Device: the GPUs/RDMA/FPGA of a node, reported by the koordlet.
//!
//! Device has a `status` but no status subresource upstream, which kube-derive cannot
//! express, so the resource is written by hand.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const DEVICE_API_VERSION: &str = "scheduling.koordinator.sh/v1alpha1";

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    #[serde(default = "device_api_version")]
    pub api_version: String,
    #[serde(default = "device_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeviceSpec,
    pub status: Option<DeviceStatus>,
}

fn device_api_version() -> String {
    DEVICE_API_VERSION.into()
}

fn device_kind() -> String {
    "Device".into()
}

impl Device {
    pub fn new(name: &str, spec: DeviceSpec) -> Self {
        Self {
            api_version: device_api_version(),
            kind: device_kind(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec,
            status: None,
        }
    }
}

impl kube::Resource for Device {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Device".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "scheduling.koordinator.sh".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "devices".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DeviceSpec {
    pub devices: Option<Vec<DeviceInfo>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["health"]))]
pub struct DeviceInfo {
    /// `gpu`, `fpga` or `rdma`.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(rename = "id")]
    pub uuid: Option<String>,
    pub minor: Option<i32>,
    #[serde(rename = "moduleID")]
    pub module_id: Option<i32>,
    #[serde(default)]
    #[schemars(extend("x-koord-default" = false))]
    pub health: bool,
    pub resources: Option<BTreeMap<String, Quantity>>,
    pub topology: Option<DeviceTopology>,
    pub vf_groups: Option<Vec<VirtualFunctionGroup>>,
    pub conditions: Option<Vec<Condition>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[schemars(extend("required" = ["nodeID", "pcieID", "socketID"]))]
pub struct DeviceTopology {
    #[serde(rename = "socketID", default)]
    pub socket_id: i32,
    #[serde(rename = "nodeID", default)]
    pub node_id: i32,
    #[serde(rename = "pcieID", default)]
    pub pcie_id: String,
    #[serde(rename = "busID")]
    pub bus_id: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct VirtualFunctionGroup {
    pub labels: Option<BTreeMap<String, String>>,
    pub vfs: Option<Vec<VirtualFunction>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[schemars(extend("required" = ["minor"]))]
pub struct VirtualFunction {
    #[serde(default)]
    pub minor: i32,
    #[serde(rename = "busID")]
    pub bus_id: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DeviceStatus {
    pub allocations: Option<Vec<DeviceAllocation>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DeviceAllocation {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub entries: Option<Vec<DeviceAllocationItem>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DeviceAllocationItem {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uuid: Option<String>,
    pub minors: Option<Vec<i32>>,
}
