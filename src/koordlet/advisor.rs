//! The metrics advisor: runs the collectors in order, each at its interval, and reports
//! which failed or disabled themselves.

use super::collectors::{CollectEnv, Collector, Samples, Shared};
use super::informer::States;
use crate::os::Cgroups;
use crate::os::system::{Host, clock_ticks};

/// Runs collectors slightly early rather than skip a tick to timer jitter.
const JITTER_NS: u64 = 50_000_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub collector: &'static str,
    pub error: Option<String>,
    pub disabled: Option<String>,
}

pub struct Advisor {
    collectors: Vec<(Box<dyn Collector>, Option<u64>)>,
    host: Host,
    cgroups: Cgroups,
    clk_tck: u64,
    /// The last pass's sample count: the next pass's vector is sized once, not grown
    /// through a string of reallocations.
    last_len: usize,
}

impl Advisor {
    pub fn new(collectors: Vec<Box<dyn Collector>>, host: Host, cgroups: Cgroups) -> Self {
        Advisor {
            collectors: collectors.into_iter().map(|c| (c, None)).collect(),
            host,
            cgroups,
            clk_tck: clock_ticks(),
            last_len: 0,
        }
    }

    pub fn with_clock_ticks(mut self, clk_tck: u64) -> Self {
        self.clk_tck = clk_tck;
        self
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.collectors.iter().map(|(c, _)| c.name()).collect()
    }

    /// One pass at wall time `now_ms` and monotonic time `mono_ns`.
    pub fn pass(&mut self, states: &States, now_ms: i64, mono_ns: u64) -> (Samples, Vec<Outcome>) {
        let env = CollectEnv {
            host: &self.host,
            cgroups: &self.cgroups,
            states,
            now_ms,
            mono_ns,
            clk_tck: self.clk_tck,
        };
        let mut shared = Shared::default();
        let mut out = Samples::with_capacity(self.last_len + self.last_len / 8);
        let mut outcomes = Vec::new();
        for (c, last) in &mut self.collectors {
            let due = last.is_none_or(|t| {
                mono_ns.saturating_sub(t) + JITTER_NS >= c.interval().as_nanos() as u64
            });
            if !due {
                continue;
            }
            *last = Some(mono_ns);
            let error = c.collect(&env, &mut shared, &mut out).err().map(|e| e.0);
            outcomes.push(Outcome {
                collector: c.name(),
                error,
                disabled: c.disabled().map(str::to_string),
            });
        }
        self.last_len = out.len();
        (out, outcomes)
    }
}
