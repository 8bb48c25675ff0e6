//! `LowNodeLoadArgs` (`descheduler/v1alpha2`) with Koordinator's defaults and validation;
//! the top-level selector, thresholds, weights and anomaly condition become the first node
//! pool `__default_node_pool__`, and pools inherit what they leave unset.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

pub const DEFAULT_POOL: &str = "__default_node_pool__";

/// Resource → percentage of allocatable.
pub type Thresholds = BTreeMap<String, f64>;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AnomalyCondition {
    pub timeout: Option<String>,
    pub consecutive_abnormalities: Option<u32>,
    pub consecutive_normalities: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPool {
    pub name: Option<String>,
    pub node_selector: Option<LabelSelector>,
    pub use_deviation_thresholds: Option<bool>,
    pub high_thresholds: Option<Thresholds>,
    pub low_thresholds: Option<Thresholds>,
    pub prod_high_thresholds: Option<Thresholds>,
    pub prod_low_thresholds: Option<Thresholds>,
    pub resource_weights: Option<BTreeMap<String, i64>>,
    pub anomaly_condition: Option<AnomalyCondition>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Namespaces {
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
}

impl Namespaces {
    /// `ns` is included (or nothing is listed) and not excluded.
    pub fn allows(&self, ns: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|n| n == ns))
            && !self.exclude.iter().any(|n| n == ns)
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodSelector {
    pub name: Option<String>,
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub paused: Option<bool>,
    pub dry_run: Option<bool>,
    pub number_of_nodes: Option<i32>,
    pub node_metric_expiration_seconds: Option<i64>,
    pub evictable_namespaces: Option<Namespaces>,
    pub pod_selectors: Option<Vec<PodSelector>>,
    pub node_fit: Option<bool>,
    pub detector_cache_timeout: Option<String>,
    pub node_pools: Option<Vec<RawPool>>,
    // The top-level pool fields, repeated from RawPool: serde's `flatten` cannot be
    // combined with `deny_unknown_fields`, and a misspelt field must stay an error.
    pub node_selector: Option<LabelSelector>,
    pub use_deviation_thresholds: Option<bool>,
    pub high_thresholds: Option<Thresholds>,
    pub low_thresholds: Option<Thresholds>,
    pub prod_high_thresholds: Option<Thresholds>,
    pub prod_low_thresholds: Option<Thresholds>,
    pub resource_weights: Option<BTreeMap<String, i64>>,
    pub anomaly_condition: Option<AnomalyCondition>,
}

impl RawArgs {
    /// The top-level pool fields.
    fn top(&self) -> RawPool {
        RawPool {
            name: Some(DEFAULT_POOL.into()),
            node_selector: self.node_selector.clone(),
            use_deviation_thresholds: self.use_deviation_thresholds,
            high_thresholds: self.high_thresholds.clone(),
            low_thresholds: self.low_thresholds.clone(),
            prod_high_thresholds: self.prod_high_thresholds.clone(),
            prod_low_thresholds: self.prod_low_thresholds.clone(),
            resource_weights: self.resource_weights.clone(),
            anomaly_condition: self.anomaly_condition.clone(),
        }
    }
}

/// One node pool, every field settled.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub name: String,
    pub node_selector: Option<LabelSelector>,
    pub deviation: bool,
    pub high: Thresholds,
    pub low: Thresholds,
    pub prod_high: Thresholds,
    pub prod_low: Thresholds,
    pub weights: BTreeMap<String, i64>,
    pub anomaly_timeout: Duration,
    pub consecutive_abnormalities: u32,
    pub consecutive_normalities: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    pub paused: bool,
    pub dry_run: bool,
    pub number_of_nodes: i32,
    pub node_metric_expiration: Duration,
    pub namespaces: Namespaces,
    pub pod_selectors: Vec<PodSelector>,
    pub node_fit: bool,
    pub detector_cache_timeout: Duration,
    pub pools: Vec<Pool>,
}

use crate::api::duration::field_or as duration;
use crate::api::field::FieldError;

fn check(name: &str, p: &Pool) -> Result<(), FieldError> {
    let pool = format!("nodePools[{name}]");
    let maps = [
        ("highThresholds", &p.high),
        ("lowThresholds", &p.low),
        ("prodHighThresholds", &p.prod_high),
        ("prodLowThresholds", &p.prod_low),
    ];
    for (field, m) in maps {
        if let Some((r, v)) = m.iter().find(|(_, v)| !(0.0..=100.0).contains(*v)) {
            return Err(FieldError::new(
                format!("{pool}.{field}[{r}]"),
                format!("{v} is not within [0, 100]"),
            ));
        }
    }
    let over = |lo: &Thresholds, hi: &Thresholds| {
        lo.iter()
            .find(|(r, v)| hi.get(*r).is_some_and(|h| *v > h))
            .map(|(r, _)| r.clone())
    };
    for (lo, hi, what) in [
        (&p.low, &p.high, "lowThresholds exceed highThresholds"),
        (
            &p.prod_high,
            &p.high,
            "prodHighThresholds exceed highThresholds",
        ),
        (
            &p.prod_low,
            &p.prod_high,
            "prodLowThresholds exceed prodHighThresholds",
        ),
    ] {
        if let Some(r) = over(lo, hi) {
            return Err(FieldError::new(pool, format!("{what} for {r}")));
        }
    }
    if p.consecutive_abnormalities == 0 || p.consecutive_normalities == 0 {
        return Err(FieldError::new(
            format!("{pool}.anomalyCondition"),
            "consecutive counters must be > 0",
        ));
    }
    Ok(())
}

fn settle(raw: &RawPool, parent: Option<&Pool>, name: String) -> Result<Pool, FieldError> {
    let pick = |own: &Option<Thresholds>, up: Option<&Thresholds>| {
        own.clone().or_else(|| up.cloned()).unwrap_or_default()
    };
    let anomaly = raw.anomaly_condition.clone();
    let (timeout, abn, norm) = match (&anomaly, parent) {
        (Some(a), _) => (
            duration(
                "anomalyCondition.timeout",
                a.timeout.as_deref(),
                Duration::from_secs(60),
            )?,
            a.consecutive_abnormalities.filter(|v| *v > 0).unwrap_or(5),
            // Koordinator only defaults the abnormal counter when both are 0.
            match (a.consecutive_abnormalities, a.consecutive_normalities) {
                (Some(0) | None, Some(0)) => 0,
                (_, n) => n.unwrap_or(3),
            },
        ),
        (None, Some(p)) => (
            p.anomaly_timeout,
            p.consecutive_abnormalities,
            p.consecutive_normalities,
        ),
        (None, None) => (Duration::from_secs(60), 5, 3),
    };
    let mut pool = Pool {
        name,
        node_selector: raw
            .node_selector
            .clone()
            .or_else(|| parent.and_then(|p| p.node_selector.clone())),
        deviation: raw
            .use_deviation_thresholds
            .or(parent.map(|p| p.deviation))
            .unwrap_or(false),
        high: pick(&raw.high_thresholds, parent.map(|p| &p.high)),
        low: pick(&raw.low_thresholds, parent.map(|p| &p.low)),
        prod_high: pick(&raw.prod_high_thresholds, parent.map(|p| &p.prod_high)),
        prod_low: pick(&raw.prod_low_thresholds, parent.map(|p| &p.prod_low)),
        weights: raw
            .resource_weights
            .clone()
            .or_else(|| parent.map(|p| p.weights.clone()))
            .unwrap_or_default(),
        anomaly_timeout: timeout,
        consecutive_abnormalities: abn,
        consecutive_normalities: norm,
    };
    for r in ["cpu", "memory"]
        .into_iter()
        .map(str::to_string)
        .chain(pool.high.keys().cloned())
        .collect::<Vec<_>>()
    {
        let w = pool.weights.entry(r).or_insert(1);
        if *w <= 0 {
            *w = 1;
        }
    }
    check(&pool.name, &pool)?;
    Ok(pool)
}

impl Args {
    pub fn new(raw: RawArgs) -> Result<Args, FieldError> {
        let ns = raw.evictable_namespaces.clone().unwrap_or_default();
        if !ns.include.is_empty() && !ns.exclude.is_empty() {
            return Err(FieldError::new(
                "evictableNamespaces",
                "only one of include and exclude may be set",
            ));
        }
        let top_raw = raw.top();
        let top = settle(&top_raw, None, DEFAULT_POOL.into())?;
        let mut pools = Vec::new();
        let has_top = top_raw.high_thresholds.is_some()
            || top_raw.low_thresholds.is_some()
            || top_raw.node_selector.is_some();
        if has_top || raw.node_pools.as_ref().is_none_or(|p| p.is_empty()) {
            pools.push(top.clone());
        }
        for (i, p) in raw.node_pools.iter().flatten().enumerate() {
            let name = p.name.clone().unwrap_or_else(|| format!("pool-{i}"));
            pools.push(settle(p, Some(&top), name)?);
        }
        let detector = duration(
            "detectorCacheTimeout",
            raw.detector_cache_timeout.as_deref(),
            Duration::from_secs(300),
        )?;
        Ok(Args {
            paused: raw.paused.unwrap_or(false),
            dry_run: raw.dry_run.unwrap_or(false),
            number_of_nodes: raw.number_of_nodes.unwrap_or(0),
            node_metric_expiration: Duration::from_secs(
                raw.node_metric_expiration_seconds.unwrap_or(180).max(0) as u64,
            ),
            namespaces: ns,
            pod_selectors: raw.pod_selectors.unwrap_or_default(),
            node_fit: raw.node_fit.unwrap_or(true),
            detector_cache_timeout: detector,
            pools,
        })
    }
}
