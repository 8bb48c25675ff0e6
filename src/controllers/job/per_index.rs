//! `backoffLimitPerIndex` for Indexed Jobs (kube's job controller, `indexed_job_utils.go`):
//! each completion index has its own budget of failures. An index past it, or one whose
//! failed pod a `FailIndex` `podFailurePolicy` rule matched, is failed
//! (`status.failedIndexes`) and not retried while the other indexes go on; more failed
//! indexes than `maxFailedIndexes` fail the Job at once (`MaxFailedIndexesExceeded`);
//! otherwise the Job fails with `FailedIndexes` once every index succeeded or failed. A
//! replacement pod carries its index's failures so far in
//! `batch.kubernetes.io/job-index-failure-count`. With a per-index limit and no
//! `backoffLimit`, the Job-wide limit is lifted (kube defaults it to MaxInt32).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::{failure_policy, index_of, phase};

/// The annotation with a replacement pod's index failures so far.
pub const FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";

#[derive(Debug, Default, PartialEq)]
pub struct PerIndex {
    /// Failures counted against each index (not those an `Ignore` rule matched).
    pub failures: BTreeMap<i32, i32>,
    /// Indexes that will not run again.
    pub failed: BTreeSet<i32>,
    /// `maxFailedIndexes`, if set.
    pub max_failed: Option<i32>,
}

impl PerIndex {
    /// More failed indexes than the Job allows.
    pub fn too_many_failed(&self) -> bool {
        self.max_failed
            .is_some_and(|m| self.failed.len() as i64 > i64::from(m))
    }
}

/// The per-index state of an Indexed Job with `backoffLimitPerIndex`; `None` otherwise.
pub fn evaluate(job: &Job, owned: &[&Pod]) -> Option<PerIndex> {
    let spec = job.spec.as_ref()?;
    if spec.completion_mode.as_deref() != Some("Indexed") {
        return None;
    }
    let limit = spec.backoff_limit_per_index?;
    let rules = spec
        .pod_failure_policy
        .as_ref()
        .map(|p| p.rules.as_slice())
        .unwrap_or_default();
    let mut out = PerIndex {
        max_failed: spec.max_failed_indexes,
        ..Default::default()
    };
    for p in owned.iter().filter(|p| phase(p) == Some("Failed")) {
        let Some(i) = index_of(p) else {
            continue;
        };
        match failure_policy::matching(rules, p) {
            Some(("Ignore", _)) => continue,
            Some(("FailIndex", _)) => {
                out.failed.insert(i);
            }
            _ => {}
        }
        *out.failures.entry(i).or_insert(0) += 1;
    }
    let over = out.failures.iter().filter(|(_, n)| **n > limit);
    let over: Vec<i32> = over.map(|(i, _)| *i).collect();
    out.failed.extend(over);
    Some(out)
}

/// Marks a new pod of index `i` with its index's failures so far (none: no annotation).
pub fn annotate(pod: &mut Value, per: &BTreeMap<i32, i32>, i: i32) {
    if let Some(n) = per.get(&i).filter(|n| **n > 0) {
        pod["metadata"]["annotations"][FAILURE_COUNT] = n.to_string().into();
    }
}
