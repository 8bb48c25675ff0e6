//! One runner for every QoS strategy, as the collectors have one registry: a strategy
//! says what one round does; the runner waits for the informer, ticks at the strategy's
//! interval on the koordlet's shared grid (`koordlet/grid.rs`), and rests for the cool-down a round asks for (after an eviction).

use std::time::Duration;

use futures::future::BoxFuture;

use super::context::QosCtx;
use crate::koordlet::informer::States;

/// What a round asks of the runner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Rest this long before the next round (Koordinator's cool-down after evicting).
    pub cool_down: Option<Duration>,
}

impl Round {
    pub const DONE: Round = Round { cool_down: None };

    /// A cool-down of `secs` when `acted`, else none.
    pub fn cool_down_if(acted: bool, secs: u64) -> Round {
        Round {
            cool_down: acted.then(|| Duration::from_secs(secs)),
        }
    }
}

pub trait Strategy: Send {
    /// The task name (`koordlet/qos/<name>`).
    fn name(&self) -> &'static str;

    /// Runs once, before the informer has synced; false: the strategy cannot work on this
    /// host and stops (it says why).
    fn prepare(&mut self) -> bool {
        true
    }

    fn interval(&self) -> Duration {
        Duration::from_secs(1)
    }

    /// One round over a snapshot of the node.
    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round>;
}

/// One row of the registry: the koordlet feature gate that switches a strategy on, and how
/// to build it from what the strategies share. Each strategy file declares its own.
pub struct Entry {
    pub gate: crate::kernel::features::Gate,
    pub build: fn(&super::context::Deps) -> Box<dyn Strategy>,
}

/// Runs `s` until the process drains.
pub async fn run(ctx: QosCtx, mut s: Box<dyn Strategy>) -> anyhow::Result<()> {
    if !s.prepare() || !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    loop {
        let at = crate::koordlet::grid::next(s.interval(), crate::koordlet::grid::QOS_OFFSET);
        if !ctx.shutdown.sleep_until(at).await {
            break;
        }
        let states = ctx.informer.snapshot();
        let round = s.tick(&ctx, &states).await;
        if let Some(d) = round.cool_down
            && !ctx.shutdown.sleep(d).await
        {
            break;
        }
    }
    Ok(())
}
