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
            use crate::scheduler::plugins::reservation::plugin::INDEX_QUERY;
            if let Some(query) = r.state.read::<Option<usize>>(INDEX_QUERY) {
                self.metrics.koord.selector_index(*query);
            }
        }
        let seconds = started.elapsed().as_secs_f64();
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
        for (reason, members, seconds) in self.queue.gang_cycles.drain(..) {
            self.metrics.koord.gang_cycle(reason, members, seconds);
        }
        for seconds in self.queue.next_pod_seconds.drain(..) {
            self.metrics.koord.next_pod(seconds);
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
        self.note_hint(fi, key, &plugins);
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

impl Scheduler {
    /// Coscheduling's job preemption in this attempt, under the job's name (its gang
    /// group, or the pod) and Koordinator's reason.
    pub(super) fn observe_job_preemption(
        &self,
        pod: &crate::scheduler::framework::PodInfo,
        runs: &[crate::scheduler::framework::runtime::PostFilterRun],
    ) {
        use crate::scheduler::plugins::coscheduling::preempt::reason_label;
        let Some(run) = runs.iter().find(|r| r.plugin == "Coscheduling") else {
            return;
        };
        if run.message.is_empty() && !run.success {
            return; // enablePreemption is off: no job preemption ran
        }
        let g = &self.cluster.gangs;
        let job = g.gang_id(&pod.key).map(|id| g.group_id(id));
        let job = job.unwrap_or_else(|| pod.key.clone());
        let reason = reason_label(&run.message, run.success);
        self.metrics
            .koord
            .job_preemption(&job, reason, run.seconds, Instant::now());
    }
}

/// Koordinator resyncs its reservation series every minute.
const RESERVATION_SERIES_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl Scheduler {
    /// Koordinator's own series that follow the cluster: waiting gang groups at once,
    /// reservations by phase and resource every minute; when to publish them next.
    pub(super) fn publish_koord(&mut self, now: Instant) -> Option<Instant> {
        let g = &self.cluster.gangs;
        let groups: std::collections::BTreeSet<String> = g
            .waiting
            .iter()
            .filter_map(|k| g.gang_id(k))
            .map(|id| g.group_id(id))
            .collect();
        self.metrics.koord.waiting_gang_groups(groups.len());
        if self.devices_changed {
            self.devices_changed = false;
            let names: Vec<String> = self.not_well_planned.iter().cloned().collect();
            self.metrics.koord.secondary_devices(&names);
        }
        let due = self.reservation_series_at.is_none_or(|at| at <= now);
        if due && self.synced() {
            self.reservation_series_at = Some(now + RESERVATION_SERIES_EVERY);
            let infos = self
                .cluster
                .reservations
                .values()
                .map(|r| r.object.as_ref());
            reservation_series(&self.metrics.koord, infos);
        }
        self.reservation_series_at
    }
}

/// `resyncReservations`: every reservation's phases (1 for its own, Pending when it has
/// none) and, per resource it has allocatable, allocatable, allocated and utilization.
fn reservation_series<'a>(
    s: &crate::scheduler::metrics::koord::KoordSeries,
    reservations: impl Iterator<Item = &'a crate::api::scheduling::reservation::Reservation>,
) {
    use crate::scheduler::metrics::koord::{PhaseLabels, ResourceLabels};
    s.reservation_phase.clear();
    s.reservation_resource.clear();
    for r in reservations {
        let name = r.metadata.name.clone().unwrap_or_default();
        let status = r.status.as_ref();
        let phase = status
            .and_then(|s| s.phase.as_deref())
            .filter(|p| !p.is_empty());
        for p in ["Pending", "Available", "Succeeded", "Failed"] {
            let own = phase.unwrap_or("Pending") == p;
            let l = PhaseLabels {
                name: name.clone(),
                phase: p.into(),
            };
            s.reservation_phase
                .get_or_create(&l)
                .set(if own { 1.0 } else { 0.0 });
        }
        let Some(alloc) = status.and_then(|s| s.allocatable.as_ref()) else {
            continue;
        };
        let allocated = status.and_then(|s| s.allocated.as_ref());
        for (resource, q) in alloc {
            let used = allocated.and_then(|a| a.get(resource));
            let (total, used, unit) = in_unit(resource, q, used);
            let set = |ty: &str, unit: &str, v: f64| {
                let l = ResourceLabels {
                    r#type: ty.into(),
                    name: name.clone(),
                    resource: resource.clone(),
                    unit: unit.into(),
                };
                s.reservation_resource.get_or_create(&l).set(v);
            };
            set("allocatable", unit, total);
            set("allocated", unit, used);
            if total > 0.0 {
                set("utilization", "ratio", used / total);
            }
        }
    }
}

/// A reservation's quantity in Koordinator's unit: CPU in cores, memory in GiB, the rest
/// raw.
fn in_unit(
    resource: &str,
    total: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    used: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> (f64, f64, &'static str) {
    use crate::api::quantity::{milli, value as whole};
    type Q = k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let value = |q: Option<&Q>, in_milli: bool| match (q, in_milli) {
        (None, _) => 0.0,
        (Some(q), true) => milli(&q.0).unwrap_or(0) as f64 / 1000.0,
        (Some(q), false) => whole(&q.0).unwrap_or(0) as f64,
    };
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    match resource {
        "cpu" => (value(Some(total), true), value(used, true), "core"),
        "memory" => (
            value(Some(total), false) / GIB,
            value(used, false) / GIB,
            "Gi",
        ),
        _ => (value(Some(total), false), value(used, false), "raw"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::metrics::koord::{KoordSeries, PhaseLabels, ResourceLabels};

    #[test]
    fn reservation_series_follow_koordinators_resync() {
        let r = |v: serde_json::Value| -> crate::api::scheduling::reservation::Reservation {
            serde_json::from_value(v).unwrap()
        };
        let available = r(serde_json::json!({"metadata": {"name": "r1"},
            "spec": {"template": {}, "owners": []},
            "status": {"phase": "Available", "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "2"},
                "allocated": {"cpu": "1500m", "memory": "2Gi"}}}));
        let pending = r(serde_json::json!({"metadata": {"name": "r2"},
            "spec": {"template": {}, "owners": []}}));
        let s = KoordSeries::default();
        reservation_series(&s, [&available, &pending].into_iter());
        let phase = |name: &str, phase: &str| {
            let l = PhaseLabels {
                name: name.into(),
                phase: phase.into(),
            };
            s.reservation_phase.get_or_create(&l).get()
        };
        assert_eq!(phase("r1", "Available"), 1.0);
        assert_eq!(phase("r1", "Pending"), 0.0);
        assert_eq!(phase("r2", "Pending"), 1.0, "no phase yet: Pending");
        let res = |ty: &str, resource: &str, unit: &str| {
            let l = ResourceLabels {
                r#type: ty.into(),
                name: "r1".into(),
                resource: resource.into(),
                unit: unit.into(),
            };
            s.reservation_resource.get_or_create(&l).get()
        };
        assert_eq!(res("allocatable", "cpu", "core"), 4.0);
        assert_eq!(res("allocated", "cpu", "core"), 1.5);
        assert_eq!(res("utilization", "cpu", "ratio"), 0.375);
        assert_eq!(res("allocatable", "memory", "Gi"), 8.0);
        assert_eq!(res("utilization", "memory", "ratio"), 0.25);
        assert_eq!(res("allocated", "pods", "raw"), 0.0);
    }
}
