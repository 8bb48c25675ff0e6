//! NodeSLO controller (`pkg/slo-controller/nodeslo/`): renders each node's NodeSLO spec from the ConfigMap.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::extension::keys::ANNOTATION_NODE_NETWORK_BANDWIDTH;
use crate::api::slo::nodeslo::NodeSLOSpec;
use crate::api::sloconfig::SloConfig;

pub fn desired_spec(cfg: &SloConfig, node: &Node) -> NodeSLOSpec {
    let bandwidth = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_NETWORK_BANDWIDTH));
    let system = match bandwidth {
        None => cfg.system.for_node(node),
        // A bad annotation renders no system strategy at all, as Koordinator does.
        Some(raw) => crate::api::quantity::parse(raw).ok().and_then(|_| {
            let mut s = cfg.system.for_node(node)?;
            s.total_network_bandwidth = Some(Quantity(raw.trim().to_string()));
            Some(s)
        }),
    };
    NodeSLOSpec {
        resource_used_threshold_with_be: cfg.threshold.for_node(node),
        resource_qos_strategy: cfg.qos.for_node(node),
        cpu_burst_strategy: cfg.cpu_burst.for_node(node),
        system_strategy: system,
        extensions: None,
        host_applications: cfg.host_applications.for_node(node),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_node_strategy_and_bandwidth() {
        let data = [(
            "resource-threshold-config".to_string(),
            json!({"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 60},
                   "nodeStrategies": [{"nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressThresholdPercent": 40}]})
            .to_string(),
        )]
        .into_iter()
        .collect();
        let (cfg, _) = SloConfig::parse(Some(&data), &SloConfig::default());
        let node: Node =
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": {"pool": "a"},
            "annotations": {"node.koordinator.sh/network-bandwidth": "10G"}}}))
            .unwrap();
        let spec = desired_spec(&cfg, &node);
        let t = spec.resource_used_threshold_with_be.unwrap();
        assert_eq!(
            (t.enable, t.cpu_suppress_threshold_percent),
            (Some(true), Some(40))
        );
        assert_eq!(
            spec.system_strategy.unwrap().total_network_bandwidth,
            Some(Quantity("10G".into()))
        );
        assert_eq!(
            spec.cpu_burst_strategy
                .unwrap()
                .config
                .cfs_quota_burst_percent,
            Some(300)
        );
        let bad: Node = serde_json::from_value(json!({"metadata": {"name": "n",
            "annotations": {"node.koordinator.sh/network-bandwidth": "lots"}}}))
        .unwrap();
        assert!(desired_spec(&cfg, &bad).system_strategy.is_none());
    }
}
