//! `KubeSchedulerConfiguration` (`kubescheduler.config.k8s.io/v1`): profiles, plugin sets
//! per extension point merged onto the defaults the way kube-scheduler merges them, and
//! `pluginConfig` args. Every configuration is merged onto kube-scheduler's MultiPoint
//! defaults; without one, Koordinator's shipped ConfigMap (`config/koord-scheduler-config.yaml`)
//! is the configuration.

use crate::api::field::FieldError;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::framework::Point;
use crate::kernel::compat::Unsupported;
use crate::kernel::features::Gates;

mod profile;

pub use profile::framework;
use profile::{apply, expand, validate_profile};

const KOORD_DEFAULT: &str = include_str!("../../../config/koord-scheduler-config.yaml");

/// kube-scheduler's MultiPoint defaults that koord implements, with score weights.
const MULTI_POINT: &[(&str, i64)] = &[
    ("SchedulingGates", 1),
    ("PrioritySort", 1),
    ("NodeUnschedulable", 1),
    ("NodeName", 1),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 1),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 1),
    ("NodeVolumeLimits", 1),
    ("VolumeBinding", 1),
    ("VolumeZone", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 1),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 1),
];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginRef {
    pub name: String,
    pub weight: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginSet {
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Plugins {
    pub multi_point: Option<PluginSet>,
    pub pre_enqueue: Option<PluginSet>,
    pub queue_sort: Option<PluginSet>,
    pub pre_filter: Option<PluginSet>,
    pub filter: Option<PluginSet>,
    pub post_filter: Option<PluginSet>,
    pub pre_score: Option<PluginSet>,
    pub score: Option<PluginSet>,
    pub reserve: Option<PluginSet>,
    pub permit: Option<PluginSet>,
    pub pre_bind: Option<PluginSet>,
    pub bind: Option<PluginSet>,
    pub post_bind: Option<PluginSet>,
}

impl Plugins {
    fn at(&self, p: Point) -> Option<&PluginSet> {
        match p {
            Point::PreEnqueue => self.pre_enqueue.as_ref(),
            Point::QueueSort => self.queue_sort.as_ref(),
            Point::PreFilter => self.pre_filter.as_ref(),
            Point::Filter => self.filter.as_ref(),
            Point::PostFilter => self.post_filter.as_ref(),
            Point::PreScore => self.pre_score.as_ref(),
            Point::Score => self.score.as_ref(),
            Point::Reserve => self.reserve.as_ref(),
            Point::Permit => self.permit.as_ref(),
            Point::PreBind => self.pre_bind.as_ref(),
            Point::Bind => self.bind.as_ref(),
            Point::PostBind => self.post_bind.as_ref(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginConfig {
    pub name: String,
    pub args: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProfileCfg {
    pub scheduler_name: Option<String>,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub plugins: Option<Plugins>,
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeSchedulerConfiguration {
    pub api_version: String,
    pub kind: String,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub parallelism: Option<i32>,
    pub pod_initial_backoff_seconds: Option<i64>,
    pub pod_max_backoff_seconds: Option<i64>,
    /// The Lease the scheduler elects on, unless `scheduler.leaderElection` sets one.
    pub leader_election: Option<FileLeaderElection>,
    pub client_connection: Option<Value>,
    pub delay_cache_until_active: Option<bool>,
    #[serde(default)]
    pub extenders: Vec<Value>,
    #[serde(default)]
    pub profiles: Vec<ProfileCfg>,
}

/// `leaderElection` of a KubeSchedulerConfiguration (component-base's
/// `LeaderElectionConfiguration`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileLeaderElection {
    pub leader_elect: Option<bool>,
    pub lease_duration: Option<String>,
    pub renew_deadline: Option<String>,
    pub retry_period: Option<String>,
    /// Only `leases` is supported (the only lock current Kubernetes has).
    pub resource_lock: Option<String>,
    pub resource_name: Option<String>,
    pub resource_namespace: Option<String>,
}

impl FileLeaderElection {
    /// The Lease settings this describes, over `base`.
    pub fn apply(
        &self,
        base: &crate::kernel::lease::LeaseConfig,
    ) -> Result<crate::kernel::lease::LeaseConfig, FieldError> {
        let mut out = base.clone();
        let secs = |field: &str, v: &Option<String>, into: &mut u64| -> Result<(), FieldError> {
            if let Some(raw) = v {
                let d = crate::api::duration::parse(raw).map_err(|e| {
                    FieldError::new(format!("leaderElection.{field}"), format!("{raw:?}: {e}"))
                })?;
                *into = d.as_secs().max(1);
            }
            Ok(())
        };
        if let Some(lock) = self.resource_lock.as_deref().filter(|l| *l != "leases") {
            return Err(FieldError::unsupported(
                "leaderElection.resourceLock",
                format!("{lock:?}: supported values: \"leases\""),
            ));
        }
        if let Some(e) = self.leader_elect {
            out.enabled = e;
        }
        if let Some(n) = self.resource_name.clone().filter(|n| !n.is_empty()) {
            out.name = n;
        }
        if let Some(n) = self.resource_namespace.clone().filter(|n| !n.is_empty()) {
            out.namespace = n;
        }
        secs(
            "leaseDuration",
            &self.lease_duration,
            &mut out.lease_duration_seconds,
        )?;
        secs(
            "renewDeadline",
            &self.renew_deadline,
            &mut out.renew_deadline_seconds,
        )?;
        secs(
            "retryPeriod",
            &self.retry_period,
            &mut out.retry_period_seconds,
        )?;
        out.validate()
            .map_err(|e| FieldError::whole(e).within("leaderElection"))?;
        Ok(out)
    }
}

/// One resolved profile: per point the plugin names and weights, and args by plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub points: BTreeMap<Point, Vec<(String, i64)>>,
    pub args: BTreeMap<String, Value>,
    /// The scheduler's feature gates (`scheduler.featureGates`; Koordinator's defaults
    /// until [`SchedulerConfig::set_gates`]).
    pub gates: Gates,
}

impl Profile {
    /// Whether `plugin` runs at some extension point of this profile.
    pub fn enables(&self, plugin: &str) -> bool {
        self.points.values().flatten().any(|(n, _)| n == plugin)
    }
}

/// Queue timing from the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub initial_seconds: i64,
    pub max_seconds: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    pub profiles: Vec<Profile>,
    pub backoff: Backoff,
    /// `parallelism`: at most this many threads filter nodes in one cycle.
    pub parallelism: Option<usize>,
    /// The file's `leaderElection`, if it has one.
    pub leader_election: Option<FileLeaderElection>,
    /// Plugins and args of the configuration koord skips (warned at start; refused in
    /// strict mode).
    pub unsupported: Vec<Unsupported>,
}

impl SchedulerConfig {
    /// The feature gates every profile's plugins are built under.
    pub fn set_gates(&mut self, gates: &Gates) {
        for p in &mut self.profiles {
            p.gates = gates.clone();
        }
    }
}

/// A copy of the first profile named `default-scheduler`, unless one exists: pods without a
/// `schedulerName` are scheduled like the first profile's (embedded mode has no
/// kube-scheduler).
pub fn serve_default_scheduler(cfg: &mut SchedulerConfig) {
    const NAME: &str = "default-scheduler";
    if cfg.profiles.iter().any(|p| p.scheduler_name == NAME) {
        return;
    }
    if let Some(first) = cfg.profiles.first() {
        let mut copy = first.clone();
        copy.scheduler_name = NAME.into();
        cfg.profiles.push(copy);
    }
}

fn upstream_default() -> Result<Profile, FieldError> {
    let multi: Vec<(String, i64)> = MULTI_POINT
        .iter()
        .map(|(n, w)| (n.to_string(), *w))
        .collect();
    Ok(Profile {
        scheduler_name: "default-scheduler".into(),
        percentage_of_nodes_to_score: None,
        points: expand(&multi)?,
        args: BTreeMap::new(),
        gates: crate::scheduler::features::SCHEDULER_GATES.defaults(),
    })
}

fn parse_doc(text: &str, source: &str) -> Result<KubeSchedulerConfiguration, FieldError> {
    crate::api::input::prescan_yaml(text.as_bytes())
        .map_err(|e| FieldError::whole(e).within(source))?;
    let doc: KubeSchedulerConfiguration =
        serde_yaml::from_str(text).map_err(|e| FieldError::whole(e.to_string()).within(source))?;
    if doc.kind != "KubeSchedulerConfiguration"
        || doc.api_version != "kubescheduler.config.k8s.io/v1"
    {
        return Err(FieldError::new(
            source,
            format!(
                "expected apiVersion kubescheduler.config.k8s.io/v1, kind KubeSchedulerConfiguration; got {} {}",
                doc.api_version, doc.kind
            ),
        ));
    }
    if !doc.extenders.is_empty() {
        return Err(FieldError::new(source, "extenders are not supported"));
    }
    Ok(doc)
}

/// The configuration in the file at `path` (errors name it), or the built-in one: what the
/// live scheduler and `koord explain schedule` both load.
pub fn from_file(path: Option<&std::path::Path>) -> Result<SchedulerConfig, FieldError> {
    let Some(p) = path else {
        return default_config();
    };
    let shown = p.display().to_string();
    let text = crate::os::files::read_config(p)
        .map_err(|e| FieldError::whole(e.to_string()).within(&shown))?;
    resolve(Some((&text, &shown)))
}

/// The built-in default configuration.
pub fn default_config() -> Result<SchedulerConfig, FieldError> {
    resolve(None)
}

/// Loads a user configuration merged onto the built-in default; errors name the source,
/// profile and plugin.
pub fn resolve(user: Option<(&str, &str)>) -> Result<SchedulerConfig, FieldError> {
    // Like kube-scheduler, a configuration (Koordinator's own ConfigMap included) is merged
    // onto the upstream MultiPoint defaults; without one, Koordinator's ConfigMap is used.
    let base = upstream_default()?;
    let (doc, source) = match user {
        Some((text, source)) => (parse_doc(text, source)?, source.to_string()),
        None => (
            parse_doc(KOORD_DEFAULT, "built-in koord-scheduler-config")?,
            "built-in".to_string(),
        ),
    };
    let mut profiles = Vec::new();
    let mut unsupported: Vec<Unsupported> = Vec::new();
    let list = if doc.profiles.is_empty() {
        vec![ProfileCfg::default()]
    } else {
        doc.profiles.clone()
    };
    for (i, p) in list.iter().enumerate() {
        let ctx = format!("{source}: profiles[{i}]");
        let (mut resolved, skipped) = apply(&base, p, &ctx)?;
        for u in skipped {
            if !unsupported.contains(&u) {
                unsupported.push(u);
            }
        }
        if resolved.percentage_of_nodes_to_score.is_none() {
            resolved.percentage_of_nodes_to_score = doc.percentage_of_nodes_to_score;
        }
        if p.scheduler_name.is_none() {
            resolved.scheduler_name = "koord-scheduler".into();
        }
        validate_profile(&resolved).map_err(|e| e.within(&ctx))?;
        if profiles
            .iter()
            .any(|q: &Profile| q.scheduler_name == resolved.scheduler_name)
        {
            return Err(FieldError::new(
                ctx,
                format!("duplicate schedulerName {:?}", resolved.scheduler_name),
            ));
        }
        profiles.push(resolved);
    }
    let backoff = Backoff {
        initial_seconds: doc.pod_initial_backoff_seconds.unwrap_or(1),
        max_seconds: doc.pod_max_backoff_seconds.unwrap_or(10),
    };
    if backoff.initial_seconds <= 0 || backoff.max_seconds < backoff.initial_seconds {
        return Err(FieldError::new(
            source,
            "podInitialBackoffSeconds/podMaxBackoffSeconds must be > 0 and initial <= max",
        ));
    }
    let parallelism = match doc.parallelism {
        Some(p) if p <= 0 => {
            return Err(FieldError::invalid(
                "parallelism",
                format!("{p}: should be an integer value greater than zero"),
            )
            .within(source));
        }
        p => p.map(|p| p as usize),
    };
    if let Some(le) = &doc.leader_election {
        le.apply(&crate::kernel::lease::LeaseConfig::named("koord-scheduler"))
            .map_err(|e| e.within(&source))?;
    }
    Ok(SchedulerConfig {
        profiles,
        backoff,
        parallelism,
        leader_election: doc.leader_election.clone(),
        unsupported,
    })
}

#[cfg(test)]
mod tests;
