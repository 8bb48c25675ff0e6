//! The eviction strategies (`pkg/koordlet/qosmanager/plugins/cpuevict/`, `memoryevict/`,
//! `util/evictor.go`): each round reads the metric store, decides, and evicts through the
//! one [`Evictor`] they share; the runner then cools down (20 s after a CPU eviction, 4 s
//! after a memory one).

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::context::{LAST, QosCtx, count, last_cpu, last_memory, now_ms};
use super::evict::{self, Evictor};
use super::runner::{Round, Strategy};
use super::suppress;
use crate::koordlet::informer::States;
use crate::koordlet::store::{MetricKind, SeriesKey};

/// BEMemoryEvict every second, 4 s of cool-down after an eviction (`pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict.go`).
pub struct MemoryEvict {
    pub client: kube::Client,
    pub evictor: Arc<Evictor>,
}

impl Strategy for MemoryEvict {
    fn name(&self) -> &'static str {
        "memoryevict"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let (node, pods) = last_memory(ctx, states);
            let evicted =
                evict::memory_pass(&self.client, &self.evictor, states, node, &pods).await;
            if !evicted.is_empty() {
                count(ctx, "memoryevict", "eviction".into(), evicted.len() as u64);
            }
            Round::cool_down_if(!evicted.is_empty(), 4)
        }
        .boxed()
    }
}

/// Averages of the BE CPU series over `[from, now]`; `None` when they cover less than
/// `min_span_ms`.
fn be_cpu(
    ctx: &QosCtx,
    from: i64,
    now: i64,
    min_span_ms: i64,
    last: bool,
) -> Option<super::cpuevict::BeCpu> {
    let get = |alloc: &str| {
        let a = ctx
            .store
            .aggregate(&SeriesKey::be_cpu(alloc), from, now)
            .ok()
            .flatten()?;
        (a.span_ms >= min_span_ms).then_some(if last { a.last } else { a.avg })
    };
    Some(super::cpuevict::BeCpu {
        usage: get("usage")?,
        request: get("request")?,
        limit: get("real-limit")?,
    })
}

/// BECPUEvict every second, 20 s of cool-down after an eviction (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`).
pub struct CpuEvict {
    pub client: kube::Client,
    pub evictor: Arc<Evictor>,
    pub collect_interval: Duration,
}

impl Strategy for CpuEvict {
    fn name(&self) -> &'static str {
        "cpuevict"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let s = suppress::strategy(states);
            let window =
                Duration::from_secs(s.cpu_evict_time_window_seconds.unwrap_or(0).max(0) as u64)
                    .max(self.collect_interval);
            let now = now_ms();
            let w_ms = window.as_millis() as i64;
            let avg = be_cpu(ctx, now - w_ms, now, w_ms / 3, false);
            let last = be_cpu(ctx, now - LAST, now, 0, true);
            let (_, pods) = last_cpu(ctx, states);
            let used = pods.into_iter().map(|(k, v)| (k, v as f64)).collect();
            let evicted =
                evict::cpu_pass(&self.client, &self.evictor, states, avg, last, &used).await;
            if !evicted.is_empty() {
                count(ctx, "cpuevict", "eviction".into(), evicted.len() as u64);
            }
            Round::cool_down_if(!evicted.is_empty(), 20)
        }
        .boxed()
    }
}

/// CPUEvict / MemoryEvict every second (opted-in pods, by node usage); cool-down 20 s
/// (CPU) or 4 s (memory) after an eviction.
pub struct UsageEvict {
    pub client: kube::Client,
    pub evictor: Arc<Evictor>,
    /// `CPUEvict` or `MemoryEvict`.
    pub feature: &'static str,
}

impl Strategy for UsageEvict {
    fn name(&self) -> &'static str {
        if self.feature == "CPUEvict" {
            "cpuevict"
        } else {
            "memoryevict"
        }
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let (feature, cpu) = (self.feature, self.feature == "CPUEvict");
            let capacity = states
                .node
                .as_ref()
                .and_then(|n| n.status.as_ref())
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get(if cpu { "cpu" } else { "memory" }))
                .map(|q| {
                    if cpu {
                        crate::api::quantity::q_milli(q)
                    } else {
                        crate::api::quantity::q_value(q)
                    }
                })
                .unwrap_or(0);
            let (node, pods) = if cpu {
                let s = suppress::strategy(states);
                let w = s.cpu_evict_time_window_seconds.unwrap_or(1).max(1) * 1000;
                let now = now_ms();
                let avg = ctx
                    .store
                    .aggregate(&SeriesKey::node(MetricKind::NodeCpuUsage), now - w, now)
                    .ok()
                    .flatten()
                    .filter(|a| a.span_ms >= w / 3)
                    .map(|a| (a.avg * 1000.0).round() as i64);
                (avg, last_cpu(ctx, states).1)
            } else {
                last_memory(ctx, states)
            };
            let (client, evictor) = (&self.client, &self.evictor);
            let evicted =
                evict::usage_pass(client, evictor, states, feature, capacity, node, &pods).await;
            if !evicted.is_empty() {
                count(ctx, feature, "eviction".into(), evicted.len() as u64);
            }
            Round::cool_down_if(!evicted.is_empty(), if cpu { 20 } else { 4 })
        }
        .boxed()
    }
}

/// CPUAllocatableEvict / MemoryAllocatableEvict every second; same cool-downs.
pub struct AllocatableEvict {
    pub client: kube::Client,
    pub evictor: Arc<Evictor>,
    pub cpu: bool,
}

impl Strategy for AllocatableEvict {
    fn name(&self) -> &'static str {
        if self.cpu {
            "cpuallocatableevict"
        } else {
            "memoryallocatableevict"
        }
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let (name, cool) = if self.cpu {
                ("CPUAllocatableEvict", 20)
            } else {
                ("MemoryAllocatableEvict", 4)
            };
            let evicted =
                evict::allocatable_pass(&self.client, &self.evictor, states, self.cpu).await;
            if !evicted.is_empty() {
                count(ctx, name, "eviction".into(), evicted.len() as u64);
            }
            Round::cool_down_if(!evicted.is_empty(), cool)
        }
        .boxed()
    }
}
