//! The NodeSLO keys of `slo-controller-config`: a cluster strategy plus node strategies
//! selected by labels, each pre-merged onto the cluster one.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::overlay;
use crate::api::selector::label_selector_matches;
use crate::api::slo::nodeslo::{
    CPUBurstConfig, CPUBurstStrategy, HostApplicationSpec, ResourceQOSStrategy,
    ResourceThresholdStrategy, SystemStrategy,
};

/// `{clusterStrategy, nodeStrategies[]}`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", bound = "T: Serialize + DeserializeOwned")]
pub struct StrategyCfg<T> {
    pub cluster_strategy: Option<T>,
    pub node_strategies: Option<Vec<NodeStrategy<T>>>,
}

impl<T> Default for StrategyCfg<T> {
    fn default() -> Self {
        StrategyCfg {
            cluster_strategy: None,
            node_strategies: None,
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", bound = "T: Serialize + DeserializeOwned")]
pub struct NodeStrategy<T> {
    pub name: Option<String>,
    pub node_selector: Option<LabelSelector>,
    #[serde(flatten)]
    pub strategy: T,
}

impl<T: Serialize + DeserializeOwned + Clone + Default> StrategyCfg<T> {
    /// Cluster defaults under the user's cluster strategy, node strategies over that.
    pub fn merged(user: StrategyCfg<T>, defaults: &T) -> StrategyCfg<T> {
        let cluster = overlay(defaults, &user.cluster_strategy.unwrap_or_default());
        let nodes = user.node_strategies.map(|list| {
            list.into_iter()
                .map(|ns| NodeStrategy {
                    strategy: overlay(&cluster, &ns.strategy),
                    ..ns
                })
                .collect()
        });
        StrategyCfg {
            cluster_strategy: Some(cluster),
            node_strategies: nodes,
        }
    }

    /// The first node strategy whose selector matches, else the cluster strategy.
    pub fn for_node(&self, node: &Node) -> Option<T> {
        let labels = node.metadata.labels.as_ref();
        self.node_strategies
            .iter()
            .flatten()
            .find(|ns| label_selector_matches(ns.node_selector.as_ref(), labels))
            .map(|ns| ns.strategy.clone())
            .or_else(|| self.cluster_strategy.clone())
    }
}

/// `host-application-config`: no merging, first matching node config wins.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HostApplicationCfg {
    pub applications: Option<Vec<HostApplicationSpec>>,
    pub node_configs: Option<Vec<NodeHostApplicationCfg>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeHostApplicationCfg {
    pub name: Option<String>,
    pub node_selector: Option<LabelSelector>,
    pub applications: Option<Vec<HostApplicationSpec>>,
}

impl HostApplicationCfg {
    pub fn for_node(&self, node: &Node) -> Option<Vec<HostApplicationSpec>> {
        let labels = node.metadata.labels.as_ref();
        self.node_configs
            .iter()
            .flatten()
            .find(|nc| label_selector_matches(nc.node_selector.as_ref(), labels))
            .and_then(|nc| nc.applications.clone())
            .or_else(|| self.applications.clone())
    }
}

pub fn default_threshold() -> ResourceThresholdStrategy {
    ResourceThresholdStrategy {
        enable: Some(false),
        cpu_suppress_threshold_percent: Some(65),
        cpu_suppress_policy: Some("cpuset".into()),
        memory_evict_threshold_percent: Some(70),
        cpu_evict_policy: Some("evictByRealLimit".into()),
        ..Default::default()
    }
}

/// The manager injects no QoS defaults; the koordlet applies its own.
pub fn default_qos() -> ResourceQOSStrategy {
    ResourceQOSStrategy::default()
}

pub fn default_cpu_burst() -> CPUBurstStrategy {
    CPUBurstStrategy {
        config: CPUBurstConfig {
            policy: Some("none".into()),
            cpu_burst_percent: Some(1000),
            cfs_quota_burst_percent: Some(300),
            cfs_quota_burst_period_seconds: Some(-1),
        },
        share_pool_threshold_percent: Some(50),
    }
}

pub fn default_system() -> SystemStrategy {
    SystemStrategy {
        total_network_bandwidth: Some(Quantity("0".into())),
        ..Default::default()
    }
}
