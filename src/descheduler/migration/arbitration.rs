//! The order in which arbitration looks at pending PodMigrationJobs, as Koordinator's
//! arbitrator sorts them (`arbitrator/sort.go`), each sort stable over the last:
//! 1. newest job first (creation time, in seconds);
//! 2. by pod, the pod to give up first first (the descheduler's pod sorter); a job whose
//!    pod is gone before all;
//! 3. jobs whose pods belong to one batch `Job` next to each other, where its first one was;
//! 4. jobs of the batch `Job` with the most migrations already in flight first.
//!
//! The order matters when the limits let only some pass: those earlier take the room.

use std::collections::HashMap;

use crate::api::scheduling::migration::PodMigrationJob;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::sorter::compare;

/// One pending job as arbitration sees it.
pub struct Pending<'a> {
    pub job: &'a PodMigrationJob,
    pub pod: Option<&'a PodView>,
}

/// The UID of the batch `Job` controlling the pod, if a `Job` does.
fn job_owner(pod: Option<&PodView>) -> Option<&str> {
    pod?.owners
        .iter()
        .find(|o| o.controller && o.kind == "Job")
        .map(|o| o.uid.as_str())
}

fn created_s(j: &PodMigrationJob) -> i64 {
    j.metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_second())
}

/// Indices of `pending` in arbitration order; `migrating(uid)` counts the migrations in
/// flight (passed arbitration or Running) of the pods of batch Job `uid`.
pub fn order(pending: &[Pending], migrating: &dyn Fn(&str) -> usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..pending.len()).collect();
    idx.sort_by_key(|&k| std::cmp::Reverse(created_s(pending[k].job)));
    idx.sort_by(|&a, &b| match (pending[a].pod, pending[b].pod) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) => compare(x, y, None),
    });
    let mut first: HashMap<&str, usize> = HashMap::new();
    let rank: Vec<usize> = idx
        .iter()
        .enumerate()
        .map(|(pos, &k)| match job_owner(pending[k].pod) {
            Some(o) => *first.entry(o).or_insert(pos),
            None => pos,
        })
        .collect();
    let mut by_rank: Vec<(usize, usize)> = rank.into_iter().zip(idx).collect();
    by_rank.sort_by_key(|(r, _)| *r);
    let mut idx: Vec<usize> = by_rank.into_iter().map(|(_, k)| k).collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    idx.sort_by_key(|&k| {
        let n = job_owner(pending[k].pod)
            .map_or(0, |o| *counts.entry(o).or_insert_with(|| migrating(o)));
        std::cmp::Reverse(n)
    });
    idx
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(name: &str, created: &str) -> PodMigrationJob {
        serde_json::from_value(
            json!({"metadata": {"name": name, "creationTimestamp": created},
            "spec": {"podRef": {"namespace": "d", "name": name}}}),
        )
        .unwrap()
    }

    fn pod(name: &str, priority: i32, owner: Option<(&str, &str)>) -> PodView {
        let refs: Vec<serde_json::Value> = owner
            .map(|(kind, uid)| json!({"apiVersion": "batch/v1", "kind": kind, "name": uid, "uid": uid, "controller": true}))
            .into_iter()
            .collect();
        PodView::json(
            json!({"metadata": {"name": name, "namespace": "d", "ownerReferences": refs},
            "spec": {"priority": priority, "containers": []}}),
        )
    }

    fn names(pending: &[Pending], order: &[usize]) -> Vec<String> {
        order
            .iter()
            .map(|&k| pending[k].job.metadata.name.clone().unwrap())
            .collect()
    }

    #[test]
    fn newest_first_then_the_pod_to_give_up_first() {
        let (a, b, c) = (
            job("a", "2026-01-01T00:00:00Z"),
            job("b", "2026-01-01T00:01:00Z"),
            job("c", "2026-01-01T00:01:00Z"),
        );
        let (pa, pb, pc) = (pod("a", 10, None), pod("b", 30, None), pod("c", 20, None));
        let pending = [
            Pending {
                job: &a,
                pod: Some(&pa),
            },
            Pending {
                job: &b,
                pod: Some(&pb),
            },
            Pending {
                job: &c,
                pod: Some(&pc),
            },
        ];
        // By pod priority, lowest first; the creation order only breaks ties.
        assert_eq!(names(&pending, &order(&pending, &|_| 0)), ["a", "c", "b"]);
        let gone = job("gone", "2025-01-01T00:00:00Z");
        let with_gone = [
            Pending {
                job: &b,
                pod: Some(&pb),
            },
            Pending {
                job: &gone,
                pod: None,
            },
        ];
        assert_eq!(
            names(&with_gone, &order(&with_gone, &|_| 0)),
            ["gone", "b"],
            "no pod: first"
        );
    }

    #[test]
    fn jobs_of_one_batch_job_stay_together_and_busier_batches_go_first() {
        let t = "2026-01-01T00:00:00Z";
        let (j1, j2, j3, j4) = (job("j1", t), job("j2", t), job("j3", t), job("j4", t));
        let p1 = pod("j1", 1, Some(("Job", "x")));
        let p2 = pod("j2", 2, Some(("ReplicaSet", "rs")));
        let p3 = pod("j3", 3, Some(("Job", "x")));
        let p4 = pod("j4", 4, Some(("Job", "y")));
        let pending = [
            Pending {
                job: &j1,
                pod: Some(&p1),
            },
            Pending {
                job: &j2,
                pod: Some(&p2),
            },
            Pending {
                job: &j3,
                pod: Some(&p3),
            },
            Pending {
                job: &j4,
                pod: Some(&p4),
            },
        ];
        assert_eq!(
            names(&pending, &order(&pending, &|_| 0)),
            ["j1", "j3", "j2", "j4"]
        );
        let busy_y = |uid: &str| if uid == "y" { 2 } else { 0 };
        assert_eq!(
            names(&pending, &order(&pending, &busy_y)),
            ["j4", "j1", "j3", "j2"]
        );
    }
}
