//! The descheduler's passes over a replay, dry run: one at the start, then every
//! `deschedulingInterval` of virtual time (at most [`MAX_PASSES`]), and one at the end,
//! with the same plugins (their anomaly detectors carry over from pass to pass, as live).

use std::path::Path;

use super::replay::Engine;
use crate::descheduler::framework::Plugins;

/// Passes one replay runs at most (a long recording under a short interval).
pub const MAX_PASSES: usize = 1000;

pub struct Descheduler {
    plugins: Plugins,
    every_ms: u64,
    next: u64,
    passes: usize,
}

impl Descheduler {
    pub fn new(
        config: Option<&Path>,
        e: &Engine,
    ) -> Result<Descheduler, crate::api::field::FieldError> {
        let cfg = crate::descheduler::configfile::load(config)?;
        let every_ms = (cfg.interval.as_millis() as u64).max(1);
        let plugins = Plugins::build(&cfg, every_ms)?;
        Ok(Descheduler {
            plugins,
            every_ms,
            next: e.now + every_ms,
            passes: 0,
        })
    }

    /// The passes due before virtual time `t`.
    pub fn until(&mut self, e: &mut Engine, t: u64) {
        while self.next <= t && self.passes < MAX_PASSES {
            let now = e.now;
            e.now = self.next;
            self.pass(e);
            e.now = now.max(self.next);
            self.next += self.every_ms;
        }
    }

    /// One pass on the replay's state now; its evictions recorded with the time.
    pub fn pass(&mut self, e: &mut Engine) {
        self.passes += 1;
        let snap = e.world.snapshot();
        let world = match crate::explain::deschedule::world(snap) {
            Ok(w) => w,
            Err(err) => {
                e.run
                    .warnings
                    .push(format!("descheduling pass skipped: {err}"));
                return;
            }
        };
        let report = self.plugins.run(&world, e.t0_ms + e.now as i64);
        let json = report.to_json();
        for mut ev in json["evictions"].as_array().cloned().unwrap_or_default() {
            ev["t"] = serde_json::json!(e.now);
            e.run.evictions.push(ev);
        }
    }
}
