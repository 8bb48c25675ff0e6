//! The koordlet's runtime hook server (proxy mode): Koordinator's RuntimeHookService on a
//! unix socket, registered for the runtime proxy as `koordlet.json` in its hook server
//! directory. It answers PreRunPodSandbox (GroupIdentity: the pod cgroup's bvt), and
//! PreCreateContainer / PreUpdateContainerResources (BatchResource and CPUSetAllocator
//! values, see `rules`), so a container has them before its first instruction. The QoS
//! loops keep re-applying the same values to running containers (the reconciler). The same
//! decisions answer the runtime's NRI events where the runtime has NRI (`nri`).

pub mod cpuset;
pub mod hami;
pub mod nri;
pub mod rdma;
pub mod request;
pub mod rules;
pub mod server;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Settings of `koordlet.runtimeHooks` (Koordinator's `--runtime-hooks-*` flags).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    pub enabled: bool,
    /// Where the hook server listens.
    pub socket: PathBuf,
    /// The socket as the runtime proxy reaches it (the host path, when the koordlet runs
    /// in a container with the host's /var/run/koordlet mounted elsewhere); the socket when
    /// empty.
    pub host_endpoint: String,
    /// The runtime proxy's hook server directory; `koordlet.json` is written there when the
    /// directory exists.
    pub hook_server_dir: PathBuf,
    /// `Ignore` or `Fail`, for the runtime proxy.
    pub failure_policy: String,
    /// Keep the CFS quota of pods pinned to CPUs (Koordinator's
    /// `--disable-unset-cpu-quota`; by default CPUSetAllocator lifts it).
    pub disable_unset_cpu_quota: bool,
    /// The koordlet as an NRI plugin of the runtime (beside the proxy mode's server).
    pub nri: nri::Config,
    /// HAMi-core's library on the node (`-hami-core-library-directory-path`).
    pub hami_core_library_path: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            socket: "/var/run/koordlet/koordlet.sock".into(),
            host_endpoint: String::new(),
            hook_server_dir: "/etc/runtime/hookserver.d".into(),
            failure_policy: "Ignore".into(),
            disable_unset_cpu_quota: false,
            nri: nri::Config::default(),
            hami_core_library_path: "/usr/local/vgpu/libvgpu.so".into(),
        }
    }
}

/// The hooks the koordlet serves, as registered.
pub const HOOKS: [&str; 3] = [
    "PreRunPodSandbox",
    "PreCreateContainer",
    "PreUpdateContainerResources",
];

/// Writes `koordlet.json` into the hook server directory, if there is one.
pub fn register(cfg: &Config) -> Option<PathBuf> {
    if !cfg.hook_server_dir.is_dir() {
        tracing::info!(dir = %cfg.hook_server_dir.display(), "no runtime proxy hook server directory; the koordlet's hooks are not registered");
        return None;
    }
    let endpoint = match cfg.host_endpoint.as_str() {
        "" => cfg.socket.display().to_string(),
        e => e.to_string(),
    };
    let file = cfg.hook_server_dir.join("koordlet.json");
    let body = serde_json::json!({
        "remote-endpoint": endpoint,
        "failure-policy": cfg.failure_policy,
        "runtime-hooks": HOOKS,
    });
    let written = crate::os::files::write_atomic(
        &file,
        body.to_string().as_bytes(),
        0o600,
        crate::os::files::Sync::Cached,
    );
    match written {
        Ok(()) => Some(file),
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "registering the koordlet's hooks failed");
            None
        }
    }
}
