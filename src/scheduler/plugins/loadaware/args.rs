//! `LoadAwareSchedulingArgs` with Koordinator's v1 defaults and validation.

use crate::api::field::FieldError;
use std::collections::BTreeMap;

use serde::Deserialize;

/// Thresholds and aggregation, from the args or a node's
/// `scheduling.koordinator.sh/usage-thresholds` annotation.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Aggregated {
    pub usage_thresholds: Option<BTreeMap<String, i64>>,
    pub usage_aggregation_type: Option<String>,
    pub usage_aggregated_duration: Option<String>,
    pub score_aggregation_type: Option<String>,
    pub score_aggregated_duration: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub filter_expired_node_metrics: Option<bool>,
    pub enable_schedule_when_node_metrics_expired: Option<bool>,
    pub node_metric_expiration_seconds: Option<i64>,
    pub resource_weights: Option<BTreeMap<String, i64>>,
    pub dominant_resource_weight: Option<i64>,
    pub usage_thresholds: Option<BTreeMap<String, i64>>,
    pub prod_usage_thresholds: Option<BTreeMap<String, i64>>,
    pub prod_usage_include_sys: Option<bool>,
    pub score_according_prod_usage: Option<bool>,
    pub estimator: Option<String>,
    pub estimated_scaling_factors: Option<BTreeMap<String, i64>>,
    pub estimated_seconds_after_pod_scheduled: Option<i64>,
    pub estimated_seconds_after_initialized: Option<i64>,
    pub allow_customize_estimation: Option<bool>,
    pub aggregated: Option<Aggregated>,
    pub supported_resources: Option<Vec<String>>,
}

/// The args after defaulting; what the plugin runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    pub filter_expired: bool,
    pub schedule_when_expired: bool,
    pub expiration_seconds: i64,
    pub weights: BTreeMap<String, i64>,
    pub dominant_weight: i64,
    pub thresholds: BTreeMap<String, i64>,
    pub prod_thresholds: BTreeMap<String, i64>,
    pub prod_include_sys: bool,
    pub score_by_prod: bool,
    pub factors: BTreeMap<String, i64>,
    pub seconds_after_scheduled: Option<i64>,
    pub seconds_after_initialized: Option<i64>,
    pub allow_customize: bool,
    pub aggregated: Aggregated,
}

const AGGREGATION_TYPES: [&str; 5] = ["avg", "p50", "p90", "p95", "p99"];

fn check_map(
    field: &str,
    m: &BTreeMap<String, i64>,
    lo: i64,
    lo_inclusive: bool,
) -> Result<(), FieldError> {
    for (k, v) in m {
        let low = if lo_inclusive { *v < lo } else { *v <= lo };
        if low || *v > 100 {
            let range = if lo_inclusive {
                format!("[{lo}, 100]")
            } else {
                format!("({lo}, 100]")
            };
            return Err(FieldError::new(
                format!("{field}[{k}]"),
                format!("{v} is not in {range}"),
            ));
        }
    }
    Ok(())
}

impl Args {
    /// Defaults as Koordinator's v1 `SetDefaults_LoadAwareSchedulingArgs`, then validation;
    /// errors name the field.
    pub fn effective(self) -> Result<Effective, FieldError> {
        let dominant = self.dominant_resource_weight.unwrap_or(0);
        let weights = match self.resource_weights {
            Some(w) => w,
            None if dominant == 0 => BTreeMap::from([("cpu".into(), 1), ("memory".into(), 1)]),
            None => BTreeMap::new(),
        };
        let mut factors = BTreeMap::from([("cpu".to_string(), 85), ("memory".to_string(), 70)]);
        factors.extend(self.estimated_scaling_factors.unwrap_or_default());
        let e = Effective {
            filter_expired: self.filter_expired_node_metrics.unwrap_or(true),
            schedule_when_expired: self
                .enable_schedule_when_node_metrics_expired
                .unwrap_or(false),
            expiration_seconds: self.node_metric_expiration_seconds.unwrap_or(180),
            weights,
            dominant_weight: dominant,
            thresholds: self
                .usage_thresholds
                .unwrap_or_else(|| BTreeMap::from([("cpu".into(), 65), ("memory".into(), 95)])),
            prod_thresholds: self.prod_usage_thresholds.unwrap_or_default(),
            prod_include_sys: self.prod_usage_include_sys.unwrap_or(false),
            score_by_prod: self.score_according_prod_usage.unwrap_or(false),
            factors,
            seconds_after_scheduled: self.estimated_seconds_after_pod_scheduled,
            seconds_after_initialized: self.estimated_seconds_after_initialized,
            allow_customize: self.allow_customize_estimation.unwrap_or(false),
            aggregated: self.aggregated.unwrap_or_default(),
        };
        if let Some(est) = self
            .estimator
            .as_deref()
            .filter(|s| !s.is_empty() && *s != "default")
        {
            return Err(FieldError::new(
                "estimator",
                format!("{est:?} is not known (only the default estimator)"),
            ));
        }
        e.validate()?;
        Ok(e)
    }
}

impl Effective {
    fn validate(&self) -> Result<(), FieldError> {
        if self.expiration_seconds <= 0 {
            return Err(FieldError::new(
                "nodeMetricExpirationSeconds",
                format!("{} must be > 0", self.expiration_seconds),
            ));
        }
        check_map("resourceWeights", &self.weights, 0, false)?;
        if !(0..=100).contains(&self.dominant_weight) {
            return Err(FieldError::new(
                "dominantResourceWeight",
                format!("{} is not in [0, 100]", self.dominant_weight),
            ));
        }
        check_map("usageThresholds", &self.thresholds, 0, true)?;
        check_map("prodUsageThresholds", &self.prod_thresholds, 0, true)?;
        check_map("estimatedScalingFactors", &self.factors, 0, false)?;
        if let Some(k) = self.weights.keys().find(|k| !self.factors.contains_key(*k)) {
            return Err(FieldError::new(
                format!("resourceWeights[{k}]"),
                "the resource has no estimatedScalingFactors entry",
            ));
        }
        let agg = &self.aggregated;
        if let Some(t) = &agg.usage_thresholds {
            check_map("aggregated.usageThresholds", t, 0, true)?;
        }
        for (field, v) in [
            (
                "aggregated.usageAggregationType",
                &agg.usage_aggregation_type,
            ),
            (
                "aggregated.scoreAggregationType",
                &agg.score_aggregation_type,
            ),
        ] {
            if let Some(t) = v.as_deref().filter(|t| !t.is_empty())
                && !AGGREGATION_TYPES.contains(&t)
            {
                return Err(FieldError::new(
                    field,
                    format!("{t:?} is not one of {AGGREGATION_TYPES:?}"),
                ));
            }
        }
        for (field, v) in [
            (
                "aggregated.usageAggregatedDuration",
                &agg.usage_aggregated_duration,
            ),
            (
                "aggregated.scoreAggregatedDuration",
                &agg.score_aggregated_duration,
            ),
        ] {
            let d = v.as_deref().filter(|d| !d.is_empty());
            crate::api::duration::field_or(field, d, std::time::Duration::ZERO)?;
        }
        Ok(())
    }
}
