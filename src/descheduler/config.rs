//! `DeschedulerConfiguration` (`descheduler/v1alpha2`): the interval, dry run, global node
//! selector and eviction limits, and profiles whose plugin sets are merged onto
//! Koordinator's defaults (Evict and Filter: MigrationController). Without a file, koord's
//! built-in `config/koord-descheduler-config.yaml` is the configuration.

use crate::api::field::FieldError;
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

pub(super) const KOORD_DEFAULT: &str = include_str!("../../config/koord-descheduler-config.yaml");

/// Plugins koord runs, by the extension points they serve.
const BUILT: &[(&str, &[Point])] = &[
    ("LowNodeLoad", &[Point::Balance]),
    ("MigrationController", &[Point::Evict, Point::Filter]),
    ("DefaultEvictor", &[Point::Evict, Point::Filter]),
    ("RemoveFailedPods", &[Point::Deschedule]),
    ("PodLifeTime", &[Point::Deschedule]),
    ("RemovePodsHavingTooManyRestarts", &[Point::Deschedule]),
    ("RemovePodsViolatingNodeTaints", &[Point::Deschedule]),
    ("RemovePodsViolatingNodeAffinity", &[Point::Deschedule]),
    (
        "RemovePodsViolatingInterPodAntiAffinity",
        &[Point::Deschedule],
    ),
    ("RemoveDuplicates", &[Point::Balance]),
    (
        "RemovePodsViolatingTopologySpreadConstraint",
        &[Point::Balance],
    ),
    ("LowNodeUtilization", &[Point::Balance]),
    ("HighNodeUtilization", &[Point::Balance]),
    ("FragmentationAware", &[Point::Balance]),
    ("ScaleDownBinPack", &[Point::Balance]),
    ("CustomPriority", &[Point::Balance]),
];

/// Plugins Koordinator registers that koord does not run yet (none today; the list
/// stays so a future registry addition is warned about by name).
const NOT_BUILT: &[&str] = &[];

/// Why a plugin a profile enables is skipped: Koordinator has it and koord does not yet, or
/// neither knows it. Skipped with a warning (refused under `common.strict`).
pub fn why_unsupported(name: &str) -> String {
    if NOT_BUILT.contains(&name) {
        format!("descheduler plugin {name} is not implemented by koord yet; skipped")
    } else {
        format!(
            "descheduler plugin {name:?} is unknown (not a plugin Koordinator or koord registers); skipped"
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    Deschedule,
    Balance,
    Evict,
    Filter,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::Deschedule => "deschedule",
            Point::Balance => "balance",
            Point::Evict => "evict",
            Point::Filter => "filter",
        }
    }

    /// The Go interface a plugin at this point implements, as Koordinator's errors name it.
    fn interface(self) -> &'static str {
        match self {
            Point::Deschedule => "DeschedulePlugin",
            Point::Balance => "BalancePlugin",
            Point::Evict => "EvictPlugin",
            Point::Filter => "FilterPlugin",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginRef {
    name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginSet {
    #[serde(default)]
    enabled: Vec<PluginRef>,
    #[serde(default)]
    disabled: Vec<PluginRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlugins {
    deschedule: Option<PluginSet>,
    balance: Option<PluginSet>,
    evict: Option<PluginSet>,
    filter: Option<PluginSet>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginConfig {
    name: String,
    #[serde(default)]
    args: Value,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawProfile {
    name: Option<String>,
    plugins: Option<RawPlugins>,
    #[serde(default)]
    plugin_config: Vec<PluginConfig>,
    node_selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// Some fields are accepted only so Koordinator's files load; koord's settings govern them.
#[allow(dead_code)]
struct RawLeaderElection {
    leader_elect: Option<bool>,
    resource_lock: Option<String>,
    resource_name: Option<String>,
    resource_namespace: Option<String>,
    lease_duration: Option<String>,
    renew_deadline: Option<String>,
    retry_period: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// Some fields are accepted only so Koordinator's files load; koord's settings govern them.
#[allow(dead_code)]
struct RawConfig {
    api_version: Option<String>,
    kind: Option<String>,
    leader_election: Option<RawLeaderElection>,
    // Accepted for compatibility; koord's own settings govern these.
    client_connection: Option<Value>,
    enable_profiling: Option<bool>,
    enable_contention_profiling: Option<bool>,
    healthz_bind_address: Option<String>,
    metrics_bind_address: Option<String>,
    descheduling_interval: Option<String>,
    dry_run: Option<bool>,
    #[serde(default)]
    profiles: Vec<RawProfile>,
    node_selector: Option<LabelSelector>,
    max_no_of_pods_to_evict_per_node: Option<u32>,
    max_no_of_pods_to_evict_per_namespace: Option<u32>,
    max_no_of_pods_to_evict_total: Option<u32>,
}

/// Per-cycle eviction limits (unset: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub per_node: Option<u32>,
    pub per_namespace: Option<u32>,
    pub total: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub node_selector: Option<LabelSelector>,
    pub deschedule: Vec<String>,
    pub balance: Vec<String>,
    pub evict: Vec<String>,
    pub filter: Vec<String>,
    /// `pluginConfig` args by plugin name.
    pub args: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeschedulerConfig {
    /// 0: one pass, then idle.
    pub interval: Duration,
    pub dry_run: bool,
    pub node_selector: Option<LabelSelector>,
    pub limits: Limits,
    /// The Lease (namespace, name) when the file names one.
    pub lease: (Option<String>, Option<String>),
    pub leader_elect: Option<bool>,
    pub profiles: Vec<Profile>,
    /// Plugins named that koord does not run (warned about once at start, listed by every
    /// pass's report; refused under `common.strict`).
    pub unsupported: Vec<String>,
    /// `healthzBindAddress` and `metricsBindAddress` (once when equal): where the
    /// Koordinator chart's probes ask; each serves koord's admin endpoint.
    pub serve_on: Vec<std::net::SocketAddr>,
}

fn defaults(p: Point) -> Vec<String> {
    match p {
        Point::Evict | Point::Filter => vec!["MigrationController".into()],
        Point::Deschedule | Point::Balance => Vec::new(),
    }
}

fn merge(
    point: Point,
    set: Option<&PluginSet>,
    profile: &str,
    unsupported: &mut Vec<String>,
) -> Result<Vec<String>, FieldError> {
    let mut out = defaults(point);
    let at = || format!("profiles[{profile}].plugins.{}", point.name());
    let Some(set) = set else {
        return Ok(out);
    };
    if set.disabled.iter().any(|p| p.name == "*") {
        out.clear();
    }
    out.retain(|n| !set.disabled.iter().any(|d| &d.name == n));
    for p in &set.enabled {
        let Some((_, points)) = BUILT.iter().find(|(n, _)| *n == p.name) else {
            unsupported.push(p.name.clone());
            continue;
        };
        if !points.contains(&point) {
            return Err(FieldError::new(
                at(),
                // Koordinator's words (framework/runtime: updatePluginList).
                format!(
                    "plugin {:?} does not extend {} plugin",
                    p.name,
                    point.interface()
                ),
            ));
        }
        if !out.contains(&p.name) {
            out.push(p.name.clone());
        }
    }
    Ok(out)
}

fn profile(
    raw: &RawProfile,
    i: usize,
    unsupported: &mut Vec<String>,
) -> Result<Profile, FieldError> {
    let name = raw.name.clone().unwrap_or_else(|| format!("profile-{i}"));
    let plugins = raw.plugins.clone().unwrap_or_default();
    let at = |p: Point, s: &Option<PluginSet>, u: &mut Vec<String>| merge(p, s.as_ref(), &name, u);
    let mut args = BTreeMap::new();
    for c in &raw.plugin_config {
        if args.insert(c.name.clone(), c.args.clone()).is_some() {
            return Err(FieldError::new(
                format!("profiles[{name}].pluginConfig"),
                format!("{} is configured twice", c.name),
            ));
        }
    }
    Ok(Profile {
        deschedule: at(Point::Deschedule, &plugins.deschedule, unsupported)?,
        balance: at(Point::Balance, &plugins.balance, unsupported)?,
        evict: at(Point::Evict, &plugins.evict, unsupported)?,
        filter: at(Point::Filter, &plugins.filter, unsupported)?,
        node_selector: raw.node_selector.clone(),
        args,
        name,
    })
}

/// Parses and validates a configuration; `source` names it in errors.
/// The configuration in `text`, its plugins' args not yet built (`configfile::parse` does
/// both).
pub fn parse_unchecked(text: &str, source: &str) -> Result<DeschedulerConfig, FieldError> {
    let whole = |e: String| FieldError::whole(e).within(source);
    crate::api::input::prescan_yaml(text.as_bytes()).map_err(whole)?;
    let raw: RawConfig = serde_yaml::from_str(text).map_err(|e| whole(e.to_string()))?;
    resolve(raw).map_err(|e| e.within(source))
}

fn resolve(raw: RawConfig) -> Result<DeschedulerConfig, FieldError> {
    if let Some(v) = raw.api_version.as_deref()
        && v != "descheduler/v1alpha2"
    {
        return Err(FieldError::new(
            format!("apiVersion {v:?}"),
            "expected descheduler/v1alpha2",
        ));
    }
    if let Some(k) = raw.kind.as_deref()
        && k != "DeschedulerConfiguration"
    {
        return Err(FieldError::new(
            format!("kind {k:?}"),
            "expected DeschedulerConfiguration",
        ));
    }
    let interval = crate::api::duration::field_or(
        "deschedulingInterval",
        raw.descheduling_interval.as_deref(),
        Duration::ZERO,
    )?;
    if !interval.is_zero() && interval < MIN_INTERVAL {
        return Err(FieldError::new(
            "deschedulingInterval",
            format!(
                "{:?} is shorter than {}s: every pass reads every node and pod (0 runs one pass)",
                interval,
                MIN_INTERVAL.as_secs()
            ),
        ));
    }
    let mut unsupported = Vec::new();
    let mut profiles = Vec::new();
    let raws = if raw.profiles.is_empty() {
        vec![RawProfile {
            name: Some("koord-descheduler".into()),
            ..Default::default()
        }]
    } else {
        raw.profiles.clone()
    };
    for (i, p) in raws.iter().enumerate() {
        profiles.push(profile(p, i, &mut unsupported)?);
    }
    unsupported.sort();
    unsupported.dedup();
    let le = raw.leader_election.unwrap_or_default();
    let mut serve_on = Vec::new();
    for (field, v) in [
        ("healthzBindAddress", &raw.healthz_bind_address),
        ("metricsBindAddress", &raw.metrics_bind_address),
    ] {
        let Some(v) = v.as_deref().filter(|v| !v.is_empty() && *v != "0") else {
            continue;
        };
        let a = crate::kernel::listen::go_addr(v).map_err(|e| FieldError::new(field, e))?;
        if !serve_on.contains(&a) {
            serve_on.push(a);
        }
    }
    let cfg = DeschedulerConfig {
        interval,
        dry_run: raw.dry_run.unwrap_or(false),
        node_selector: raw.node_selector,
        limits: Limits {
            per_node: raw.max_no_of_pods_to_evict_per_node,
            per_namespace: raw.max_no_of_pods_to_evict_per_namespace,
            total: raw.max_no_of_pods_to_evict_total,
        },
        lease: (le.resource_namespace, le.resource_name),
        leader_elect: le.leader_elect,
        profiles,
        unsupported,
        serve_on,
    };
    Ok(cfg)
}

/// The shortest interval between passes.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
