//! The descheduling framework: profiles of Deschedule and Balance plugins sharing one
//! evictor (the first Evict plugin, behind the AND of the Filter plugins and the per-cycle
//! limits). [`Plugins::run`] is one pass; it only decides — the live role creates the
//! PodMigrationJobs (or evicts), `koord explain deschedule` prints the decisions.

pub mod action;
pub mod evictor;
pub mod fit;
pub mod metric;
pub mod plugin;
pub mod podview;
mod report;
pub mod world;

use crate::api::field::FieldError;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use self::podview::PodView;
use serde_json::Value;

use self::action::{Action, Planned};
use self::evictor::{Evictor, Pass};
use self::plugin::{Act, Env, NodeInput, NodeReport, Plugin, Registry};
use self::world::World;
use super::config::{DeschedulerConfig, Limits, Profile};
use crate::api::selector::Selector;

/// One migration the pass starts (or, in dry run, would start).
#[derive(Debug, Clone, PartialEq)]
pub struct Eviction {
    pub pod: Arc<PodView>,
    pub node: String,
    pub plugin: String,
    pub reason: String,
    /// The PodMigrationJob mode; `None` when DefaultEvictor evicts directly.
    pub mode: Option<String>,
}

/// A candidate the pass considered and left, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skip {
    pub pod: String,
    pub node: String,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Report {
    pub nodes: Vec<NodeReport>,
    pub evictions: Vec<Eviction>,
    pub skipped: Vec<Skip>,
    /// Plugin errors (logged; the pass goes on).
    pub errors: Vec<String>,
    /// Plugins the configuration enables that koord does not run: (name, why).
    pub unsupported: Vec<(String, String)>,
    /// Changes besides evictions, in the order planned.
    pub actions: Vec<Planned>,
}

struct ProfileRt {
    selector: Option<Selector>,
    deschedule: Vec<Box<dyn Plugin>>,
    balance: Vec<Box<dyn Plugin>>,
    evictor: Evictor,
}

pub struct Plugins {
    profiles: Vec<ProfileRt>,
    selector: Option<Selector>,
    limits: Limits,
    pub dry_run: bool,
    unsupported: Vec<String>,
}

fn selector(
    ls: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    what: &str,
) -> Result<Option<Selector>, FieldError> {
    ls.map(|s| Selector::from_label_selector(s).map_err(|e| FieldError::new(what, e.to_string())))
        .transpose()
}

fn args_of<'a>(p: &'a Profile, plugin: &str) -> &'a Value {
    p.args.get(plugin).unwrap_or(&Value::Null)
}

fn build_plugin(
    p: &Profile,
    name: &str,
    interval: std::time::Duration,
    registry: Registry,
) -> Result<Box<dyn Plugin>, FieldError> {
    registry(name, args_of(p, name), interval)
        .map_err(|e| e.within(format!("profiles[{}].pluginConfig[{name}]", p.name)))
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Plugins {
    /// Builds every profile's plugins by name from `registry`; `interval` (the descheduling
    /// interval) goes to each plugin's builder.
    pub fn build(
        cfg: &DeschedulerConfig,
        interval_ms: u64,
        registry: Registry,
    ) -> Result<Plugins, FieldError> {
        let interval = std::time::Duration::from_millis(interval_ms);
        let mut profiles = Vec::new();
        for p in &cfg.profiles {
            let plugins = |names: &[String]| -> Result<Vec<Box<dyn Plugin>>, FieldError> {
                names
                    .iter()
                    .map(|n| build_plugin(p, n, interval, registry))
                    .collect()
            };
            profiles.push(ProfileRt {
                selector: selector(
                    p.node_selector.as_ref(),
                    &format!("profiles[{}].nodeSelector", p.name),
                )?,
                deschedule: plugins(&p.deschedule)?,
                balance: plugins(&p.balance)?,
                evictor: Evictor::build(p)?,
            });
        }
        Ok(Plugins {
            profiles,
            selector: selector(cfg.node_selector.as_ref(), "nodeSelector")?,
            limits: cfg.limits,
            dry_run: cfg.dry_run,
            unsupported: cfg.unsupported.clone(),
        })
    }

    /// One descheduling pass over `world`.
    pub fn run(&mut self, world: &World, now_ms: i64) -> Report {
        let mut report = Report {
            unsupported: self
                .unsupported
                .iter()
                .map(|p| (p.clone(), super::config::why_unsupported(p)))
                .collect(),
            ..Report::default()
        };
        let nodes: Vec<&Arc<Node>> = world
            .nodes
            .iter()
            .filter(|n| ready(n))
            .filter(|n| {
                self.selector
                    .as_ref()
                    .is_none_or(|s| s.matches_opt(n.metadata.labels.as_ref()))
            })
            .collect();
        if nodes.len() <= 1 {
            report.errors.push(format!(
                "{} ready node(s) match: nothing to balance",
                nodes.len()
            ));
            return report;
        }
        let mut by_node: HashMap<&str, Vec<Arc<PodView>>> = HashMap::new();
        for p in &world.pods {
            if let Some(n) = p.node_name.as_deref() {
                by_node.entry(n).or_default().push(p.clone());
            }
        }
        let fit = fit::NodeFit::new(&nodes, &by_node);
        let mut pass = Pass::new(world, &fit, self.limits, now_ms);
        pass.dry_run = self.dry_run;
        for stage in [Stage::Deschedule, Stage::Balance] {
            for prof in &mut self.profiles {
                let inputs: Vec<NodeInput> = nodes
                    .iter()
                    .filter(|n| {
                        prof.selector
                            .as_ref()
                            .is_none_or(|s| s.matches_opt(n.metadata.labels.as_ref()))
                    })
                    .map(|n| NodeInput {
                        node: (*n).clone(),
                        metric: n
                            .metadata
                            .name
                            .as_deref()
                            .and_then(|k| world.metrics.get(k).cloned()),
                        pods: by_node
                            .get(n.metadata.name.as_deref().unwrap_or(""))
                            .cloned()
                            .unwrap_or_default(),
                    })
                    .collect();
                let plugins = match stage {
                    Stage::Deschedule => &mut prof.deschedule,
                    Stage::Balance => &mut prof.balance,
                };
                for plugin in plugins.iter_mut() {
                    run_plugin(
                        plugin,
                        &prof.evictor,
                        &inputs,
                        now_ms,
                        &mut pass,
                        &mut report,
                    );
                }
            }
        }
        pass.finish(&mut report);
        report
    }
}

#[derive(Clone, Copy)]
enum Stage {
    Deschedule,
    Balance,
}

fn run_plugin(
    plugin: &mut Box<dyn Plugin>,
    evictor: &Evictor,
    inputs: &[NodeInput],
    now_ms: i64,
    pass: &mut Pass,
    report: &mut Report,
) {
    let env = Env {
        inputs,
        fit: pass.fit(),
        now_ms,
    };
    let mut act = PassAct {
        pass,
        evictor,
        plugin: plugin.name(),
        report,
    };
    plugin.run(&env, &mut act);
}

/// The pass's evictor as a plugin calls it.
struct PassAct<'a, 'w> {
    pass: &'a mut Pass<'w>,
    evictor: &'a Evictor,
    plugin: &'static str,
    report: &'a mut Report,
}

impl Act for PassAct<'_, '_> {
    fn filter(&mut self, p: &PodView, record: bool) -> bool {
        self.pass.filter_as(self.evictor, p, record)
    }

    fn pre_evict(&mut self, p: &PodView, record: bool) -> bool {
        self.pass.pre_evict_as(self.evictor, p, record)
    }

    fn evict(&mut self, p: &Arc<PodView>, reason: &str) -> bool {
        let node = p.node_name.clone().unwrap_or_default();
        self.pass.evict(self.evictor, p, &node, self.plugin, reason)
    }

    fn plan(&mut self, action: Action, reason: &str) {
        self.pass.actions.push(Planned {
            plugin: self.plugin.to_string(),
            action,
            reason: reason.to_string(),
        });
    }

    fn report_node(&mut self, r: NodeReport) {
        if !self.report.nodes.iter().any(|x| x.node == r.node) {
            self.report.nodes.push(r);
        }
    }
}
