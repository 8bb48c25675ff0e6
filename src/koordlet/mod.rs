//! koordlet: the node agent. It measures (host metrics through the rooted host layer, a
//! sled time-series store, the NodeMetric reporter, peak prediction: `measure.rs`) and
//! enforces (the QoS strategies: `qos/`). `run` wires them together.

pub mod access;
pub mod advisor;
pub mod audit;
pub mod collectors;
mod config;
pub mod configz;
pub mod devices;
pub mod features;
pub mod gpu_health;
mod grid;
pub mod informer;
pub mod kubelet_access;
pub mod kubeletconfig;
mod measure;
pub mod metrics;
pub mod pleg;
pub mod podresources;
pub mod prediction;
pub mod qos;
pub mod reporter;
pub mod runtimehooks;
pub mod store;
pub mod topology;
mod topology_merge;
mod upsert;
pub mod usage_series;
mod wiring;

use crate::kernel::RoleCtx;

pub use config::{Config, EvictionConfig, ReporterConfig, StoreConfig, validate};
pub use kubelet_access::KubeletConfig;

/// Runs the koordlet until the process drains.
pub async fn run(cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    let Some(client) = wiring::settle(&ctx).await? else {
        return Ok(());
    };
    let parts = wiring::Parts::open(&cfg, &ctx, client)?;
    parts.spawn_reporters(&cfg, &ctx);
    parts.spawn_loops(cfg, &ctx)?;
    ctx.ready.set(true);
    ctx.shutdown.draining().await;
    Ok(())
}
