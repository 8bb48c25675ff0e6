//! The Job controller (kube-controller-manager's `job`, NonIndexed): up to `parallelism`
//! pods run at once until `completions` of them succeeded (without `completions`, until
//! one succeeded and none runs); more than `backoffLimit` (default 6) failed pods fail the
//! Job and stop its pods; `suspend` stops them too. Status, the `Complete`/`Failed`
//! conditions `kubectl wait` reads, and `ttlSecondsAfterFinished` (the finished Job is
//! deleted; its pods go with it).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::replicaset::{active, owned_pod, ready};

#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub create: usize,
    pub delete: Vec<String>,
    pub status: Option<Value>,
    /// The finished Job's time to live is over.
    pub expire: bool,
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

/// One pass for one Job over the pods it controls; `now_s` in Unix seconds.
pub fn plan(job: &Job, owned: &[&Pod], now: &str, now_s: i64) -> Plan {
    let mut out = Plan::default();
    let spec = job.spec.as_ref();
    let succeeded = owned
        .iter()
        .filter(|p| phase(p) == Some("Succeeded"))
        .count() as i32;
    let failed = owned.iter().filter(|p| phase(p) == Some("Failed")).count() as i32;
    let mut running: Vec<&Pod> = owned.iter().copied().filter(|p| active(p)).collect();
    if let Some(at) = finished(job) {
        let ttl = spec.and_then(|s| s.ttl_seconds_after_finished);
        out.expire = ttl.is_some_and(|t| now_s >= at + i64::from(t));
        out.delete = running
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        return out;
    }
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1).max(0);
    let completions = spec.and_then(|s| s.completions);
    let backoff = spec.and_then(|s| s.backoff_limit).unwrap_or(6);
    let suspended = spec.and_then(|s| s.suspend).unwrap_or(false);
    let mut condition = None;
    let wanted = if failed > backoff {
        condition = Some((
            "Failed",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ));
        0
    } else if let Some(c) = completions {
        if succeeded >= c {
            condition = Some(("Complete", "", ""));
            0
        } else {
            parallelism.min(c - succeeded)
        }
    } else if succeeded > 0 {
        // Work queue: done once one succeeded and the rest stopped.
        if running.is_empty() {
            condition = Some(("Complete", "", ""));
        }
        0
    } else {
        parallelism
    };
    let wanted = if suspended { 0 } else { wanted } as usize;
    if running.len() < wanted && job.metadata.deletion_timestamp.is_none() {
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
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
    }
    let mut status = json!({
        "active": running.len(),
        "ready": running.iter().filter(|p| ready(p)).count(),
        "succeeded": succeeded,
        "failed": failed,
        "startTime": job.status.as_ref().and_then(|s| s.start_time.clone()).map_or_else(|| json!(now), |t| json!(t)),
    });
    if let Some((kind, reason, message)) = condition {
        let mut c = json!({"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now});
        if !reason.is_empty() {
            c["reason"] = reason.into();
            c["message"] = message.into();
        }
        status["conditions"] = json!([c]);
        if kind == "Complete" {
            status["completionTime"] = now.into();
        }
    }
    let cur = serde_json::to_value(job.status.clone().unwrap_or_default()).unwrap_or_default();
    let same = ["active", "ready", "succeeded", "failed"].iter().all(|k| {
        cur.get(*k).and_then(Value::as_i64).unwrap_or(0) == status[*k].as_i64().unwrap_or(0)
    }) && cur.get("startTime").is_some()
        && condition.is_none();
    if !same {
        out.status = Some(status);
    }
    out
}

/// A pod of the Job: its template, Kubernetes' job labels, owned by the Job.
pub fn pod_from(job: &Job) -> Option<Value> {
    let spec = job.spec.as_ref()?;
    let mut pod = owned_pod(&spec.template, "batch/v1", "Job", &job.metadata)?;
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    for (k, v) in [
        ("batch.kubernetes.io/job-name", name.clone()),
        ("job-name", name),
        ("batch.kubernetes.io/controller-uid", uid.clone()),
        ("controller-uid", uid),
    ] {
        pod["metadata"]["labels"][k] = v.into();
    }
    Some(pod)
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
