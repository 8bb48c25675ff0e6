//! Drives one replay: the recording streamed through the engine (`replay.rs`), with the
//! descheduler's passes (`passes.rs`) and what-if (`whatif.rs`) around it.

use std::collections::HashSet;

use super::recording::Op;
use super::replay::{Engine, Options, Run, put};
use super::world::World;

/// Replays the recording at `file` under `opts`; then, given a template, what if.
pub fn replay(
    file: &std::path::Path,
    opts: &Options,
    add: Option<&super::whatif::Template>,
) -> anyhow::Result<Run> {
    let started = std::time::Instant::now();
    let (header, reader) = super::recording::open(file)?;
    let mut changes = super::decoded::Events::spawn(reader)?;
    let mut world = World::default();
    world.slo_override = opts.slo.clone();
    // The state once every kind was listed: the replay's start.
    let mut synced = HashSet::new();
    let mut now = 0;
    for c in changes.by_ref() {
        now = c.t;
        let last = c.op == Op::Synced && {
            synced.insert(c.kind.clone());
            synced.len() >= header.kinds.len()
        };
        put(&mut world, c);
        if last {
            break;
        }
    }
    let mut e = Engine::load(world, now, &header, opts)?;
    if synced.len() < header.kinds.len() {
        let w = "not every recorded kind was listed: the whole recording is the initial state";
        e.run.warnings.push(w.into());
    }
    let mut side = super::passes::Observer::spawn(opts.descheduler.as_deref(), &e)?;
    e.schedule();
    side.due(&mut e, true, true);
    let every = opts.sample_every_ms.max(1);
    let mut next_sample = now + every;
    for c in changes.by_ref() {
        if c.t > e.now {
            e.schedule();
            while next_sample <= c.t {
                e.now = next_sample;
                side.due(&mut e, true, false);
                next_sample += every;
            }
            side.passes_until(&mut e, c.t);
            e.now = c.t;
        }
        e.apply(c);
    }
    e.run.warnings.extend(std::mem::take(&mut changes.warnings));
    e.schedule();
    e.finish_gangs();
    side.last(&mut e);
    if let Some(t) = add {
        e.run.what_if = Some(super::whatif::run(&mut e, t));
    }
    let seen = e.seen_pods.len();
    let mut run = std::mem::take(&mut e.run);
    let observed = side.finish();
    // The state is large (every pod, node and the scheduler's cache): freed on the side
    // once the workers are done, while the caller reports.
    let free = std::thread::Builder::new().name("replay-free".into());
    let _ = free.spawn(move || drop(e));
    run.samples = observed.samples;
    run.evictions = observed.evictions;
    run.warnings.extend(observed.warnings);
    run.seconds = started.elapsed().as_secs_f64();
    run.pods = seen;
    Ok(run)
}
