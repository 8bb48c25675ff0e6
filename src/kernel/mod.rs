//! Shared by every role; imports no role. Shutdown, tracked tasks, readiness, metrics,
//! the admin HTTP endpoint, telemetry and cluster access.

pub mod access;
pub mod admin;
pub mod bus;
pub mod cluster;
pub mod common;
pub mod compat;
pub mod cri;
pub mod entry;
pub mod events;
pub mod exposition;
pub mod fault;
pub mod features;
pub mod hookproto;
pub mod host;
pub mod http;
pub mod http_client;
pub mod index;
pub mod lease;
pub mod listen;
pub mod metric_docs;
pub mod metrics;
pub mod process_metrics;
pub mod pump;
pub mod readiness;
pub mod rest_metrics;
pub mod role;
pub mod shutdown;
pub mod tasks;
pub mod telemetry;
pub mod tls;
pub mod watch;

use std::sync::Arc;

pub use cluster::Cluster;

pub use metrics::Metrics;
pub use readiness::{Readiness, ReadyHandle};
pub use role::Role;
pub use shutdown::Shutdown;
pub use tasks::Tasks;

use common::CommonConfig;

/// Everything a role gets from the process: it runs until `shutdown` starts draining.
#[derive(Clone)]
pub struct RoleCtx {
    pub role: Role,
    pub shutdown: Shutdown,
    pub tasks: Tasks,
    pub ready: ReadyHandle,
    pub metrics: Metrics,
    pub cluster: Option<Cluster>,
    pub common: Arc<CommonConfig>,
}

impl RoleCtx {
    /// The cluster client; roles that need one are only started when it exists.
    pub fn cluster(&self) -> anyhow::Result<&Cluster> {
        self.cluster
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("role {} needs a Kubernetes cluster", self.role))
    }

    /// Warns about (and counts) what this role's configuration asks for that koord does
    /// not implement; strict configurations were refused before any role started.
    pub fn report_unsupported(&self, items: &[compat::Unsupported]) {
        compat::report(&self.metrics, &self.role.to_string(), items);
    }
}

/// The baseline life of a role: wait until its cluster answers (when it needs one), report
/// ready, and hold until the process drains. Roles build on it as they grow.
pub async fn hold_until_drained(ctx: &RoleCtx) -> anyhow::Result<()> {
    if ctx.role.needs_cluster() {
        let cluster = ctx.cluster()?;
        if !cluster::wait_reachable(&cluster.client, &ctx.shutdown).await {
            return Ok(());
        }
        tracing::info!(source = %cluster.source, "connected to the API server");
    }
    ctx.ready.set(true);
    ctx.shutdown.draining().await;
    Ok(())
}
