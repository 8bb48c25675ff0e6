//! One profile: plugin sets merged onto the defaults the way kube-scheduler merges them,
//! MultiPoint expanded onto the points each plugin implements, weights and args checked,
//! and the plugins built into a [`Framework`].

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::super::framework::Point;
use super::super::framework::runtime::{Enabled, Framework};
use super::super::plugins;
use super::{PluginRef, PluginSet, Plugins, Profile, ProfileCfg};
use crate::api::field::FieldError;
use crate::kernel::compat::Unsupported;

/// kube-scheduler's merge of a custom set onto defaults.
pub(super) fn merge(defaults: &[(String, i64)], custom: Option<&PluginSet>) -> Vec<(String, i64)> {
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
    !plugins::NOT_YET.contains(&name) && !super::super::compat::framework_plugin(name)
}

pub(super) fn points_of(name: &str) -> Result<&'static [Point], FieldError> {
    Ok(plugins::build(name, None)?.points())
}

/// MultiPoint plugins expanded onto the points each implements.
pub(super) fn expand(
    multi: &[(String, i64)],
) -> Result<BTreeMap<Point, Vec<(String, i64)>>, FieldError> {
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
pub(super) fn check_weights(plugins: &Plugins) -> Result<(), FieldError> {
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

pub(super) fn apply(
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
            && !super::super::compat::framework_plugin(&pc.name)
        {
            return Err(FieldError::new(
                format!("{ctx}.pluginConfig"),
                format!("unknown plugin {:?}", pc.name),
            ));
        }
        args.insert(pc.name.clone(), pc.args.clone().unwrap_or(Value::Null));
    }
    let mut unsupported = super::super::compat::strip(&mut points, &mut args);
    if let Some(mp) = &plugins.multi_point {
        for r in &mp.enabled {
            if plugins::NOT_YET.contains(&r.name.as_str()) {
                unsupported.push(super::super::compat::skipped(&r.name, "multiPoint"));
            }
        }
    }
    for (name, raw) in &args {
        unsupported.extend(super::super::compat::unsupported_args(name, Some(raw)));
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
        gates: base.gates.clone(),
    };
    Ok((profile, unsupported))
}

pub(super) fn validate_profile(p: &Profile) -> Result<(), FieldError> {
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
    let mut built: HashMap<String, std::sync::Arc<dyn super::super::framework::Plugin>> =
        HashMap::new();
    let mut points = HashMap::new();
    for (point, list) in &p.points {
        let mut enabled = Vec::new();
        for (name, weight) in list {
            let plugin = match built.get(name) {
                Some(pl) => pl.clone(),
                None => {
                    let pl = plugins::build_with(name, p.args.get(name), &p.gates)?;
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
        by_name: built.into_values().map(|pl| (pl.name(), pl)).collect(),
        inline_batch: p
            .gates
            .on(crate::scheduler::features::ENABLE_INLINE_BATCH_SCHEDULE),
        observer: Default::default(),
        cycles: Default::default(),
    })
}
