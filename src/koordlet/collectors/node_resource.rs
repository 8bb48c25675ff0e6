//! Node CPU from `/proc/stat` (user+nice+system+irq+softirq ticks) and memory as
//! `MemTotal − MemAvailable`.

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Rates, Samples, Shared};
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::parse::memory_used;

pub struct NodeResource {
    interval: Duration,
    rates: Rates<()>,
}

impl NodeResource {
    pub fn new(interval: Duration, ttl: Duration) -> Self {
        NodeResource {
            interval,
            rates: Rates::new(ttl),
        }
    }
}

impl Collector for NodeResource {
    fn name(&self) -> &'static str {
        "nodeResource"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn collect(
        &mut self,
        env: &CollectEnv<'_>,
        shared: &mut Shared,
        out: &mut Samples,
    ) -> Result<(), CollectError> {
        let (total, _) = env.host.proc_stat()?;
        let memory = memory_used(&env.host.meminfo()?)? as f64;
        out.push((
            SeriesKey::node(MetricKind::NodeMemoryUsage),
            Point {
                ts: env.now_ms,
                value: memory,
            },
        ));
        shared.node_memory = Some(memory);
        if let Some(ticks_per_sec) = self.rates.per_second((), total.busy() as f64, env.mono_ns) {
            let cores = ticks_per_sec / env.clk_tck as f64;
            out.push((
                SeriesKey::node(MetricKind::NodeCpuUsage),
                Point {
                    ts: env.now_ms,
                    value: cores,
                },
            ));
            shared.node_cpu = Some(cores);
        }
        Ok(())
    }
}
