//! koord-descheduler: moves pods off overloaded nodes.
//!
//! Every `deschedulingInterval` the leader of the `koord-descheduler` Lease runs one pass
//! of its profiles (LowNodeLoad and the upstream plugins) and turns the evictions into
//! PodMigrationJobs, which the migration controller carries out. `dryRun` logs the
//! decisions and writes nothing.

pub mod access;
pub mod cache;
pub mod config;
pub mod configfile;
pub mod framework;
pub mod live;
pub mod lownodeload;
pub mod migration;
pub mod plugins;
pub mod sorter;
#[cfg(test)]
pub(crate) mod testkit;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::kernel::RoleCtx;
use crate::kernel::lease::LeaseConfig;

/// Settings of the `descheduler` section.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// A DeschedulerConfiguration (Koordinator's `koord-descheduler-config` content); unset:
    /// the built-in `config/koord-descheduler-config.yaml`.
    pub config_file: Option<PathBuf>,
    pub leader_election: LeaseConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            config_file: None,
            leader_election: LeaseConfig::named("koord-descheduler"),
        }
    }
}

/// Problems as (key under `descheduler`, message).
pub fn validate(cfg: &Config, strict: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Err(e) = cfg.leader_election.validate() {
        out.push(("leaderElection".into(), e));
    }
    match load(cfg) {
        Err(e) => out.push(("configFile".into(), e.to_string())),
        Ok(d) if strict => {
            for e in crate::kernel::compat::errors(&unsupported(&d)) {
                out.push(("configFile".into(), e));
            }
        }
        Ok(_) => {}
    }
    out
}

/// Descheduler plugins the configuration enables that koord does not run yet.
pub fn unsupported(d: &config::DeschedulerConfig) -> Vec<crate::kernel::compat::Unsupported> {
    d.unsupported
        .iter()
        .map(|p| {
            crate::kernel::compat::Unsupported::new("plugin", p.clone(), config::why_unsupported(p))
        })
        .collect()
}

/// The descheduler configuration this role runs with.
pub fn load(cfg: &Config) -> Result<config::DeschedulerConfig, crate::api::field::FieldError> {
    configfile::load(cfg.config_file.as_deref())
}

/// Runs the role until the process drains.
pub async fn run(cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    live::run(cfg, ctx).await
}
