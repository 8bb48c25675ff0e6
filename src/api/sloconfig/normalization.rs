//! The `cpu-normalization-config` and `resource-amplification-config` keys of
//! `slo-controller-config` (Koordinator's `CPUNormalizationCfg` /
//! `ResourceAmplificationCfg`): a cluster strategy inline, `nodeConfigs[]` selected by
//! labels (the first match wins), each merged onto the cluster one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::overlay;
use crate::api::selector::label_selector_matches;

pub const KEY_CPU_NORMALIZATION: &str = "cpu-normalization-config";
pub const KEY_RESOURCE_AMPLIFICATION: &str = "resource-amplification-config";

/// One CPU model's ratios by Hyper-Threading and Turbo state.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelRatio {
    pub base_ratio: Option<f64>,
    pub hyper_thread_enabled_ratio: Option<f64>,
    pub turbo_enabled_ratio: Option<f64>,
    pub hyper_thread_turbo_enabled_ratio: Option<f64>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CPUNormalizationStrategy {
    pub enable: Option<bool>,
    pub default_ratio: Option<f64>,
    pub ratio_model: Option<BTreeMap<String, ModelRatio>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceAmplificationStrategy {
    pub enable: Option<bool>,
    pub resource_amplification_ratio: Option<BTreeMap<String, f64>>,
}

/// A strategy for the nodes a selector picks.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", bound = "T: Serialize + DeserializeOwned")]
pub struct NodeCfg<T> {
    pub name: Option<String>,
    pub node_selector: Option<LabelSelector>,
    #[serde(flatten)]
    pub strategy: T,
}

/// The cluster strategy inline, plus `nodeConfigs`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", bound = "T: Serialize + DeserializeOwned")]
pub struct NodeScoped<T> {
    #[serde(flatten)]
    pub cluster: T,
    pub node_configs: Option<Vec<NodeCfg<T>>>,
}

impl<T: Default> Default for NodeScoped<T> {
    fn default() -> Self {
        NodeScoped {
            cluster: T::default(),
            node_configs: None,
        }
    }
}

impl<T: Serialize + DeserializeOwned + Clone + Default> NodeScoped<T> {
    /// The user's config over `defaults`, each node config merged onto the cluster one.
    pub fn merged(user: NodeScoped<T>, defaults: &T) -> NodeScoped<T> {
        let cluster = overlay(defaults, &user.cluster);
        let node_configs = user.node_configs.map(|list| {
            list.into_iter()
                .map(|n| NodeCfg {
                    strategy: overlay(&cluster, &n.strategy),
                    ..n
                })
                .collect()
        });
        NodeScoped {
            cluster,
            node_configs,
        }
    }

    /// The strategy for `node`: the first node config whose selector matches, else the
    /// cluster's.
    pub fn for_node(&self, node: &Node) -> &T {
        let labels = node.metadata.labels.as_ref();
        self.node_configs
            .iter()
            .flatten()
            .find(|n| {
                n.node_selector.is_some()
                    && label_selector_matches(n.node_selector.as_ref(), labels)
            })
            .map_or(&self.cluster, |n| &n.strategy)
    }
}

/// Koordinator's defaults: normalization off; amplification unset (off).
pub fn default_cpu_normalization() -> CPUNormalizationStrategy {
    CPUNormalizationStrategy {
        enable: Some(false),
        default_ratio: None,
        ratio_model: Some(BTreeMap::new()),
    }
}

pub type CPUNormalizationCfg = NodeScoped<CPUNormalizationStrategy>;
pub type ResourceAmplificationCfg = NodeScoped<ResourceAmplificationStrategy>;
