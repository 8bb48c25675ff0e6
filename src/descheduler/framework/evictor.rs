//! The evictor a profile's plugins share: the AND of its Filter plugins, then the per-cycle
//! limiter (`maxNoOfPodsToEvict*`), then its Evict plugin — MigrationController (a
//! PodMigrationJob per pod, its limits counting jobs already in flight and those planned in
//! this pass) or DefaultEvictor (the Eviction API, directly).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::world::{JobView, World, controller_uid, key};
use super::{Eviction, Report, Skip};
use crate::descheduler::config::{Limits, Profile};
use crate::descheduler::migration::args::{FilterArgs, MigrationArgs, default_evictor};
use crate::descheduler::migration::filter::{check, migration_check};

enum Filter {
    Migration(MigrationArgs),
    Default(FilterArgs),
}

pub struct Evictor {
    filters: Vec<Filter>,
    /// `None`: DefaultEvictor; no Evict plugin at all evicts nothing.
    migration: Option<MigrationArgs>,
    enabled: bool,
}

impl Evictor {
    pub fn build(p: &Profile) -> Result<Evictor, String> {
        let args = |n: &str| p.args.get(n).cloned().unwrap_or_default();
        let err = |n: &str, e: String| format!("profiles[{}].pluginConfig[{n}]: {e}", p.name);
        let mut filters = Vec::new();
        for f in &p.filter {
            filters.push(match f.as_str() {
                "MigrationController" => {
                    Filter::Migration(MigrationArgs::parse(&args(f)).map_err(|e| err(f, e))?)
                }
                _ => Filter::Default(default_evictor(&args(f)).map_err(|e| err(f, e))?),
            });
        }
        let first = p.evict.first().map(String::as_str);
        let migration = match first {
            Some("MigrationController") => Some(
                MigrationArgs::parse(&args("MigrationController"))
                    .map_err(|e| err("MigrationController", e))?,
            ),
            _ => None,
        };
        Ok(Evictor {
            filters,
            migration,
            enabled: first.is_some(),
        })
    }

    pub fn migration(&self) -> Option<&MigrationArgs> {
        self.migration.as_ref()
    }
}

/// One pass's running state: what was planned, skipped, and the per-cycle counts.
pub struct Pass<'w> {
    world: &'w World,
    limits: Limits,
    planned: Vec<JobView>,
    evictions: Vec<Eviction>,
    skipped: Vec<Skip>,
    per_node: HashMap<String, u32>,
    per_ns: HashMap<String, u32>,
    total: u32,
}

fn node_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

impl<'w> Pass<'w> {
    pub fn new(world: &'w World, limits: Limits) -> Pass<'w> {
        Pass {
            world,
            limits,
            planned: Vec::new(),
            evictions: Vec::new(),
            skipped: Vec::new(),
            per_node: HashMap::new(),
            per_ns: HashMap::new(),
            total: 0,
        }
    }

    fn jobs(&self) -> Vec<JobView> {
        let mut all = self.world.jobs.clone();
        all.extend(self.planned.iter().cloned());
        all
    }

    fn skip(&mut self, pod: &Pod, reason: String) {
        let k = key(pod);
        if self.evictions.iter().any(|e| key(&e.pod) == k) {
            return;
        }
        match self.skipped.iter_mut().find(|s| s.pod == k) {
            Some(s) => s.reason = reason,
            None => self.skipped.push(Skip {
                pod: k,
                node: node_of(pod),
                reason,
            }),
        }
    }

    /// The AND of the profile's Filter plugins; a failing pod is remembered with why.
    pub fn filter(&mut self, ev: &Evictor, pod: &Pod) -> bool {
        let jobs = self.jobs();
        for f in &ev.filters {
            let r = match f {
                Filter::Migration(a) => migration_check(a, pod, self.world, &jobs),
                Filter::Default(a) => check(a, &|_| false, pod, self.world),
            };
            if let Err(why) = r {
                self.skip(pod, why);
                return false;
            }
        }
        true
    }

    fn limited(&self, pod: &Pod) -> Option<String> {
        let node = node_of(pod);
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let over = |max: Option<u32>, n: u32| max.is_some_and(|m| n + 1 > m);
        if over(
            self.limits.per_node,
            self.per_node.get(&node).copied().unwrap_or(0),
        ) {
            return Some(format!(
                "maxNoOfPodsToEvictPerNode {} reached",
                self.limits.per_node?
            ));
        }
        if over(
            self.limits.per_namespace,
            self.per_ns.get(&ns).copied().unwrap_or(0),
        ) {
            return Some(format!(
                "maxNoOfPodsToEvictPerNamespace {} reached",
                self.limits.per_namespace?
            ));
        }
        if over(self.limits.total, self.total) {
            return Some(format!(
                "maxNoOfPodsToEvictTotal {} reached",
                self.limits.total?
            ));
        }
        None
    }

    /// Limiter, then the Evict plugin; whether the pod counts as evicted.
    pub fn evict(
        &mut self,
        ev: &Evictor,
        pod: &Arc<Pod>,
        node: &str,
        plugin: &str,
        reason: &str,
    ) -> bool {
        if !ev.enabled {
            self.skip(pod, "no Evict plugin is enabled".into());
            return false;
        }
        if let Some(why) = self.limited(pod) {
            self.skip(pod, why);
            return false;
        }
        if let Some(a) = &ev.migration {
            // MigrationController's Evict re-checks its filter against the jobs planned so far.
            if let Err(why) = migration_check(a, pod, self.world, &self.jobs()) {
                self.skip(pod, why);
                return false;
            }
            self.planned.push(JobView {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                pod: pod.metadata.name.clone().unwrap_or_default(),
                pod_uid: pod.metadata.uid.clone(),
                node: Some(node_of(pod)),
                owner_uid: controller_uid(pod),
                arbitrated: false,
            });
        }
        *self.per_node.entry(node_of(pod)).or_default() += 1;
        *self
            .per_ns
            .entry(pod.metadata.namespace.clone().unwrap_or_default())
            .or_default() += 1;
        self.total += 1;
        let k = key(pod);
        self.skipped.retain(|s| s.pod != k);
        self.evictions.push(Eviction {
            pod: pod.clone(),
            node: node.to_string(),
            plugin: plugin.to_string(),
            reason: reason.to_string(),
            mode: ev.migration.as_ref().map(|a| a.default_job_mode.clone()),
        });
        true
    }

    pub fn finish(self, report: &mut Report) {
        report.evictions = self.evictions;
        report.skipped = self.skipped;
    }
}
