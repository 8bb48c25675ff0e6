//! koord-runtime-proxy: a CRI proxy between kubelet and containerd that calls runtime hooks.
//!
//! Needs no cluster: it talks only to the kubelet, the runtime and the hook servers.

use serde::{Deserialize, Serialize};

use crate::kernel::RoleCtx;

/// Settings of the `runtime_proxy` section.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {}

/// Runs the role until the process drains.
pub async fn run(_cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    crate::kernel::hold_until_drained(&ctx).await
}
