//! koord-descheduler: moves pods off overloaded nodes.
//!
//! Runs LowNodeLoad and the migration controller on PodMigrationJobs.

pub mod lownodeload;
pub mod sorter;

use serde::{Deserialize, Serialize};

use crate::kernel::RoleCtx;

/// Settings of the `descheduler` section.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {}

/// Runs the role until the process drains.
pub async fn run(_cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    crate::kernel::hold_until_drained(&ctx).await
}
