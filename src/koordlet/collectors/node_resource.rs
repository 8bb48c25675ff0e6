//! Node CPU from `/proc/stat` (user+nice+system+irq+softirq ticks) and memory as
//! `MemTotal − MemAvailable`; per NUMA node, the CPU of its CPUs' `/proc/stat` lines and
//! memory from its `meminfo`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Rates, Samples, Shared};
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::parse::CpuTicks;

pub struct NodeResource {
    interval: Duration,
    /// Keyed by NUMA node; `None` for the whole node.
    rates: Rates<Option<u32>>,
    /// CPU → NUMA node, re-read every minute (Koordinator's node CPU info interval).
    numa_of: BTreeMap<usize, u32>,
    numa_read_ns: Option<u64>,
}

const CPU_INFO_EVERY_NS: u64 = 60_000_000_000;

impl NodeResource {
    pub fn new(interval: Duration, ttl: Duration) -> Self {
        NodeResource {
            interval,
            rates: Rates::new(ttl),
            numa_of: BTreeMap::new(),
            numa_read_ns: None,
        }
    }

    fn numa(
        &mut self,
        env: &CollectEnv<'_>,
        per_cpu: &[(usize, CpuTicks)],
        shared: &mut Shared,
        out: &mut Samples,
    ) {
        if self
            .numa_read_ns
            .is_none_or(|t| env.mono_ns.saturating_sub(t) >= CPU_INFO_EVERY_NS)
        {
            self.numa_of = env
                .host
                .cpu_topology()
                .map(|t| t.iter().map(|c| (c.id as usize, c.numa)).collect())
                .unwrap_or_default();
            self.numa_read_ns = Some(env.mono_ns);
        }
        let mut busy: BTreeMap<u32, f64> = BTreeMap::new();
        for (cpu, ticks) in per_cpu {
            if let Some(n) = self.numa_of.get(cpu) {
                *busy.entry(*n).or_default() += ticks.busy() as f64;
            }
        }
        let point = |value| Point {
            ts: env.now_ms,
            value,
        };
        for (n, b) in busy {
            if let Some(t) = self.rates.per_second(&Some(n), b, env.mono_ns) {
                let cores = t / env.clk_tck as f64;
                shared.node_numa_cpu.insert(n, cores);
                out.push((
                    SeriesKey::numa(MetricKind::NodeNumaCpuUsage, n),
                    point(cores),
                ));
            }
        }
        for (n, used) in env.host.numa_mem_used() {
            shared.node_numa_memory.insert(n, used as f64);
            out.push((
                SeriesKey::numa(MetricKind::NodeNumaMemoryUsage, n),
                point(used as f64),
            ));
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
        let (total, per_cpu) = env.host.proc_stat()?;
        self.numa(env, &per_cpu, shared, out);
        let memory = env.host.memory_used()? as f64;
        out.push((
            SeriesKey::node(MetricKind::NodeMemoryUsage),
            Point {
                ts: env.now_ms,
                value: memory,
            },
        ));
        shared.node_memory = Some(memory);
        if crate::koordlet::reporter::with_page_cache(env.states.node_metric.as_deref()) {
            out.push((
                SeriesKey::node(MetricKind::NodeMemoryWithPageCache),
                Point {
                    ts: env.now_ms,
                    value: env.host.memory_used_with_cache()? as f64,
                },
            ));
        }
        if let Some(ticks_per_sec) = self
            .rates
            .per_second(&None, total.busy() as f64, env.mono_ns)
        {
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
