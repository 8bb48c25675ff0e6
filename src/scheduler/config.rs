//! `KubeSchedulerConfiguration` (`kubescheduler.config.k8s.io/v1`): profiles, plugin sets
//! per extension point merged onto the defaults the way kube-scheduler merges them, and
//! `pluginConfig` args. Every configuration is merged onto kube-scheduler's MultiPoint
//! defaults; without one, Koordinator's shipped ConfigMap (`config/koord-scheduler-config.yaml`)
//! is the configuration.

use crate::api::field::FieldError;
use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::Value;

use super::framework::Point;
use super::framework::runtime::{Enabled, Framework};
use super::plugins;
use crate::kernel::compat::Unsupported;

const KOORD_DEFAULT: &str = include_str!("../../config/koord-scheduler-config.yaml");

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

/// kube-scheduler's merge of a custom set onto defaults.
fn merge(defaults: &[(String, i64)], custom: Option<&PluginSet>) -> Vec<(String, i64)> {
    let Some(c) = custom else {
        return defaults.to_vec();
    };
    let weight = |r: &PluginRef| r.weight.filter(|w| *w > 0).unwrap_or(1);
    if c.disabled.iter().any(|d| d.name == "*") {
        return c
            .enabled
            .iter()
            .map(|r| (r.name.clone(), weight(r)))
            .collect();
    }
    let base: Vec<&(String, i64)> = defaults
        .iter()
        .filter(|(n, _)| !c.disabled.iter().any(|d| &d.name == n))
        .collect();
    let in_base = |n: &str| base.iter().any(|(b, _)| b == n);
    let mut out: Vec<(String, i64)> = c
        .enabled
        .iter()
        .filter(|r| in_base(&r.name))
        .map(|r| (r.name.clone(), weight(r)))
        .collect();
    for (n, w) in &base {
        if !c.enabled.iter().any(|r| &r.name == n) {
            out.push((n.clone(), *w));
        }
    }
    out.extend(
        c.enabled
            .iter()
            .filter(|r| !in_base(&r.name))
            .map(|r| (r.name.clone(), weight(r))),
    );
    out
}

/// Names `expand` can instantiate (the rest are stripped or reported by `compat`).
fn runnable_name(name: &str) -> bool {
    !plugins::NOT_YET.contains(&name) && !super::compat::framework_plugin(name)
}

fn points_of(name: &str) -> Result<&'static [Point], FieldError> {
    Ok(plugins::build(name, None)?.points())
}

/// MultiPoint plugins expanded onto the points each implements.
fn expand(multi: &[(String, i64)]) -> Result<BTreeMap<Point, Vec<(String, i64)>>, FieldError> {
    let mut out: BTreeMap<Point, Vec<(String, i64)>> = BTreeMap::new();
    for (name, w) in multi {
        for p in points_of(name)? {
            out.entry(*p).or_default().push((name.clone(), *w));
        }
    }
    Ok(out)
}

/// kube-scheduler's largest score weight sum: MaxTotalScore (i64::MAX) over MaxNodeScore.
const MAX_TOTAL_WEIGHT: i64 = i64::MAX / 100;

/// A weight is a positive integer (0 or none: the default, 1); negative ones are refused
/// rather than quietly replaced.
fn check_weights(plugins: &Plugins) -> Result<(), FieldError> {
    let mut sets: Vec<(&str, &PluginSet)> = Vec::new();
    if let Some(mp) = &plugins.multi_point {
        sets.push(("multiPoint", mp));
    }
    for p in Point::ALL {
        if let Some(s) = plugins.at(p) {
            sets.push((p.key(), s));
        }
    }
    let mut total: i64 = 0;
    for (point, set) in sets {
        for (i, r) in set.enabled.iter().enumerate() {
            let w = r.weight.unwrap_or(0);
            if w < 0 {
                return Err(FieldError::invalid(
                    format!("plugins.{point}.enabled[{i}].weight"),
                    format!("{w}: plugin {} must have a positive weight", r.name),
                ));
            }
            total = total.saturating_add(w);
        }
    }
    if total > MAX_TOTAL_WEIGHT {
        return Err(FieldError::whole(
            "total score of Score plugins could overflow",
        ));
    }
    Ok(())
}

fn apply(
    base: &Profile,
    cfg: &ProfileCfg,
    ctx: &str,
) -> Result<(Profile, Vec<Unsupported>), FieldError> {
    let plugins = cfg.plugins.clone().unwrap_or_default();
    check_weights(&plugins).map_err(|e| e.within(ctx))?;
    let mut points = base.points.clone();
    if let Some(mp) = &plugins.multi_point {
        let mut runnable = mp.clone();
        runnable.enabled.retain(|r| runnable_name(&r.name));
        let extra = expand(&merge(&[], Some(&runnable)))?;
        for (p, list) in extra {
            let cur = points.entry(p).or_default();
            for (n, w) in list {
                cur.retain(|(c, _)| c != &n);
                cur.push((n, w));
            }
        }
        for d in &mp.disabled {
            for list in points.values_mut() {
                list.retain(|(n, _)| d.name == "*" || n != &d.name);
            }
        }
    }
    for p in Point::ALL {
        let merged = merge(
            points.get(&p).map(Vec::as_slice).unwrap_or(&[]),
            plugins.at(p),
        );
        points.insert(p, merged);
    }
    let mut args = base.args.clone();
    for pc in &cfg.plugin_config {
        if !plugins::IMPLEMENTED.contains(&pc.name.as_str())
            && !plugins::NOT_YET.contains(&pc.name.as_str())
            && !super::compat::framework_plugin(&pc.name)
        {
            return Err(FieldError::new(
                format!("{ctx}.pluginConfig"),
                format!("unknown plugin {:?}", pc.name),
            ));
        }
        args.insert(pc.name.clone(), pc.args.clone().unwrap_or(Value::Null));
    }
    let mut unsupported = super::compat::strip(&mut points, &mut args);
    if let Some(mp) = &plugins.multi_point {
        for r in &mp.enabled {
            if plugins::NOT_YET.contains(&r.name.as_str()) {
                unsupported.push(super::compat::skipped(&r.name, "multiPoint"));
            }
        }
    }
    for (name, raw) in &args {
        unsupported.extend(super::compat::unsupported_args(name, Some(raw)));
    }
    let profile = Profile {
        scheduler_name: cfg
            .scheduler_name
            .clone()
            .unwrap_or_else(|| base.scheduler_name.clone()),
        percentage_of_nodes_to_score: cfg
            .percentage_of_nodes_to_score
            .or(base.percentage_of_nodes_to_score),
        points,
        args,
    };
    Ok((profile, unsupported))
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
    })
}

fn parse_doc(text: &str, source: &str) -> Result<KubeSchedulerConfiguration, FieldError> {
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

fn validate_profile(p: &Profile) -> Result<(), FieldError> {
    if let Some(pct) = p.percentage_of_nodes_to_score
        && !(0..=100).contains(&pct)
    {
        return Err(FieldError::new(
            "percentageOfNodesToScore",
            format!("{pct} is not in [0, 100]"),
        ));
    }
    for (point, list) in &p.points {
        for (name, _) in list {
            let at = format!("plugins.{}", point.key());
            let implements = points_of(name).map_err(|e| e.within(&at))?;
            if !implements.contains(point) {
                return Err(FieldError::new(
                    at,
                    format!("plugin {name} does not implement {}", point.key()),
                ));
            }
        }
    }
    if p.points.get(&Point::QueueSort).is_none_or(|l| l.len() != 1) {
        return Err(FieldError::new(
            "plugins.queueSort",
            "exactly one QueueSort plugin must be enabled",
        ));
    }
    if p.points.get(&Point::Bind).is_none_or(|l| l.is_empty()) {
        return Err(FieldError::new(
            "plugins.bind",
            "at least one Bind plugin must be enabled",
        ));
    }
    for name in p.args.keys() {
        plugins::build(name, p.args.get(name)).map_err(|e| e.within("pluginConfig"))?;
    }
    Ok(())
}

/// Instantiates a profile's plugins (one instance per plugin, shared across points).
pub fn framework(p: &Profile) -> Result<Framework, FieldError> {
    let mut built: HashMap<String, std::sync::Arc<dyn super::framework::Plugin>> = HashMap::new();
    let mut points = HashMap::new();
    for (point, list) in &p.points {
        let mut enabled = Vec::new();
        for (name, weight) in list {
            let plugin = match built.get(name) {
                Some(pl) => pl.clone(),
                None => {
                    let pl = plugins::build(name, p.args.get(name))?;
                    built.insert(name.clone(), pl.clone());
                    pl
                }
            };
            enabled.push(Enabled {
                plugin,
                weight: *weight,
            });
        }
        points.insert(*point, enabled);
    }
    Ok(Framework {
        scheduler_name: p.scheduler_name.clone(),
        percentage_of_nodes_to_score: p.percentage_of_nodes_to_score,
        points,
        observer: Default::default(),
        cycles: Default::default(),
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
