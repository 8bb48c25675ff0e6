//! The koordlet as an NRI plugin (Koordinator's `-enable-nri-runtime-hook`, on by
//! default): on a node whose runtime has NRI (containerd ≥ 1.7 with NRI enabled, CRI-O),
//! the hooks run with no runtime proxy. The plugin dials the runtime's socket, registers
//! (`RegisterPlugin`), answers `Configure` with the events it wants — RunPodSandbox,
//! RemovePodSandbox, CreateContainer, UpdateContainer, as Koordinator — and then each event
//! with the same decisions the proxy mode makes (`server::Hooks`). A lost connection is
//! re-dialled with Koordinator's exponential back-off.

pub mod convert;
pub mod plugin;
pub mod ttrpc;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kernel::Shutdown;

/// NRI's messages (`proto/nri/v1alpha1/api.proto`).
#[allow(clippy::all, clippy::pedantic)]
pub mod api {
    include!(concat!(env!("OUT_DIR"), "/nri.pkg.api.v1alpha1.rs"));
}

/// `koordlet.runtimeHooks.nri` (Koordinator's `-runtime-hooks-nri-*` flags).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// `-enable-nri-runtime-hook`.
    pub enabled: bool,
    /// The runtime's NRI socket; a relative path is under `koordlet.eviction.varRunRoot`
    /// (Koordinator's `-runtime-hooks-nri-socket-path`, `nri/nri.sock`).
    pub socket_path: PathBuf,
    pub plugin_name: String,
    /// Where the plugin runs among the runtime's plugins (two digits).
    pub plugin_index: String,
    /// How long the runtime has to configure the plugin once it registered.
    pub connect_timeout_millis: u64,
    pub backoff: Backoff,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            socket_path: "nri/nri.sock".into(),
            plugin_name: "koordlet_nri".into(),
            plugin_index: "00".into(),
            connect_timeout_millis: 6_000,
            backoff: Backoff::default(),
        }
    }
}

/// Re-dialling after a failed or lost connection (Koordinator's `wait.Backoff`: the first
/// wait, ×factor each time up to the cap, at most `steps` tries in a row).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Backoff {
    pub duration_millis: u64,
    pub factor: f64,
    /// No cap when absent (Koordinator's default).
    pub cap_seconds: Option<u64>,
    pub steps: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            duration_millis: 1_000,
            factor: 2.0,
            cap_seconds: None,
            steps: i32::MAX as u32,
        }
    }
}

impl Backoff {
    /// The wait before try `n` (0-based); `None` once the steps are spent.
    pub fn wait(&self, n: u32) -> Option<Duration> {
        if n >= self.steps {
            return None;
        }
        let ms = self.duration_millis as f64 * self.factor.max(1.0).powi(n.min(64) as i32);
        // A day bounds an uncapped wait (2^n overflows long before the steps run out).
        let cap = self.cap_seconds.unwrap_or(86_400).saturating_mul(1000) as f64;
        Some(Duration::from_millis(ms.min(cap) as u64))
    }
}

/// How often a missing runtime socket is looked for.
const SOCKET_POLL: Duration = Duration::from_secs(10);

/// Where the runtime's socket is: `socket_path` under `var_run` unless absolute.
pub fn socket(cfg: &Config, var_run: &Path) -> PathBuf {
    var_run.join(&cfg.socket_path)
}

/// Dials, serves and re-dials until the process drains.
pub async fn run(cfg: Config, socket: PathBuf, plugin: plugin::Plugin, shutdown: Shutdown) {
    let mut tries = 0u32;
    let mut told_missing = false;
    loop {
        if shutdown.is_draining() {
            return;
        }
        if socket.exists() {
            told_missing = false;
            match plugin::session(&cfg, &socket, &plugin, &shutdown).await {
                Ok(plugin::Ended::Drained) => return,
                Ok(plugin::Ended::Closed) => {
                    tries = 0;
                    tracing::warn!(socket = %socket.display(), "NRI: the runtime closed the connection; re-dialling");
                }
                Err(e) => {
                    tracing::warn!(socket = %socket.display(), error = %e, "NRI: connection failed")
                }
            }
        } else {
            if !told_missing {
                told_missing = true;
                tracing::info!(socket = %socket.display(), "NRI: no runtime socket (NRI off in the runtime, or the runtime not up); hooks run through the runtime proxy only until it appears");
            }
            // Watched at a steady pace: the back-off is for a runtime that refuses us, and
            // would leave a socket that appears an hour later unused for another hour.
            tokio::select! {
                _ = tokio::time::sleep(SOCKET_POLL) => continue,
                _ = shutdown.draining() => return,
            }
        }
        let Some(wait) = cfg.backoff.wait(tries) else {
            tracing::warn!(socket = %socket.display(), steps = cfg.backoff.steps, "NRI: back-off steps spent; NRI hooks stay off");
            return;
        };
        tries += 1;
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.draining() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_a_second_up_to_its_cap_and_stops_after_its_steps() {
        let b = Backoff::default();
        let secs: Vec<u64> = (0..4).map(|n| b.wait(n).unwrap().as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8]);
        assert_eq!(b.wait(60).unwrap(), Duration::from_secs(86_400));
        let capped = Backoff {
            cap_seconds: Some(5),
            steps: 3,
            ..Backoff::default()
        };
        assert_eq!(capped.wait(2).unwrap(), Duration::from_secs(4));
        assert!(capped.wait(3).is_none());
    }

    #[test]
    fn a_relative_socket_path_is_under_var_run() {
        let c = Config::default();
        assert_eq!(
            socket(&c, Path::new("/var/run")),
            Path::new("/var/run/nri/nri.sock")
        );
        let abs = Config {
            socket_path: "/run/nri.sock".into(),
            ..c
        };
        assert_eq!(
            socket(&abs, Path::new("/var/run")),
            Path::new("/run/nri.sock")
        );
    }
}
