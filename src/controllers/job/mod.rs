//! The Job controller (kube-controller-manager's `job`): up to `parallelism` pods run at
//! once until `completions` of them succeeded (without `completions`, until one succeeded
//! and none runs); `Indexed` Jobs run one pod per completion index until every index
//! succeeded (`completedIndexes`). More than `backoffLimit` (default 6) failures —
//! failed pods, and container restarts under `restartPolicy: OnFailure` — fail the Job, as
//! do `activeDeadlineSeconds` and a `podFailurePolicy` `FailJob` rule (`Ignore` rules do
//! not count); its pods are then stopped; `suspend` stops them too. Status, the
//! `Complete`/`Failed` conditions `kubectl wait` reads, and `ttlSecondsAfterFinished` (the
//! finished Job is deleted; its pods go with it). Indexed Jobs may limit failures per index
//! instead (`backoffLimitPerIndex`, `maxFailedIndexes`, `FailIndex` rules: `per_index`),
//! and succeed early under a `successPolicy` (`success_policy`).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::replicaset::{active, owned_pod, ready};

pub mod failure_policy;
pub mod per_index;
pub mod success_policy;

/// The completion index of an Indexed Job's pod (annotation and label).
pub const INDEX: &str = "batch.kubernetes.io/job-completion-index";

#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub create: usize,
    /// Indexed Jobs: the completion indexes to create pods for (`create` of them).
    pub indexes: Vec<i32>,
    pub delete: Vec<String>,
    pub status: Option<Value>,
    /// The finished Job's time to live is over.
    pub expire: bool,
    /// `backoffLimitPerIndex`: failures so far of each index (for its new pod).
    pub index_failures: std::collections::BTreeMap<i32, i32>,
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// When the Job finished (Unix seconds; 0 if the condition has no time), if it did.
fn finished(job: &Job) -> Option<i64> {
    let conds = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    conds.into_iter().flatten().find_map(|c| {
        let done = matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True";
        let at = c
            .last_transition_time
            .as_ref()
            .map_or(0, |t| t.0.as_second());
        done.then_some(at)
    })
}

/// What the failed pods mean under the Job's `podFailurePolicy` (kube's
/// `matchPodFailurePolicy`; without one every failure counts).
struct Failures {
    /// Failed pods no `Ignore` rule matched (the status' `failed`).
    pods: i32,
    /// Those and, under `OnFailure`, container restarts: what `backoffLimit` limits.
    counted: i32,
    /// The message of the first `FailJob` rule a failure matched.
    fail_job: Option<String>,
}

fn failures(job: &Job, owned: &[&Pod]) -> Failures {
    let rules = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
        .map(|p| p.rules.as_slice())
        .unwrap_or_default();
    let mut out = Failures {
        pods: 0,
        counted: 0,
        fail_job: None,
    };
    for p in owned.iter().filter(|p| phase(p) == Some("Failed")) {
        match failure_policy::matching(rules, p) {
            Some(("Ignore", _)) => {}
            Some(("FailJob", why)) => {
                out.pods += 1;
                out.fail_job.get_or_insert(why);
            }
            _ => out.pods += 1,
        }
    }
    out.counted = out.pods;
    // OnFailure: the kubelet restarts containers in place; each restart is a failure.
    let on_failure = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.restart_policy.as_deref())
        == Some("OnFailure");
    if on_failure {
        out.counted += owned
            .iter()
            .filter(|p| active(p))
            .filter_map(|p| p.status.as_ref())
            .flat_map(|s| {
                let init = s.init_container_statuses.iter().flatten();
                init.chain(s.container_statuses.iter().flatten())
            })
            .map(|c| c.restart_count)
            .sum::<i32>();
    }
    out
}

/// The completion index a pod of an Indexed Job carries.
pub fn index_of(p: &Pod) -> Option<i32> {
    let from = |m: Option<&std::collections::BTreeMap<String, String>>| {
        m.and_then(|m| m.get(INDEX)).and_then(|v| v.parse().ok())
    };
    from(p.metadata.annotations.as_ref()).or_else(|| from(p.metadata.labels.as_ref()))
}

/// `0-2,4`: sorted indexes as kube writes `completedIndexes`.
fn index_ranges(indexes: &std::collections::BTreeSet<i32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(i32, i32)> = None;
    for &i in indexes {
        run = match run {
            Some((a, b)) if i == b + 1 => Some((a, i)),
            Some((a, b)) => {
                parts.push(if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                });
                Some((i, i))
            }
            None => Some((i, i)),
        };
    }
    if let Some((a, b)) = run {
        parts.push(if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        });
    }
    parts.join(",")
}

/// One pass for one Job over the pods it controls; `now_s` in Unix seconds.
pub fn plan(job: &Job, owned: &[&Pod], now: &str, now_s: i64) -> Plan {
    let mut out = Plan::default();
    let spec = job.spec.as_ref();
    let mut running: Vec<&Pod> = owned.iter().copied().filter(|p| active(p)).collect();
    if let Some(at) = finished(job) {
        let ttl = spec.and_then(|s| s.ttl_seconds_after_finished);
        out.expire = ttl.is_some_and(|t| now_s >= at + i64::from(t));
        out.delete = running.iter().map(|p| name(p)).collect();
        return out;
    }
    let indexed = spec.and_then(|s| s.completion_mode.as_deref()) == Some("Indexed");
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1).max(0);
    let completions = spec.and_then(|s| s.completions);
    let per = per_index::evaluate(job, owned);
    let backoff = spec
        .and_then(|s| s.backoff_limit)
        .unwrap_or(if per.is_some() { i32::MAX } else { 6 });
    let suspended = spec.and_then(|s| s.suspend).unwrap_or(false);
    let succeeded_pods: Vec<&Pod> = owned
        .iter()
        .copied()
        .filter(|p| phase(p) == Some("Succeeded"))
        .collect();
    let done_indexes: std::collections::BTreeSet<i32> = succeeded_pods
        .iter()
        .filter_map(|p| index_of(p))
        .filter(|i| completions.is_some_and(|c| *i < c))
        .collect();
    let succeeded = if indexed {
        done_indexes.len() as i32
    } else {
        succeeded_pods.len() as i32
    };
    let fails = failures(job, owned);
    let failed_indexes = per.as_ref().map(|p| p.failed.clone()).unwrap_or_default();
    let started = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.as_second());
    let deadline = spec.and_then(|s| s.active_deadline_seconds);
    let mut condition = None;
    let wanted = if let Some(why) = &fails.fail_job {
        condition = Some(("Failed", "PodFailurePolicy", why.clone()));
        0
    } else if fails.counted > backoff {
        condition = Some((
            "Failed",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit".into(),
        ));
        0
    } else if per
        .as_ref()
        .is_some_and(per_index::PerIndex::too_many_failed)
    {
        condition = Some((
            "Failed",
            "MaxFailedIndexesExceeded",
            "Job has exceeded the specified maximal number of failed indexes".into(),
        ));
        0
    } else if deadline
        .zip(started)
        .is_some_and(|(d, s)| !suspended && now_s - s >= d)
    {
        condition = Some((
            "Failed",
            "DeadlineExceeded",
            "Job was active longer than specified deadline".into(),
        ));
        0
    } else if let Some(why) = indexed
        .then(|| success_policy::matched(job, &done_indexes))
        .flatten()
    {
        condition = Some(("Complete", "SuccessPolicy", why));
        0
    } else if let Some(c) = completions {
        let failed = failed_indexes.len() as i32;
        if succeeded + failed >= c && (failed == 0 || running.is_empty()) {
            condition = Some(if failed == 0 {
                ("Complete", "", String::new())
            } else {
                ("Failed", "FailedIndexes", "Job has failed indexes".into())
            });
            0
        } else {
            parallelism.min((c - succeeded - failed).max(0))
        }
    } else if succeeded > 0 {
        // Work queue: done once one succeeded and the rest stopped.
        if running.is_empty() {
            condition = Some(("Complete", "", String::new()));
        }
        0
    } else {
        parallelism
    };
    let wanted = if suspended { 0 } else { wanted } as usize;
    let creating = job.metadata.deletion_timestamp.is_none() && running.len() < wanted;
    if creating && indexed {
        let busy: std::collections::BTreeSet<i32> =
            running.iter().filter_map(|p| index_of(p)).collect();
        out.indexes = (0..completions.unwrap_or(0))
            .filter(|i| !done_indexes.contains(i) && !busy.contains(i))
            .filter(|i| !failed_indexes.contains(i))
            .take(wanted - running.len())
            .collect();
        out.create = out.indexes.len();
    } else if creating {
        out.create = wanted - running.len();
    } else if running.len() > wanted && (condition.is_some() || suspended || completions.is_some())
    {
        running.sort_by_key(|p| {
            std::cmp::Reverse(
                p.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string()),
            )
        });
        out.delete = running[..running.len() - wanted]
            .iter()
            .map(|p| name(p))
            .collect();
    }
    let mut status = json!({
        "active": running.len(),
        "ready": running.iter().filter(|p| ready(p)).count(),
        "succeeded": succeeded_pods.len(),
        "failed": fails.pods,
        "startTime": job.status.as_ref().and_then(|s| s.start_time.clone()).map_or_else(|| json!(now), |t| json!(t)),
    });
    if indexed {
        status["completedIndexes"] = index_ranges(&done_indexes).into();
    }
    if let Some(p) = per {
        status["failedIndexes"] = index_ranges(&p.failed).into();
        out.index_failures = p.failures;
    }
    if let Some((kind, reason, message)) = &condition {
        let mut c = json!({"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now});
        if !reason.is_empty() {
            c["reason"] = (*reason).into();
            c["message"] = message.clone().into();
        }
        status["conditions"] = if *reason == "SuccessPolicy" {
            // kube declares the success first, then completes once the pods are gone.
            let mut met = c.clone();
            met["type"] = "SuccessCriteriaMet".into();
            json!([met, c])
        } else {
            json!([c])
        };
        if *kind == "Complete" {
            status["completionTime"] = now.into();
        }
    }
    let cur = serde_json::to_value(job.status.clone().unwrap_or_default()).unwrap_or_default();
    let same = ["active", "ready", "succeeded", "failed"].iter().all(|k| {
        cur.get(*k).and_then(Value::as_i64).unwrap_or(0) == status[*k].as_i64().unwrap_or(0)
    }) && cur.get("startTime").is_some()
        && cur.get("completedIndexes") == status.get("completedIndexes")
        && cur.get("failedIndexes") == status.get("failedIndexes")
        && condition.is_none();
    if !same {
        out.status = Some(status);
    }
    out
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// A pod of the Job: its template, Kubernetes' job labels, owned by the Job; in an
/// Indexed Job, pod `index` (`<job>-<index>-` names, the index in annotation, label, hostname
/// and every container's `JOB_COMPLETION_INDEX`).
pub fn pod_from(job: &Job, index: Option<i32>) -> Option<Value> {
    let spec = job.spec.as_ref()?;
    let mut pod = owned_pod(&spec.template, "batch/v1", "Job", &job.metadata)?;
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    for (k, v) in [
        ("batch.kubernetes.io/job-name", name.clone()),
        ("job-name", name.clone()),
        ("batch.kubernetes.io/controller-uid", uid.clone()),
        ("controller-uid", uid),
    ] {
        pod["metadata"]["labels"][k] = v.into();
    }
    if let Some(i) = index {
        pod["metadata"]["generateName"] = format!("{name}-{i}-").into();
        pod["metadata"]["labels"][INDEX] = i.to_string().into();
        pod["metadata"]["annotations"][INDEX] = i.to_string().into();
        pod["spec"]["hostname"] = format!("{name}-{i}").into();
        let env = json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef":
            {"fieldPath": format!("metadata.annotations['{INDEX}']")}}});
        for list in ["initContainers", "containers"] {
            for c in pod["spec"][list].as_array_mut().into_iter().flatten() {
                let vars = c["env"].as_array_mut();
                let mut vars: Vec<Value> = vars.map(std::mem::take).unwrap_or_default();
                vars.retain(|v| v["name"] != "JOB_COMPLETION_INDEX");
                vars.push(env.clone());
                c["env"] = Value::Array(vars);
            }
        }
    }
    Some(pod)
}

#[cfg(test)]
mod tests;
