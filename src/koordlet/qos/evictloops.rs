//! The eviction strategies as periodic loops (`pkg/koordlet/qosmanager/plugins/cpuevict/`, `memoryevict/`, `util/evictor.go`): each round reads
//! the metric store, decides, and evicts through the one [`Evictor`] they share, then
//! cools down (20 s after a CPU eviction, 4 s after a memory one).

use std::sync::Arc;
use std::time::Duration;

use super::evict::{self, Evictor};
use super::loops::{LAST, QosCtx, count, last_samples, now_ms, pause};
use super::suppress;
use crate::koordlet::store::{MetricKind, SeriesKey};

/// BEMemoryEvict every second, 4 s of cool-down after an eviction (`pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict.go`).
pub async fn memoryevict(
    ctx: QosCtx,
    client: kube::Client,
    evictor: Arc<Evictor>,
) -> anyhow::Result<()> {
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        let (node, pods) = last_samples(
            &ctx,
            &states,
            MetricKind::NodeMemoryUsage,
            MetricKind::PodMemoryUsage,
            1.0,
        );
        let evicted = evict::memory_pass(&client, &evictor, &states, node, &pods).await;
        if !evicted.is_empty() {
            count(&ctx, "memoryevict", "eviction".into(), evicted.len() as u64);
            if !pause(&ctx.shutdown, Duration::from_secs(4)).await {
                break;
            }
        }
    }
    Ok(())
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
pub async fn cpuevict(
    ctx: QosCtx,
    client: kube::Client,
    evictor: Arc<Evictor>,
    collect_interval: Duration,
) -> anyhow::Result<()> {
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        let s = suppress::strategy(&states);
        let window =
            Duration::from_secs(s.cpu_evict_time_window_seconds.unwrap_or(0).max(0) as u64)
                .max(collect_interval);
        let now = now_ms();
        let w_ms = window.as_millis() as i64;
        let avg = be_cpu(&ctx, now - w_ms, now, w_ms / 3, false);
        let last = be_cpu(&ctx, now - LAST, now, 0, true);
        let (_, pods) = last_samples(
            &ctx,
            &states,
            MetricKind::NodeCpuUsage,
            MetricKind::PodCpuUsage,
            1000.0,
        );
        let used = pods.into_iter().map(|(k, v)| (k, v as f64)).collect();
        let evicted = evict::cpu_pass(&client, &evictor, &states, avg, last, &used).await;
        if !evicted.is_empty() {
            count(&ctx, "cpuevict", "eviction".into(), evicted.len() as u64);
            if !pause(&ctx.shutdown, Duration::from_secs(20)).await {
                break;
            }
        }
    }
    Ok(())
}

/// CPUEvict / MemoryEvict every second (opted-in pods, by node usage); cool-down 20 s
/// (CPU) or 4 s (memory) after an eviction.
pub async fn usage_evict(
    ctx: QosCtx,
    client: kube::Client,
    evictor: Arc<Evictor>,
    feature: &'static str,
) -> anyhow::Result<()> {
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    let cpu = feature == "CPUEvict";
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
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
            let s = suppress::strategy(&states);
            let w = s.cpu_evict_time_window_seconds.unwrap_or(1).max(1) * 1000;
            let now = now_ms();
            let avg = ctx
                .store
                .aggregate(&SeriesKey::node(MetricKind::NodeCpuUsage), now - w, now)
                .ok()
                .flatten()
                .filter(|a| a.span_ms >= w / 3)
                .map(|a| (a.avg * 1000.0).round() as i64);
            (
                avg,
                last_samples(
                    &ctx,
                    &states,
                    MetricKind::NodeCpuUsage,
                    MetricKind::PodCpuUsage,
                    1000.0,
                )
                .1,
            )
        } else {
            last_samples(
                &ctx,
                &states,
                MetricKind::NodeMemoryUsage,
                MetricKind::PodMemoryUsage,
                1.0,
            )
        };
        let evicted =
            evict::usage_pass(&client, &evictor, &states, feature, capacity, node, &pods).await;
        if !evicted.is_empty() {
            count(&ctx, feature, "eviction".into(), evicted.len() as u64);
            if !pause(&ctx.shutdown, Duration::from_secs(if cpu { 20 } else { 4 })).await {
                break;
            }
        }
    }
    Ok(())
}

/// CPUAllocatableEvict / MemoryAllocatableEvict every second; same cool-downs.
pub async fn allocatable_evict(
    ctx: QosCtx,
    client: kube::Client,
    evictor: Arc<Evictor>,
    cpu: bool,
) -> anyhow::Result<()> {
    if !ctx.informer.wait_synced(&ctx.shutdown).await {
        return Ok(());
    }
    let (name, cool) = if cpu {
        ("CPUAllocatableEvict", 20)
    } else {
        ("MemoryAllocatableEvict", 4)
    };
    while pause(&ctx.shutdown, Duration::from_secs(1)).await {
        let states = ctx.informer.snapshot();
        let evicted = evict::allocatable_pass(&client, &evictor, &states, cpu).await;
        if !evicted.is_empty() {
            count(&ctx, name, "eviction".into(), evicted.len() as u64);
            if !pause(&ctx.shutdown, Duration::from_secs(cool)).await {
                break;
            }
        }
    }
    Ok(())
}
