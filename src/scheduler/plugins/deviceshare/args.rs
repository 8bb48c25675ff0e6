//! `DeviceShareArgs` (`pkg/scheduler/apis/config/v1/types.go`) with Koordinator's defaults:
//! LeastAllocated over gpu-memory-ratio, gpu-memory, rdma and fpga, weight 1 each.

use serde::Deserialize;

use super::alloc::Scorer;
use crate::api::extension::resources::{FPGA, GPU_MEMORY, GPU_MEMORY_RATIO, RDMA};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    /// Deprecated upstream; accepted and ignored.
    #[serde(default)]
    pub allocator: Option<String>,
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategy>,
    /// Devices are not aligned with NodeNUMAResource's NUMA choice and offer it no hints.
    #[serde(default, rename = "disableDeviceNUMATopologyAlignment")]
    pub disable_numa_alignment: bool,
    /// Where the GPU shared-resource templates are, and which resources they govern
    /// (Koordinator's default when absent: `koordinator-system/gpu-shared-resource-templates`,
    /// `huawei.com/npu-core`).
    #[serde(default, rename = "gpuSharedResourceTemplatesConfig")]
    pub templates: Option<TemplatesConfig>,
    #[serde(default, rename = "gpuShareUnsupportedModels")]
    pub unsupported_models: Vec<Model>,
}

/// `GPUSharedResourceTemplatesConfig`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TemplatesConfig {
    #[serde(default)]
    pub config_map_namespace: String,
    #[serde(default)]
    pub config_map_name: String,
    #[serde(default)]
    pub matched_resources: Vec<String>,
}

impl TemplatesConfig {
    /// Koordinator's default (the whole config, when none is given).
    pub fn koordinator_default() -> TemplatesConfig {
        TemplatesConfig {
            config_map_namespace: "koordinator-system".into(),
            config_map_name: "gpu-shared-resource-templates".into(),
            matched_resources: vec![crate::api::extension::resources::NPU_CORE.into()],
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScoringStrategy {
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub resources: Option<Vec<ResourceSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    pub name: String,
    #[serde(default)]
    pub weight: i64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub vendor: String,
    pub model: String,
}

impl Args {
    pub fn templates(&self) -> TemplatesConfig {
        self.templates
            .clone()
            .unwrap_or_else(TemplatesConfig::koordinator_default)
    }

    pub fn scorer(&self) -> Result<Scorer, crate::api::field::FieldError> {
        let s = self.scoring_strategy.as_ref();
        let most_allocated = match s.and_then(|s| s.type_.as_deref()) {
            None | Some("") | Some("LeastAllocated") => false,
            Some("MostAllocated") => true,
            Some(other) => {
                return Err(crate::api::field::FieldError::new(
                    format!("scoringStrategy.type {other:?}"),
                    "want LeastAllocated or MostAllocated",
                ));
            }
        };
        let weights = match s.and_then(|s| s.resources.as_ref()) {
            Some(list) => list.iter().map(|r| (r.name.clone(), r.weight)).collect(),
            None => [GPU_MEMORY_RATIO, GPU_MEMORY, RDMA, FPGA]
                .iter()
                .map(|n| (n.to_string(), 1))
                .collect(),
        };
        Ok(Scorer {
            most_allocated,
            weights,
        })
    }
}
