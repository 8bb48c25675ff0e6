//! `MigrationControllerArgs` and upstream `DefaultEvictorArgs` (`descheduler/v1alpha2`)
//! with Koordinator's defaults.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_json::Value;

use crate::descheduler::lownodeload::args::Namespaces;

const GATES: &[&str] = &[
    "MaxUnavailablePerWorkload",
    "MaxMigratingPerWorkload",
    "MaxMigratingPerNode",
    "MaxMigratingPerNamespace",
    "MaxMigratingGlobally",
    "ExpectedReplicas",
    "PVC",
    "BarePods",
    "LocalStorage",
    "SystemCritical",
    "PriorityThreshold",
    "LabelSelector",
    "Namespaces",
    "NodeFit",
];

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriorityThreshold {
    pub value: Option<i32>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectLimiter {
    pub duration: Option<String>,
    pub max_migrating: Option<IntOrString>,
    pub burst: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ArbitrationArgs {
    enabled: Option<bool>,
    interval: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// Some fields are accepted only so Koordinator's files load; koord's settings govern them.
#[allow(dead_code)]
struct RawArgs {
    api_version: Option<String>,
    kind: Option<String>,
    dry_run: Option<bool>,
    max_concurrent_reconciles: Option<i32>,
    evict_failed_bare_pods: Option<bool>,
    evict_all_bare_pods: Option<bool>,
    evict_local_storage_pods: Option<bool>,
    evict_system_critical_pods: Option<bool>,
    ignore_pvc_pods: Option<bool>,
    priority_threshold: Option<PriorityThreshold>,
    label_selector: Option<LabelSelector>,
    namespaces: Option<Namespaces>,
    node_fit: Option<bool>,
    node_selector: Option<String>,
    #[serde(default)]
    skip_eviction_gates: Vec<String>,
    max_migrating_globally: Option<i32>,
    max_migrating_per_node: Option<i32>,
    max_migrating_per_namespace: Option<i32>,
    max_migrating_per_workload: Option<IntOrString>,
    max_unavailable_per_workload: Option<IntOrString>,
    skip_check_expected_replicas: Option<bool>,
    object_limiters: Option<BTreeMap<String, ObjectLimiter>>,
    default_job_mode: Option<String>,
    #[serde(rename = "defaultJobTTL")]
    default_job_ttl: Option<String>,
    scheduler_names: Option<Vec<String>>,
    #[serde(rename = "evictQPS")]
    evict_qps: Option<Value>,
    evict_burst: Option<u32>,
    eviction_policy: Option<String>,
    default_delete_options: Option<Value>,
    arbitration_args: Option<ArbitrationArgs>,
}

/// The most jobs one round steps at once (each step is a few API calls).
const MAX_RECONCILES: i32 = 256;

/// The evictor filter's settings (MigrationController's, or DefaultEvictor's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FilterArgs {
    pub evict_failed_bare_pods: bool,
    pub evict_all_bare_pods: bool,
    pub evict_local_storage_pods: bool,
    pub evict_system_critical_pods: bool,
    pub ignore_pvc_pods: bool,
    pub priority_threshold: Option<PriorityThreshold>,
    pub label_selector: Option<LabelSelector>,
    pub namespaces: Namespaces,
    pub node_fit: bool,
    /// `nodeSelector`: the nodes `nodeFit` looks for room on (all ready nodes when unset).
    pub node_selector: Option<crate::api::selector::Selector>,
}

/// A `nodeSelector` string (`a=b,c in (d)`), checked.
fn node_selector(v: Option<&str>) -> Result<Option<crate::api::selector::Selector>, FieldError> {
    v.filter(|s| !s.is_empty())
        .map(|s| {
            crate::api::selector::Selector::parse(s)
                .map_err(|e| FieldError::new("nodeSelector", e.to_string()))
        })
        .transpose()
}

#[derive(Debug, Clone, PartialEq)]
pub struct MigrationArgs {
    pub dry_run: bool,
    pub filter: FilterArgs,
    pub skip_gates: HashSet<String>,
    pub max_migrating_globally: Option<i32>,
    pub max_migrating_per_node: Option<i32>,
    pub max_migrating_per_namespace: Option<i32>,
    pub max_migrating_per_workload: Option<IntOrString>,
    pub max_unavailable_per_workload: Option<IntOrString>,
    pub skip_check_expected_replicas: bool,
    /// `workload` → (duration, maxMigrating, burst).
    pub object_limiters: BTreeMap<String, (Duration, Option<IntOrString>, u32)>,
    pub default_job_mode: String,
    pub default_job_ttl: Duration,
    pub scheduler_names: Vec<String>,
    pub evict_qps: f64,
    pub evict_burst: u32,
    pub eviction_policy: String,
    pub default_delete_options: Option<Value>,
    pub arbitration_interval: Duration,
    /// `maxConcurrentReconciles` (default 1).
    pub max_concurrent_reconciles: usize,
}

use crate::api::duration::field_or as dur;
use crate::api::field::FieldError;

fn qps(v: Option<&Value>) -> Result<f64, FieldError> {
    let bad = |shown: String| FieldError::new("evictQPS", shown);
    match v {
        None => Ok(10.0),
        Some(Value::Number(n)) => n.as_f64().ok_or_else(|| bad("not a number".into())),
        Some(Value::String(s)) => s
            .parse::<f64>()
            .map_err(|_| bad(format!("{s:?} is not a number"))),
        Some(other) => Err(bad(format!("{other} is not a number"))),
    }
}

fn decode<T: serde::de::DeserializeOwned + Default>(
    args: &Value,
    what: &str,
) -> Result<T, FieldError> {
    if args.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(args.clone()).map_err(|e| FieldError::new(what, e.to_string()))
}

impl MigrationArgs {
    pub fn parse(args: &Value) -> Result<MigrationArgs, FieldError> {
        let raw: RawArgs = decode(args, "MigrationControllerArgs")?;
        let err = |e: FieldError| e.under("MigrationControllerArgs");
        if let Some(g) = raw
            .skip_eviction_gates
            .iter()
            .find(|g| !GATES.contains(&g.as_str()))
        {
            return Err(err(FieldError::new(
                "skipEvictionGates",
                format!("unknown gate {g:?}"),
            )));
        }
        let ns = raw.namespaces.clone().unwrap_or_default();
        if !ns.include.is_empty() && !ns.exclude.is_empty() {
            return Err(err(FieldError::new(
                "namespaces",
                "only one of include and exclude may be set",
            )));
        }
        let mode = raw
            .default_job_mode
            .clone()
            .unwrap_or_else(|| "ReservationFirst".into());
        if mode != "ReservationFirst" && mode != "EvictDirectly" {
            return Err(err(FieldError::new(
                "defaultJobMode",
                format!("{mode:?} is not ReservationFirst or EvictDirectly"),
            )));
        }
        let policy = raw
            .eviction_policy
            .clone()
            .unwrap_or_else(|| "Eviction".into());
        if !["Eviction", "Delete", "SoftEviction"].contains(&policy.as_str()) {
            return Err(err(FieldError::new(
                "evictionPolicy",
                format!("{policy:?} is not Eviction, Delete or SoftEviction"),
            )));
        }
        let mut limiters = BTreeMap::new();
        let raw_limiters = raw.object_limiters.clone().unwrap_or_else(|| {
            BTreeMap::from([(
                "workload".to_string(),
                ObjectLimiter {
                    duration: Some("5m".into()),
                    ..Default::default()
                },
            )])
        });
        for (kind, l) in raw_limiters {
            let d = dur(
                "objectLimiters.duration",
                l.duration.as_deref(),
                Duration::ZERO,
            )
            .map_err(err)?;
            limiters.insert(kind, (d, l.max_migrating, l.burst.unwrap_or(0).max(1)));
        }
        let arb = raw.arbitration_args.clone().unwrap_or_default();
        Ok(MigrationArgs {
            dry_run: raw.dry_run.unwrap_or(false),
            filter: FilterArgs {
                evict_failed_bare_pods: raw.evict_failed_bare_pods.unwrap_or(false),
                evict_all_bare_pods: raw.evict_all_bare_pods.unwrap_or(false),
                evict_local_storage_pods: raw.evict_local_storage_pods.unwrap_or(false),
                evict_system_critical_pods: raw.evict_system_critical_pods.unwrap_or(false),
                ignore_pvc_pods: raw.ignore_pvc_pods.unwrap_or(false),
                priority_threshold: raw.priority_threshold.clone(),
                label_selector: raw.label_selector.clone(),
                namespaces: ns,
                node_fit: raw.node_fit.unwrap_or(false),
                node_selector: node_selector(raw.node_selector.as_deref()).map_err(err)?,
            },
            skip_gates: raw.skip_eviction_gates.iter().cloned().collect(),
            max_migrating_globally: raw.max_migrating_globally,
            max_migrating_per_node: raw.max_migrating_per_node.or(Some(2)),
            max_migrating_per_namespace: raw.max_migrating_per_namespace,
            max_migrating_per_workload: raw.max_migrating_per_workload.clone(),
            max_unavailable_per_workload: raw.max_unavailable_per_workload.clone(),
            skip_check_expected_replicas: raw.skip_check_expected_replicas.unwrap_or(false),
            object_limiters: limiters,
            default_job_mode: mode,
            default_job_ttl: dur(
                "defaultJobTTL",
                raw.default_job_ttl.as_deref(),
                Duration::from_secs(300),
            )
            .map_err(err)?,
            scheduler_names: raw
                .scheduler_names
                .clone()
                .unwrap_or_else(|| vec!["koord-scheduler".into()]),
            evict_qps: qps(raw.evict_qps.as_ref()).map_err(err)?,
            evict_burst: raw.evict_burst.unwrap_or(1).max(1),
            eviction_policy: policy,
            default_delete_options: raw.default_delete_options.clone(),
            arbitration_interval: if arb.enabled == Some(false) {
                Duration::ZERO
            } else {
                dur(
                    "arbitrationArgs.interval",
                    arb.interval.as_deref(),
                    Duration::from_millis(500),
                )
                .map_err(err)?
            },
            max_concurrent_reconciles: match raw.max_concurrent_reconciles {
                Some(n) if n > MAX_RECONCILES => {
                    return Err(err(FieldError::new(
                        "maxConcurrentReconciles",
                        format!("{n} is more than {MAX_RECONCILES}"),
                    )));
                }
                // controller-runtime runs 0 (or less) as 1.
                n => n.unwrap_or(1).max(1) as usize,
            },
        })
    }

    pub fn skipped(&self, gate: &str) -> bool {
        self.skip_gates.contains(gate)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// Some fields are accepted only so Koordinator's files load; koord's settings govern them.
#[allow(dead_code)]
struct RawDefaultEvictor {
    api_version: Option<String>,
    kind: Option<String>,
    node_selector: Option<String>,
    evict_local_storage_pods: Option<bool>,
    evict_system_critical_pods: Option<bool>,
    ignore_pvc_pods: Option<bool>,
    evict_failed_bare_pods: Option<bool>,
    label_selector: Option<LabelSelector>,
    priority_threshold: Option<PriorityThreshold>,
    node_fit: Option<bool>,
}

/// Upstream `DefaultEvictorArgs`.
pub fn default_evictor(args: &Value) -> Result<FilterArgs, FieldError> {
    let raw: RawDefaultEvictor = decode(args, "DefaultEvictorArgs")?;
    Ok(FilterArgs {
        evict_failed_bare_pods: raw.evict_failed_bare_pods.unwrap_or(false),
        evict_local_storage_pods: raw.evict_local_storage_pods.unwrap_or(false),
        evict_system_critical_pods: raw.evict_system_critical_pods.unwrap_or(false),
        ignore_pvc_pods: raw.ignore_pvc_pods.unwrap_or(false),
        priority_threshold: raw.priority_threshold,
        label_selector: raw.label_selector,
        node_fit: raw.node_fit.unwrap_or(false),
        node_selector: node_selector(raw.node_selector.as_deref())?,
        ..Default::default()
    })
}

/// maxMigrating / maxUnavailable of a workload of `replicas` (Koordinator's resolution:
/// int or percent rounded down, 0 → 1; unset: >10 → 10 %, 4–10 → 2, else 1; capped).
pub fn max_of(replicas: i32, v: Option<&IntOrString>) -> i32 {
    let scaled = |v: &IntOrString| match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => s
            .trim_end_matches('%')
            .parse::<i64>()
            .map_or(0, |p| (p * replicas as i64 / 100) as i32),
    };
    let mut m = v.map_or(0, |v| scaled(v).max(1));
    if m == 0 {
        m = if replicas > 10 {
            replicas / 10
        } else if replicas >= 4 {
            2
        } else {
            1
        };
    }
    m.min(replicas)
}
