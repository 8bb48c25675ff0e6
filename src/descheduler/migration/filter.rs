//! Which pods may be migrated: the evictor's non-retryable checks (upstream DefaultEvictor's
//! wording) and MigrationController's retryable limits on jobs in flight.

use super::args::{FilterArgs, MigrationArgs, max_of};
use super::refusal::Refusal;
use crate::api::extension::keys::ANNOTATION_EVICTION_COST;
use crate::api::selector::label_selector_matches;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::framework::world::{JobView, World};

const SYSTEM_CRITICAL: i32 = 2_000_000_000;
const EVICT_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/evict";

fn threshold(f: &FilterArgs, world: &World) -> Option<i32> {
    let t = f.priority_threshold.as_ref()?;
    t.value
        .or_else(|| world.priority_classes.get(t.name.as_deref()?).copied())
}

/// The non-retryable checks, `gate` telling which are skipped (none for DefaultEvictor).
pub fn check(
    f: &FilterArgs,
    skip: &dyn Fn(&str) -> bool,
    pod: &PodView,
    world: &World,
) -> Result<(), Refusal> {
    let ann = |k: &str| pod.annotation(k);
    let forced = ann(EVICT_ANNOTATION).is_some();
    if ann("kubernetes.io/config.mirror").is_some() {
        return Err(Refusal::Mirror);
    }
    if !forced {
        if pod.owners.iter().any(|o| o.kind == "DaemonSet") {
            return Err(Refusal::DaemonSet);
        }
        if ann("kubernetes.io/config.source").is_some_and(|s| s != "api") {
            return Err(Refusal::Static);
        }
        if pod.deleting {
            return Err(Refusal::Terminating);
        }
        let bare = pod.owners.is_empty();
        let failed = pod.phase.as_deref() == Some("Failed");
        let bare_ok =
            skip("BarePods") || f.evict_all_bare_pods || (f.evict_failed_bare_pods && failed);
        if bare && !bare_ok {
            return Err(Refusal::NoOwner);
        }
        let priority = pod.priority;
        if !f.evict_system_critical_pods && !skip("SystemCritical") {
            if priority.is_some_and(|p| p >= SYSTEM_CRITICAL) {
                return Err(Refusal::SystemCritical);
            }
            if !skip("PriorityThreshold")
                && let (Some(t), Some(p)) = (threshold(f, world), priority)
                && p >= t
            {
                return Err(Refusal::AbovePriorityThreshold);
            }
        }
        if !f.evict_local_storage_pods && !skip("LocalStorage") && pod.local_storage {
            return Err(Refusal::LocalStorage);
        }
        if f.ignore_pvc_pods && !skip("PVC") && pod.pvc {
            return Err(Refusal::Pvc);
        }
    }
    if f.label_selector.is_some()
        && !skip("LabelSelector")
        && !label_selector_matches(f.label_selector.as_ref(), pod.labels_map().as_ref())
    {
        return Err(Refusal::LabelSelector);
    }
    if !skip("Namespaces") && !f.namespaces.allows(&pod.namespace) {
        return Err(Refusal::Namespace);
    }
    if ann(ANNOTATION_EVICTION_COST).and_then(|v| v.parse::<i64>().ok()) == Some(i32::MAX as i64) {
        return Err(Refusal::MaxEvictionCost);
    }
    Ok(())
}

fn same_pod(j: &JobView, pod: &PodView) -> bool {
    let uid = pod.uid.as_deref();
    (uid.is_some() && j.pod_uid.as_deref() == uid)
        || (j.namespace == pod.namespace && j.pod == pod.name)
}

/// MigrationController's filter: the non-retryable checks, expected replicas, then the
/// limits on jobs in flight (`jobs`: the world's plus those planned in this pass).
pub fn migration_check(
    a: &MigrationArgs,
    pod: &PodView,
    world: &World,
    jobs: &[JobView],
) -> Result<(), Refusal> {
    let skip = |g: &str| a.skipped(g);
    check(&a.filter, &skip, pod, world)?;
    if jobs.iter().any(|j| same_pod(j, pod)) {
        return Err(Refusal::InFlight);
    }
    if a.default_job_mode == "ReservationFirst" {
        let sched = pod.scheduler_name.as_deref().unwrap_or("default-scheduler");
        if !a.scheduler_names.iter().any(|n| n == sched) {
            return Err(Refusal::NoReservationScheduler(sched.to_string()));
        }
    }
    let owner = pod.controller_uid();
    let replicas = owner.as_deref().map(|o| world.expected_replicas(o));
    let max_migrating = replicas.map(|r| max_of(r, a.max_migrating_per_workload.as_ref()));
    let max_unavailable = replicas.map(|r| max_of(r, a.max_unavailable_per_workload.as_ref()));
    if let (Some(r), Some(mm), Some(mu)) = (replicas, max_migrating, max_unavailable)
        && !a.skip_check_expected_replicas
        && !skip("ExpectedReplicas")
        && (r == 1 || r == mm || r == mu)
    {
        return Err(Refusal::ExpectedReplicas {
            replicas: r,
            max_migrating: mm,
            max_unavailable: mu,
        });
    }
    let others: Vec<&JobView> = jobs.iter().filter(|j| !same_pod(j, pod)).collect();
    let node = pod.node_name.clone();
    let ns = pod.namespace.clone();
    let limit = |gate: &str, max: Option<i32>, count: usize| -> Result<(), Refusal> {
        match max {
            Some(m) if !skip(gate) && m > 0 && count as i32 >= m => Err(Refusal::Limit {
                limit: gate.to_string(),
                max: m,
                count,
            }),
            _ => Ok(()),
        }
    };
    let lc = |g: &str| g[..1].to_lowercase() + &g[1..];
    limit(
        &lc("MaxMigratingGlobally"),
        a.max_migrating_globally,
        others.len(),
    )?;
    let on_node = others
        .iter()
        .filter(|j| node.is_some() && j.node == node)
        .count();
    limit(
        &lc("MaxMigratingPerNode"),
        a.max_migrating_per_node,
        on_node,
    )?;
    let in_ns = others.iter().filter(|j| j.namespace == ns).count();
    limit(
        &lc("MaxMigratingPerNamespace"),
        a.max_migrating_per_namespace,
        in_ns,
    )?;
    if let Some(o) = owner.as_deref() {
        let of_owner = others
            .iter()
            .filter(|j| j.owner_uid.as_deref() == Some(o))
            .count();
        limit(&lc("MaxMigratingPerWorkload"), max_migrating, of_owner)?;
        let migrating: std::collections::HashSet<(&str, &str)> = others
            .iter()
            .filter(|j| j.owner_uid.as_deref() == Some(o))
            .map(|j| (j.namespace.as_str(), j.pod.as_str()))
            .collect();
        let unavailable = world
            .by_owner
            .get(o)
            .into_iter()
            .flatten()
            .filter(|p| {
                !p.ready_alive() || migrating.contains(&(p.namespace.as_str(), p.name.as_str()))
            })
            .count();
        limit(
            &lc("MaxUnavailablePerWorkload"),
            max_unavailable,
            unavailable,
        )?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
