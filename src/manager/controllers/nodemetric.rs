//! NodeMetric controller (`pkg/slo-controller/nodemetric/`): one NodeMetric per Node, same name, whose spec carries
//! the collect policy from the node's colocation strategy.

use k8s_openapi::api::core::v1::Node;

use crate::api::slo::nodemetric::{NodeMetricCollectPolicy, NodeMetricSpec};
use crate::api::sloconfig::{ColocationStrategy, SloConfig};

/// The spec the node's NodeMetric should have.
pub fn desired_spec(cfg: &SloConfig, node: &Node) -> NodeMetricSpec {
    let d = ColocationStrategy::defaults();
    let s = cfg.colocation.for_node(node);
    let src = if s.validate().is_ok() && s.enabled() {
        &s
    } else {
        &d
    };
    NodeMetricSpec {
        metric_collect_policy: Some(NodeMetricCollectPolicy {
            aggregate_duration_seconds: src
                .metric_aggregate_duration_seconds
                .or(d.metric_aggregate_duration_seconds),
            report_interval_seconds: src
                .metric_report_interval_seconds
                .or(d.metric_report_interval_seconds),
            node_aggregate_policy: src
                .metric_aggregate_policy
                .clone()
                .or(d.metric_aggregate_policy.clone()),
            node_memory_collect_policy: src
                .metric_memory_collect_policy
                .clone()
                .or(d.metric_memory_collect_policy.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_unless_enabled() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        let off = desired_spec(&SloConfig::default(), &node);
        let p = off.metric_collect_policy.unwrap();
        assert_eq!(
            (p.aggregate_duration_seconds, p.report_interval_seconds),
            (Some(300), Some(60))
        );
        let data = [(
            "colocation-config".to_string(),
            json!({"enable": true, "metricReportIntervalSeconds": 20}).to_string(),
        )]
        .into_iter()
        .collect();
        let (cfg, _) = SloConfig::parse(Some(&data), &SloConfig::default());
        let p = desired_spec(&cfg, &node).metric_collect_policy.unwrap();
        assert_eq!(p.report_interval_seconds, Some(20));
    }
}
