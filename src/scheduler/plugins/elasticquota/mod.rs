//! ElasticQuota (`pkg/scheduler/plugins/elasticquota`): a pod is admitted only while its
//! quota's used + its request stays within the quota's runtime (or max, without runtime
//! quota); non-preemptible pods only within min; PostFilter preempts within the quota,
//! and reclaims a quota's min from quotas using more than their runtime. The accounting
//! lives in [`ClusterState::quotas`] so explain and the live scheduler share it.

pub mod args;
mod hints;
pub mod preempt;
pub mod revoke;
pub mod status;

use super::super::framework::runtime::Verdicts;
use super::super::framework::{
    ClusterState, CycleState, Fits, FitsPod, Nomination, Plugin, PodInfo, Point, PreFilterResult,
    Status,
};
use crate::api::extension::keys::{LABEL_QUOTA_PREEMPTIBLE, QUOTA_ROOT};
use crate::api::pod::Amounts;
use crate::scheduler::framework::events::{ClusterEvent, Events};
use crate::scheduler::framework::quotas::masked;

pub const NAME: &str = "ElasticQuota";

pub struct ElasticQuota {
    pub args: args::Args,
}

/// What PreFilter saw, for PostFilter.
#[derive(Debug, Clone)]
pub struct QuotaCycle {
    pub quota: String,
    pub limit: Amounts,
    pub used: Amounts,
    pub request: Amounts,
}

/// `cpu:4,memory:8Gi` — Koordinator's `printResourceList` (sorted; `<empty>` when none).
pub fn print_list(a: &Amounts) -> String {
    if a.is_empty() {
        return "<empty>".into();
    }
    let list = crate::api::pod::resource_list(a);
    let mut parts: Vec<String> = list
        .iter()
        .map(|(k, q)| format!("{k}:{}", binary_form(k, q)))
        .collect();
    parts.sort();
    parts.join(",")
}

/// Byte amounts the way Go prints a binary-SI quantity (`8Gi`) when exact.
fn binary_form(name: &str, q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> String {
    let Ok(v) = q.0.parse::<i64>() else {
        return q.0.clone();
    };
    if name == crate::api::extension::resources::CPU || v == 0 {
        return q.0.clone();
    }
    for (unit, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if v % (1i64 << shift) == 0 {
            return format!("{}{unit}", v >> shift);
        }
    }
    q.0.clone()
}

/// Resources where `a` exceeds `limit` (Go's `[cpu memory]`); empty when within.
pub fn exceeded(a: &Amounts, limit: &Amounts) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| **v > limit.get(*k).copied().unwrap_or(0))
        .map(|(k, _)| k.clone())
        .collect()
}

pub fn non_preemptible(pod: &PodInfo) -> bool {
    pod.labels
        .get(LABEL_QUOTA_PREEMPTIBLE)
        .is_some_and(|v| v == "false")
}

fn sum(a: &Amounts, b: &Amounts) -> Amounts {
    let mut out = a.clone();
    crate::api::pod::add(&mut out, b);
    out
}

/// The quota a pod is charged to: where it is counted, else its label or namespace.
pub fn quota_for(cluster: &ClusterState, pod: &PodInfo) -> String {
    if let Some(q) = cluster.quotas.quota_of(&pod.key) {
        return q.to_string();
    }
    let label = pod
        .labels
        .get(crate::api::extension::keys::LABEL_QUOTA_NAME);
    cluster
        .quotas
        .resolve(&pod.namespace, label.map(String::as_str))
}

impl ElasticQuota {
    /// The quota, its limit and its used, for a pod of `quota`.
    fn cycle(&self, cluster: &ClusterState, quota: &str, pod: &PodInfo) -> Option<QuotaCycle> {
        let max = cluster.quotas.max_of(quota)?;
        let limit = if self.args.enable_runtime_quota {
            cluster
                .quota_runtime()
                .get(quota)
                .cloned()
                .unwrap_or_default()
        } else {
            max.clone()
        };
        let sums = cluster.quotas.sums(quota);
        Some(QuotaCycle {
            quota: quota.to_string(),
            limit: masked(&limit, &max),
            used: masked(&sums.used, &max),
            request: masked(&pod.requests, &max),
        })
    }

    fn check_ancestors(&self, cluster: &ClusterState, quota: &str, req: &Amounts) -> Status {
        let runtime = cluster.quota_runtime();
        let mut at = cluster.quotas.info(quota).map(|q| q.parent.clone());
        let mut seen = 0;
        while let Some(name) = at.filter(|n| n != QUOTA_ROOT && seen < 64) {
            seen += 1;
            let Some(info) = cluster.quotas.info(&name) else {
                break;
            };
            let used = masked(&status::used_of(cluster, &name), &info.max);
            let limit = runtime.get(&name).cloned().unwrap_or_default();
            let want = sum(&used, &masked(req, &info.max));
            let over = exceeded(&want, &limit);
            if !over.is_empty() {
                return Status::unschedulable(format!(
                    "Insufficient quotas, quotaName: {name}, runtime: {}, used: {}, pod's request: {}, exceedDimensions: [{}]",
                    print_list(&limit),
                    print_list(&used),
                    print_list(req),
                    over.join(" ")
                ));
            }
            at = Some(info.parent.clone());
        }
        Status::success()
    }
}

impl Plugin for ElasticQuota {
    fn name(&self) -> &'static str {
        NAME
    }
    /// Koordinator's EventsToRegister: a pod deleted, an ElasticQuota changed.
    fn events(&self) -> Events {
        Events::POD_ASSIGNED_DELETE.or(Events::QUOTA)
    }
    fn hint(&self, pod: &PodInfo, ev: &ClusterEvent, cluster: &ClusterState) -> bool {
        !self.args.enable_queue_hint || hints::may_help(self, pod, ev, cluster)
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PreFilter, Point::PostFilter, Point::Reserve]
    }
    fn setup(&self, cluster: &mut ClusterState) {
        cluster.quotas.settings = Some(self.args.settings.clone());
    }
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> (Status, PreFilterResult) {
        if !cluster.quotas.enabled() {
            // A cluster state built without this plugin's setup tracks no quotas.
            return (Status::skip(), None);
        }
        let quota = quota_for(cluster, pod);
        let Some(c) = self.cycle(cluster, &quota, pod) else {
            return (
                Status::error(format!("Could not find the specified ElasticQuota {quota}")),
                None,
            );
        };
        let want = sum(&c.used, &c.request);
        let over = exceeded(&want, &c.limit);
        let verdict = if !over.is_empty() {
            Status::unschedulable(format!(
                "Insufficient quotas, quotaName: {quota}, runtime: {}, used: {}, pod's request: {}, exceedDimensions: [{}]",
                print_list(&c.limit),
                print_list(&c.used),
                print_list(&c.request),
                over.join(" ")
            ))
        } else if non_preemptible(pod) {
            self.check_non_preemptible(cluster, &c)
        } else if self.args.enable_check_parent_quota {
            self.check_ancestors(cluster, &quota, &c.request)
        } else {
            Status::success()
        };
        state.write(NAME, c);
        (verdict, None)
    }
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        rejected: &Verdicts,
        fits: &Fits<'_>,
        _: &FitsPod<'_>,
    ) -> (Status, Option<Nomination>) {
        let Some(c) = state.read::<QuotaCycle>(NAME) else {
            return (Status::unschedulable(""), None);
        };
        preempt::post_filter(self, c, pod, cluster, rejected, fits)
    }
}

impl ElasticQuota {
    fn check_non_preemptible(&self, cluster: &ClusterState, c: &QuotaCycle) -> Status {
        let min = cluster
            .quotas
            .info(&c.quota)
            .map(|q| q.min.clone())
            .unwrap_or_default();
        let used = masked(
            &cluster.quotas.sums(&c.quota).non_preemptible_used,
            &c.limit,
        );
        let over = exceeded(&sum(&used, &c.request), &min);
        if over.is_empty() {
            return Status::success();
        }
        Status::unschedulable(format!(
            "Insufficient non-preemptible quotas, quotaName: {}, min: {}, nonPreemptibleUsed: {}, pod's request: {}, exceedDimensions: [{}]",
            c.quota,
            print_list(&min),
            print_list(&used),
            print_list(&c.request),
            over.join(" ")
        ))
    }
}

#[cfg(test)]
#[path = "plugin_tests.rs"]
mod tests;
