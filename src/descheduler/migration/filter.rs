//! Which pods may be migrated: the evictor's non-retryable checks (upstream DefaultEvictor's
//! wording) and MigrationController's retryable limits on jobs in flight.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::args::{FilterArgs, MigrationArgs, max_of};
use crate::api::extension::keys::ANNOTATION_EVICTION_COST;
use crate::api::selector::label_selector_matches;
use crate::descheduler::framework::world::{JobView, World, controller_uid};

const SYSTEM_CRITICAL: i32 = 2_000_000_000;
const EVICT_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/evict";

fn annotations(p: &Pod) -> Option<&BTreeMap<String, String>> {
    p.metadata.annotations.as_ref()
}

fn owned_by_daemonset(p: &Pod) -> bool {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
}

fn has(p: &Pod, pred: impl Fn(&k8s_openapi::api::core::v1::Volume) -> bool) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| v.iter().any(pred))
}

fn threshold(f: &FilterArgs, world: &World) -> Option<i32> {
    let t = f.priority_threshold.as_ref()?;
    t.value
        .or_else(|| world.priority_classes.get(t.name.as_deref()?).copied())
}

/// The non-retryable checks, `gate` telling which are skipped (none for DefaultEvictor).
pub fn check(
    f: &FilterArgs,
    skip: &dyn Fn(&str) -> bool,
    pod: &Pod,
    world: &World,
) -> Result<(), String> {
    let ann = annotations(pod);
    let forced = ann.is_some_and(|a| a.contains_key(EVICT_ANNOTATION));
    if ann.is_some_and(|a| a.contains_key("kubernetes.io/config.mirror")) {
        return Err("pod is a mirror pod".into());
    }
    if !forced {
        if owned_by_daemonset(pod) {
            return Err("pod is a DaemonSet pod".into());
        }
        if ann
            .and_then(|a| a.get("kubernetes.io/config.source"))
            .is_some_and(|s| s != "api")
        {
            return Err("pod is a static pod".into());
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Err("pod is terminating".into());
        }
        let bare = pod
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(|o| o.is_empty());
        let failed = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed");
        let bare_ok =
            skip("BarePods") || f.evict_all_bare_pods || (f.evict_failed_bare_pods && failed);
        if bare && !bare_ok {
            return Err("pod does not have any ownerRefs".into());
        }
        let priority = pod.spec.as_ref().and_then(|s| s.priority);
        if !f.evict_system_critical_pods && !skip("SystemCritical") {
            if priority.is_some_and(|p| p >= SYSTEM_CRITICAL) {
                return Err("pod has system critical priority".into());
            }
            if !skip("PriorityThreshold")
                && let (Some(t), Some(p)) = (threshold(f, world), priority)
                && p >= t
            {
                return Err(
                    "pod has higher priority than specified priority class threshold".into(),
                );
            }
        }
        if !f.evict_local_storage_pods
            && !skip("LocalStorage")
            && has(pod, |v| v.empty_dir.is_some() || v.host_path.is_some())
        {
            return Err(
                "pod has local storage and descheduler is not configured with evictLocalStoragePods"
                    .into(),
            );
        }
        if f.ignore_pvc_pods && !skip("PVC") && has(pod, |v| v.persistent_volume_claim.is_some()) {
            return Err("pod has a PVC and descheduler is configured to ignore PVC pods".into());
        }
    }
    if f.label_selector.is_some()
        && !skip("LabelSelector")
        && !label_selector_matches(f.label_selector.as_ref(), pod.metadata.labels.as_ref())
    {
        return Err(
            "pod labels do not match the labelSelector filter in the policy parameter".into(),
        );
    }
    if !skip("Namespaces")
        && !f
            .namespaces
            .allows(pod.metadata.namespace.as_deref().unwrap_or(""))
    {
        return Err("pod's namespace is not evictable".into());
    }
    if ann
        .and_then(|a| a.get(ANNOTATION_EVICTION_COST))
        .and_then(|v| v.parse::<i64>().ok())
        == Some(i32::MAX as i64)
    {
        return Err("pod has the maximum eviction cost".into());
    }
    Ok(())
}

fn same_pod(j: &JobView, pod: &Pod) -> bool {
    let uid = pod.metadata.uid.as_deref();
    (uid.is_some() && j.pod_uid.as_deref() == uid)
        || (j.namespace == pod.metadata.namespace.as_deref().unwrap_or("")
            && j.pod == pod.metadata.name.as_deref().unwrap_or(""))
}

/// MigrationController's filter: the non-retryable checks, expected replicas, then the
/// limits on jobs in flight (`jobs`: the world's plus those planned in this pass).
pub fn migration_check(
    a: &MigrationArgs,
    pod: &Pod,
    world: &World,
    jobs: &[JobView],
) -> Result<(), String> {
    let skip = |g: &str| a.skipped(g);
    check(&a.filter, &skip, pod, world)?;
    if jobs.iter().any(|j| same_pod(j, pod)) {
        return Err("pod already has a PodMigrationJob in flight".into());
    }
    if a.default_job_mode == "ReservationFirst" {
        let sched = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        if !a.scheduler_names.iter().any(|n| n == sched) {
            return Err(format!(
                "pod's scheduler {sched} does not support Reservation"
            ));
        }
    }
    let owner = controller_uid(pod);
    let replicas = owner.as_deref().map(|o| world.expected_replicas(o));
    let max_migrating = replicas.map(|r| max_of(r, a.max_migrating_per_workload.as_ref()));
    let max_unavailable = replicas.map(|r| max_of(r, a.max_unavailable_per_workload.as_ref()));
    if let (Some(r), Some(mm), Some(mu)) = (replicas, max_migrating, max_unavailable)
        && !a.skip_check_expected_replicas
        && !skip("ExpectedReplicas")
        && (r == 1 || r == mm || r == mu)
    {
        return Err(format!(
            "pod fails the following checks: expectedReplicas (replicas {r}, maxMigrating {mm}, maxUnavailable {mu})"
        ));
    }
    let others: Vec<&JobView> = jobs.iter().filter(|j| !same_pod(j, pod)).collect();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let limit = |gate: &str, max: Option<i32>, count: usize| -> Result<(), String> {
        match max {
            Some(m) if !skip(gate) && m > 0 && count as i32 >= m => {
                Err(format!("{gate} {m} reached ({count} migrating)"))
            }
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
        let migrating: std::collections::HashSet<String> = others
            .iter()
            .filter(|j| j.owner_uid.as_deref() == Some(o))
            .map(|j| format!("{}/{}", j.namespace, j.pod))
            .collect();
        let unavailable = world
            .by_owner
            .get(o)
            .into_iter()
            .flatten()
            .filter(|(k, ready)| !ready || migrating.contains(k))
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
