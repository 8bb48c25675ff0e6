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
        }
        self.metrics
            .attempt(profile, outcome, started.elapsed().as_secs_f64());
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
}
