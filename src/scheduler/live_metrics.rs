//! The scheduling cycle's observations for `scheduler_*` metrics.

use std::time::Instant;

use super::Scheduler;
use crate::scheduler::framework::Nomination;
use crate::scheduler::framework::runtime::CycleResult;
use crate::scheduler::metrics::Outcome;

impl Scheduler {
    /// One attempt's extension points and result.
    pub(super) fn observe(
        &self,
        fi: usize,
        r: Option<&CycleResult>,
        outcome: Outcome,
        started: Instant,
    ) {
        let profile = &self.frameworks[fi].scheduler_name;
        if let Some(r) = r {
            let ok = r.node.is_some();
            for (point, seconds) in &r.timings {
                self.metrics.point(profile, *point, ok, *seconds);
            }
            let algorithm = r.timings.iter().map(|(_, s)| s).sum();
            let feasible = || r.verdicts.values().filter(|v| v.feasible).count();
            let placed = r.node.as_ref().map(|_| (r.processed, feasible()));
            self.metrics.pods.cycle(algorithm, placed);
        }
        let seconds = started.elapsed().as_secs_f64();
        self.metrics.pods.maybe_timeout(profile, seconds);
        self.metrics.attempt(profile, outcome, seconds);
    }

    /// The queue's series: pods per queue, binding cycles, pods moved in, unschedulable
    /// pods by plugin (recounted only when that set changed); and the ElasticQuota series.
    pub(super) fn publish(&mut self) {
        self.publish_quotas();
        self.metrics.pending(self.queue.counts());
        self.metrics.binding(self.binds.len());
        self.metrics.pods.work("binding", self.binds.len());
        self.metrics.pods.work("permit", self.waiting_count());
        for ((queue, event), n) in self.queue.drain_incoming() {
            self.metrics.pods.incoming(queue, event, n);
        }
        let version = self.queue.unschedulable_version;
        if version == self.unschedulable_published {
            return;
        }
        self.unschedulable_published = version;
        let gauges = &self.metrics.pods.unschedulable;
        gauges.clear();
        for ((plugin, profile), n) in self.queue.unschedulable_by_plugin() {
            let l = crate::scheduler::metrics::pods::UnschedulableLabels {
                plugin: plugin.to_string(),
                profile,
            };
            gauges.get_or_create(&l).set(n);
        }
    }

    /// An unschedulable attempt, and the preemption PostFilter nominated, if any.
    pub(super) fn observe_unschedulable(
        &self,
        fi: usize,
        r: Option<&CycleResult>,
        nomination: Option<&Nomination>,
        started: Instant,
    ) {
        if let Some(n) = nomination {
            self.metrics.preemption(n.victims.len());
        }
        self.observe(fi, r, Outcome::Unschedulable, started);
    }

    /// Why a pod is unschedulable, for `scheduler_unschedulable_pods`: every plugin that
    /// rejected it on some node.
    pub(super) fn note_unschedulable(&mut self, fi: usize, key: &str, r: Option<&CycleResult>) {
        let mut plugins: Vec<&'static str> = r
            .into_iter()
            .flat_map(|r| r.verdicts.values())
            .filter_map(|v| v.plugin)
            .collect();
        plugins.sort_unstable();
        plugins.dedup();
        let profile = self.frameworks[fi].scheduler_name.clone();
        self.queue.set_unschedulable_by(key, &profile, plugins);
    }
}

impl Scheduler {
    /// `scheduler_elastic_quota_status{name,resource,tree,is_parent,parent,field}` as
    /// Koordinator's quota controller records it (cpu in milli), when the quotas changed.
    fn publish_quotas(&mut self) {
        use crate::scheduler::plugins::elasticquota::status as q;
        let Some(version) = q::version(&self.cluster) else {
            return;
        };
        if self.quotas_published == Some(version) {
            return;
        }
        self.quotas_published = Some(version);
        let started = Instant::now();
        let gauges = &self.metrics.pods.quota_status;
        gauges.clear();
        for (name, f) in q::figures(&self.cluster) {
            let Some(info) = self.cluster.quotas.info(&name) else {
                continue;
            };
            let fields = [
                ("runtime", &f.runtime),
                ("request", &f.request),
                ("child-request", &f.child_request),
                ("non-preemptible-used", &f.non_preemptible_used),
                ("used", &f.used),
                ("min", &info.min),
                ("max", &info.max),
            ];
            for (field, amounts) in fields {
                for (resource, v) in amounts {
                    let l = crate::scheduler::metrics::pods::QuotaLabels {
                        name: name.clone(),
                        resource: resource.clone(),
                        tree: info.tree_id.clone(),
                        is_parent: info.is_parent.to_string(),
                        parent: info.parent.clone(),
                        field: field.to_string(),
                    };
                    gauges.get_or_create(&l).set(*v);
                }
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        self.metrics
            .pods
            .quota_process("syncElasticQuotaStatusMetrics", seconds);
    }
}
