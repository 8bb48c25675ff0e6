//! koordlet: the node agent.
//!
//! Measures the node and its pods, reports NodeMetric, and enforces QoS for best-effort pods.

pub mod os;

use serde::{Deserialize, Serialize};

use crate::kernel::RoleCtx;

/// Settings of the `koordlet` section.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {}

/// Runs the role until the process drains.
pub async fn run(_cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    crate::kernel::hold_until_drained(&ctx).await
}
