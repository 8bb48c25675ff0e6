//! `colocation-config`: how much of a node's slack is sold as batch and mid resources.

use crate::api::field::FieldError;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::overlay;
use crate::api::extension::keys::*;
use crate::api::selector::label_selector_matches;
use crate::api::slo::nodemetric::AggregatePolicy;

/// One colocation strategy; every field optional so node configs can override a subset.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ColocationStrategy {
    pub enable: Option<bool>,
    pub metric_aggregate_duration_seconds: Option<i64>,
    pub metric_report_interval_seconds: Option<i64>,
    pub metric_aggregate_policy: Option<AggregatePolicy>,
    pub metric_memory_collect_policy: Option<String>,
    pub cpu_reclaim_threshold_percent: Option<i64>,
    pub cpu_calculate_policy: Option<String>,
    pub memory_reclaim_threshold_percent: Option<i64>,
    pub memory_calculate_policy: Option<String>,
    pub degrade_time_minutes: Option<i64>,
    pub update_time_threshold_seconds: Option<i64>,
    pub resource_diff_threshold: Option<f64>,
    pub mid_reclaim_mode: Option<String>,
    #[serde(rename = "midCPUThresholdPercent")]
    pub mid_cpu_threshold_percent: Option<i64>,
    pub mid_memory_threshold_percent: Option<i64>,
    pub mid_unallocated_percent: Option<i64>,
    #[serde(rename = "midStaticCPUReservedPercent")]
    pub mid_static_cpu_reserved_percent: Option<i64>,
    pub mid_static_memory_reserved_percent: Option<i64>,
    #[serde(rename = "batchCPUThresholdPercent")]
    pub batch_cpu_threshold_percent: Option<i64>,
    pub batch_memory_threshold_percent: Option<i64>,
    pub extensions: Option<BTreeMap<String, Value>>,
}

/// A node-specific override, selected by labels.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeColocationCfg {
    pub name: Option<String>,
    pub node_selector: Option<LabelSelector>,
    #[serde(flatten)]
    pub strategy: ColocationStrategy,
}

/// The whole key: the cluster strategy inline plus `nodeConfigs`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ColocationCfg {
    #[serde(flatten)]
    pub cluster: ColocationStrategy,
    pub node_configs: Option<Vec<NodeColocationCfg>>,
}

/// `usage` (default), `request` (memory only) or `maxUsageRequest`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CalculatePolicy {
    #[default]
    Usage,
    Request,
    MaxUsageRequest,
}

impl CalculatePolicy {
    pub fn parse(s: Option<&str>) -> CalculatePolicy {
        match s {
            Some("request") => CalculatePolicy::Request,
            Some("maxUsageRequest") => CalculatePolicy::MaxUsageRequest,
            _ => CalculatePolicy::Usage,
        }
    }
}

impl ColocationStrategy {
    /// Koordinator's defaults (`pkg/util/sloconfig/colocation_config.go`).
    pub fn defaults() -> ColocationStrategy {
        ColocationStrategy {
            enable: Some(false),
            metric_aggregate_duration_seconds: Some(300),
            metric_report_interval_seconds: Some(60),
            metric_aggregate_policy: Some(AggregatePolicy {
                durations: Some(vec!["5m0s".into(), "10m0s".into(), "30m0s".into()]),
            }),
            metric_memory_collect_policy: Some("usageWithoutPageCache".into()),
            cpu_reclaim_threshold_percent: Some(60),
            cpu_calculate_policy: Some("usage".into()),
            memory_reclaim_threshold_percent: Some(65),
            memory_calculate_policy: Some("usage".into()),
            degrade_time_minutes: Some(15),
            update_time_threshold_seconds: Some(300),
            resource_diff_threshold: Some(0.1),
            mid_cpu_threshold_percent: Some(100),
            mid_memory_threshold_percent: Some(100),
            mid_unallocated_percent: Some(0),
            mid_static_cpu_reserved_percent: Some(0),
            mid_static_memory_reserved_percent: Some(0),
            ..Default::default()
        }
    }

    /// `IsColocationStrategyValid`: the first violated rule, if any.
    pub fn validate(&self) -> Result<(), FieldError> {
        fn positive(name: &str, v: Option<i64>) -> Result<(), FieldError> {
            match v {
                Some(x) if x <= 0 => Err(FieldError::new(name, format!("must be > 0, got {x}"))),
                _ => Ok(()),
            }
        }
        fn non_negative(name: &str, v: Option<i64>) -> Result<(), FieldError> {
            match v {
                Some(x) if x < 0 => Err(FieldError::new(name, format!("must be >= 0, got {x}"))),
                _ => Ok(()),
            }
        }
        fn percent(name: &str, v: Option<i64>) -> Result<(), FieldError> {
            match v {
                Some(x) if !(0..=100).contains(&x) => Err(FieldError::new(
                    name,
                    format!("must be within 0..100, got {x}"),
                )),
                _ => Ok(()),
            }
        }
        positive(
            "metricAggregateDurationSeconds",
            self.metric_aggregate_duration_seconds,
        )?;
        positive(
            "metricReportIntervalSeconds",
            self.metric_report_interval_seconds,
        )?;
        if self.metric_memory_collect_policy.as_deref() == Some("") {
            return Err(FieldError::new(
                "metricMemoryCollectPolicy",
                "must not be empty",
            ));
        }
        non_negative(
            "cpuReclaimThresholdPercent",
            self.cpu_reclaim_threshold_percent,
        )?;
        non_negative(
            "memoryReclaimThresholdPercent",
            self.memory_reclaim_threshold_percent,
        )?;
        positive("degradeTimeMinutes", self.degrade_time_minutes)?;
        positive(
            "updateTimeThresholdSeconds",
            self.update_time_threshold_seconds,
        )?;
        if let Some(d) = self.resource_diff_threshold
            && d <= 0.0
        {
            return Err(FieldError::new(
                "resourceDiffThreshold",
                format!("must be > 0, got {d}"),
            ));
        }
        percent("midCPUThresholdPercent", self.mid_cpu_threshold_percent)?;
        percent(
            "midMemoryThresholdPercent",
            self.mid_memory_threshold_percent,
        )?;
        percent("midUnallocatedPercent", self.mid_unallocated_percent)?;
        non_negative(
            "midStaticCPUReservedPercent",
            self.mid_static_cpu_reserved_percent,
        )?;
        non_negative(
            "midStaticMemoryReservedPercent",
            self.mid_static_memory_reserved_percent,
        )?;
        non_negative("batchCPUThresholdPercent", self.batch_cpu_threshold_percent)?;
        non_negative(
            "batchMemoryThresholdPercent",
            self.batch_memory_threshold_percent,
        )?;
        Ok(())
    }

    pub fn enabled(&self) -> bool {
        self.enable == Some(true)
    }
}

impl ColocationCfg {
    /// Defaults overlaid with what the user wrote; node configs pre-merged onto the
    /// cluster strategy (an invalid node result falls back to the cluster strategy).
    pub fn from_user(user: ColocationCfg) -> Result<ColocationCfg, FieldError> {
        let cluster = overlay(&ColocationStrategy::defaults(), &user.cluster);
        cluster.validate()?;
        let node_configs = user.node_configs.map(|list| {
            list.into_iter()
                .map(|nc| {
                    let merged = overlay(&cluster, &nc.strategy);
                    let strategy = if merged.validate().is_ok() {
                        merged
                    } else {
                        cluster.clone()
                    };
                    NodeColocationCfg { strategy, ..nc }
                })
                .collect()
        });
        Ok(ColocationCfg {
            cluster,
            node_configs,
        })
    }

    pub fn defaults() -> ColocationCfg {
        ColocationCfg {
            cluster: ColocationStrategy::defaults(),
            node_configs: None,
        }
    }

    /// `GetNodeColocationStrategy`: cluster ← first matching node config ← node
    /// annotation ← node ratio labels.
    pub fn for_node(&self, node: &Node) -> ColocationStrategy {
        let labels = node.metadata.labels.as_ref();
        let mut s = self
            .node_configs
            .iter()
            .flatten()
            .find(|nc| label_selector_matches(nc.node_selector.as_ref(), labels))
            .map(|nc| nc.strategy.clone())
            .unwrap_or_else(|| self.cluster.clone());
        let anno = node.metadata.annotations.as_ref();
        if let Some(raw) = anno.and_then(|a| a.get(ANNOTATION_NODE_COLOCATION_STRATEGY))
            && let Ok(over) = serde_json::from_str::<ColocationStrategy>(raw)
        {
            s = overlay(&s, &over);
        }
        let ratio = |key: &str| -> Option<i64> {
            let v: f64 = labels?.get(key)?.trim().parse().ok()?;
            (v >= 0.0 && v.is_finite()).then_some((v * 100.0) as i64)
        };
        if let Some(p) = ratio(LABEL_NODE_CPU_RECLAIM_RATIO) {
            s.cpu_reclaim_threshold_percent = Some(p);
        }
        if let Some(p) = ratio(LABEL_NODE_MEMORY_RECLAIM_RATIO) {
            s.memory_reclaim_threshold_percent = Some(p);
        }
        if let Some(p) = ratio(LABEL_NODE_MID_CPU_RESERVED_RATIO) {
            s.mid_static_cpu_reserved_percent = Some(p);
        }
        if let Some(p) = ratio(LABEL_NODE_MID_MEMORY_RESERVED_RATIO) {
            s.mid_static_memory_reserved_percent = Some(p);
        }
        s
    }

    /// Colocation is on for a node only when both the cluster and the node say so.
    pub fn node_enabled(&self, node: &Node) -> bool {
        self.enabled_for(&self.for_node(node))
    }

    /// The same rule for a node strategy already resolved with `for_node`.
    pub fn enabled_for(&self, node_strategy: &ColocationStrategy) -> bool {
        self.cluster.enabled() && node_strategy.enabled()
    }
}
