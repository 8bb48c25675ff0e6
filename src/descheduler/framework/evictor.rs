//! The evictor a profile's plugins share: the AND of its Filter plugins, then the per-cycle
//! limiter (`maxNoOfPodsToEvict*`), then its Evict plugin — MigrationController (a
//! PodMigrationJob per pod, its limits counting jobs already in flight and those planned in
//! this pass) or DefaultEvictor (the Eviction API, directly).

use crate::api::field::FieldError;
use std::collections::HashMap;
use std::sync::Arc;

use super::fit::NodeFit;
use super::podview::PodView;
use super::world::{JobView, World};
use super::{Eviction, Report, Skip};
use crate::descheduler::config::{Limits, Profile};
use crate::descheduler::migration::args::{FilterArgs, MigrationArgs, default_evictor, max_of};
use crate::descheduler::migration::filter::{check, migration_check};
use crate::descheduler::migration::refusal::Refusal;

enum Filter {
    Migration(Box<MigrationArgs>),
    Default(FilterArgs),
}

/// MigrationController's object limiters: a token bucket per workload (rate =
/// maxMigrating / duration, `burst` tokens), kept across passes, forgotten 1.5 × duration
/// after last use.
#[derive(Default)]
struct Buckets(std::sync::Mutex<HashMap<String, (f64, i64)>>);

impl Buckets {
    fn take(
        &self,
        key: &str,
        per_ms: f64,
        burst: f64,
        ttl_ms: i64,
        now_ms: i64,
        consume: bool,
    ) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|_, (_, last)| now_ms - *last <= ttl_ms);
        let (tokens, last) = m.get(key).copied().unwrap_or((burst, now_ms));
        let tokens = (tokens + (now_ms - last).max(0) as f64 * per_ms).min(burst);
        if tokens < 1.0 {
            return false;
        }
        if consume {
            m.insert(key.to_string(), (tokens - 1.0, now_ms));
        }
        true
    }
}

pub struct Evictor {
    filters: Vec<Filter>,
    buckets: Buckets,
    /// `None`: DefaultEvictor; no Evict plugin at all evicts nothing.
    migration: Option<MigrationArgs>,
    enabled: bool,
}

impl Evictor {
    pub fn build(p: &Profile) -> Result<Evictor, FieldError> {
        let args = |n: &str| p.args.get(n).cloned().unwrap_or_default();
        let err =
            |n: &str, e: FieldError| e.within(format!("profiles[{}].pluginConfig[{n}]", p.name));
        let mut filters = Vec::new();
        for f in &p.filter {
            filters.push(match f.as_str() {
                "MigrationController" => Filter::Migration(Box::new(
                    MigrationArgs::parse(&args(f)).map_err(|e| err(f, e))?,
                )),
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
            buckets: Buckets::default(),
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
    fit: &'w NodeFit<'w>,
    now_ms: i64,
    pub dry_run: bool,
    limits: Limits,
    /// The world's jobs in flight, then those planned in this pass.
    jobs: Vec<JobView>,
    evictions: Vec<Eviction>,
    skipped: Vec<Skip>,
    /// Changes plugins planned besides evictions.
    pub actions: Vec<super::action::Planned>,
    per_node: HashMap<String, u32>,
    per_ns: HashMap<String, u32>,
    total: u32,
}

fn node_of(p: &PodView) -> String {
    p.node_name.clone().unwrap_or_default()
}

impl<'w> Pass<'w> {
    pub fn new(world: &'w World, fit: &'w NodeFit<'w>, limits: Limits, now_ms: i64) -> Pass<'w> {
        Pass {
            world,
            fit,
            now_ms,
            dry_run: false,
            limits,
            jobs: world.jobs.clone(),
            evictions: Vec::new(),
            skipped: Vec::new(),
            actions: Vec::new(),
            per_node: HashMap::new(),
            per_ns: HashMap::new(),
            total: 0,
        }
    }

    fn skip(&mut self, pod: &PodView, reason: String) {
        let k = pod.key();
        if self.evictions.iter().any(|e| e.pod.key() == k) {
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
    /// MigrationController's `nodeFit` is part of its filter (Koordinator's evictions).
    pub fn filter(&mut self, ev: &Evictor, pod: &PodView) -> bool {
        self.filter_as(ev, pod, true)
    }

    /// [`Pass::filter`]; `record`: remember a refusal as a skip.
    pub fn filter_as(&mut self, ev: &Evictor, pod: &PodView, record: bool) -> bool {
        for f in &ev.filters {
            let r = match f {
                Filter::Migration(a) => {
                    migration_check(a, pod, self.world, &self.jobs).and_then(|()| {
                        self.node_fit(a.filter.node_fit && !a.skipped("NodeFit"), &a.filter, pod)
                    })
                }
                Filter::Default(a) => check(a, &|_| false, pod, self.world),
            };
            if let Err(why) = r {
                if record {
                    self.skip(pod, why.to_string());
                }
                return false;
            }
        }
        true
    }

    /// DefaultEvictor's PreEvictionFilter: with `nodeFit`, the pod must fit another node.
    pub fn pre_evict_as(&mut self, ev: &Evictor, pod: &PodView, record: bool) -> bool {
        for f in &ev.filters {
            if let Filter::Default(a) = f
                && let Err(why) = self.node_fit(a.node_fit, a, pod)
            {
                if record {
                    self.skip(pod, why.to_string());
                }
                return false;
            }
        }
        true
    }

    fn node_fit(&self, on: bool, f: &FilterArgs, pod: &PodView) -> Result<(), Refusal> {
        if on
            && !self
                .fit
                .fits_any_other_selected(pod, f.node_selector.as_ref())
        {
            return Err(Refusal::NodeFit);
        }
        Ok(())
    }

    pub fn fit(&self) -> &'w NodeFit<'w> {
        self.fit
    }

    fn limited(&self, pod: &PodView) -> Option<String> {
        let node = node_of(pod);
        let ns = pod.namespace.clone();
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
        pod: &Arc<PodView>,
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
            if let Err(why) = migration_check(a, pod, self.world, &self.jobs) {
                self.skip(pod, why.to_string());
                return false;
            }
            if !self.object_limit(ev, a, pod) {
                self.skip(
                    pod,
                    "objectLimiters: the workload's migration rate is used up".into(),
                );
                return false;
            }
            self.jobs.push(JobView {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                pod_uid: pod.uid.clone(),
                node: Some(node_of(pod)),
                owner_uid: pod.controller_uid(),
                arbitrated: false,
            });
        }
        *self.per_node.entry(node_of(pod)).or_default() += 1;
        *self.per_ns.entry(pod.namespace.clone()).or_default() += 1;
        self.total += 1;
        let k = pod.key();
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

    /// Whether the pod's workload may start one more migration now (taking a token).
    fn object_limit(&self, ev: &Evictor, a: &MigrationArgs, pod: &PodView) -> bool {
        let (Some(owner), Some((duration, max, burst))) =
            (pod.controller_uid(), a.object_limiters.get("workload"))
        else {
            return true;
        };
        if duration.is_zero()
            || pod
                .annotation("descheduler.alpha.kubernetes.io/evict")
                .is_some()
        {
            return true;
        }
        let replicas = self.world.expected_replicas(&owner);
        let m = max_of(
            replicas,
            max.as_ref().or(a.max_migrating_per_workload.as_ref()),
        )
        .max(1);
        let ms = duration.as_millis() as f64;
        // A dry run leaves the buckets as they are: each dry pass shows what a real one would do.
        ev.buckets.take(
            &owner,
            m as f64 / ms,
            *burst as f64,
            (ms * 1.5) as i64,
            self.now_ms,
            !self.dry_run,
        )
    }

    pub fn finish(self, report: &mut Report) {
        report.evictions = self.evictions;
        report.skipped = self.skipped;
        report.actions = self.actions;
    }
}
