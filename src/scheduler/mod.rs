//! koord-scheduler: a complete scheduler with Koordinator's plugins.
//!
//! Schedules pods whose schedulerName is one of its profiles and binds them through pods/binding.

use serde::{Deserialize, Serialize};

use crate::kernel::RoleCtx;

/// Settings of the `scheduler` section.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {}

/// Runs the role until the process drains.
pub async fn run(_cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    crate::kernel::hold_until_drained(&ctx).await
}
