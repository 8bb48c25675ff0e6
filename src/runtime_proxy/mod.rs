//! koord-runtime-proxy: a CRI v1 server between the kubelet and containerd that calls the
//! runtime hook servers (the koordlet) around pod and container creation, start, stop and
//! resource updates, so QoS values are in place before a container's first instruction.
//!
//! Needs no cluster: it talks only to the kubelet, the runtime and the hook servers.

pub mod hooks;
pub mod merge;
pub mod service;
pub mod store;
#[cfg(test)]
mod wire_tests;

pub use crate::kernel::hookproto as proto;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kernel::RoleCtx;

/// Settings of the `runtimeProxy` section (Koordinator's koord-runtime-proxy flags).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// Where the kubelet reaches the proxy (`--koord-runtimeproxy-endpoint`).
    pub koord_runtimeproxy_endpoint: String,
    /// The runtime behind it (`--remote-runtime-service-endpoint`).
    pub remote_runtime_service_endpoint: String,
    /// Its image service (`--remote-image-service-endpoint`; the runtime's when empty).
    pub remote_image_service_endpoint: String,
    /// Pods with this label set to `runtimeHookServerVal` are never hooked.
    pub runtime_hook_server_key: String,
    pub runtime_hook_server_val: String,
    /// Hook server registrations (`*.json`).
    pub hook_server_dir: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            koord_runtimeproxy_endpoint: "/var/run/koord-runtimeproxy/runtimeproxy.sock".into(),
            remote_runtime_service_endpoint: "/var/run/containerd/containerd.sock".into(),
            remote_image_service_endpoint: String::new(),
            runtime_hook_server_key: "runtimeproxy.koordinator.sh/skip-hookserver".into(),
            runtime_hook_server_val: "true".into(),
            hook_server_dir: "/etc/runtime/hookserver.d".into(),
        }
    }
}

/// How long the backend may take to answer `Version` at start.
const BACKEND_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY_EVERY: Duration = Duration::from_secs(5);

/// Runs the role until the process drains.
pub async fn run(cfg: Config, ctx: RoleCtx, embedded: bool) -> anyhow::Result<()> {
    use k8s_cri::v1::image_service_server::ImageServiceServer;
    use k8s_cri::v1::runtime_service_server::RuntimeServiceServer;
    let cri = crate::kernel::cri::socket_path;
    let listen = cri(&cfg.koord_runtimeproxy_endpoint)?;
    let runtime = cri(&cfg.remote_runtime_service_endpoint)?;
    let image = match cfg.remote_image_service_endpoint.as_str() {
        "" => runtime.clone(),
        other => cri(other)?,
    };
    let runtime_ch = crate::kernel::cri::unix_channel(runtime.clone());
    let mut backend = k8s_cri::v1::runtime_service_client::RuntimeServiceClient::new(runtime_ch);
    // The role is up; it serves the kubelet's socket once the runtime answers (Koordinator's
    // proxy gives up for good instead). `--role=all` on a machine without containerd, or
    // `--embedded`, where koord's node runtime runs pods itself, keeps it idle.
    ctx.ready.set(true);
    let Some(version) = wait_for_runtime(&mut backend, &runtime, embedded, &ctx).await else {
        return Ok(());
    };
    let store_path = ctx.common.data_dir.join("runtime-proxy").join("store.json");
    if let Some(dir) = store_path.parent() {
        crate::os::files::private_dir(dir)?;
    }
    let proxy = service::Proxy {
        backend,
        hooks: Arc::new(hooks::Hooks::new(cfg.hook_server_dir.clone())),
        store: Arc::new(store::Store::open(Some(store_path))),
        skip: (
            cfg.runtime_hook_server_key.clone(),
            cfg.runtime_hook_server_val.clone(),
        ),
    };
    let images = service::Images {
        backend: k8s_cri::v1::image_service_client::ImageServiceClient::new(
            crate::kernel::cri::unix_channel(image),
        ),
    };
    let listener = bind(&listen)?;
    tracing::info!(
        endpoint = %listen.display(), runtime = %version.runtime_name,
        runtime_version = %version.runtime_version, hooks = %cfg.hook_server_dir.display(),
        "runtime proxy serving CRI v1"
    );
    let incoming = crate::kernel::listen::local_grpc_incoming(listener, "runtime-proxy");
    let shutdown = ctx.shutdown.clone();
    tonic::transport::Server::builder()
        .add_service(RuntimeServiceServer::new(proxy))
        .add_service(ImageServiceServer::new(images))
        .serve_with_incoming_shutdown(incoming, async move { shutdown.draining().await })
        .await?;
    let _ = std::fs::remove_file(&listen);
    Ok(())
}

/// Asks the runtime for its version every few seconds until it answers (`None` when the
/// process drains first).
async fn wait_for_runtime(
    backend: &mut k8s_cri::v1::runtime_service_client::RuntimeServiceClient<
        tonic::transport::Channel,
    >,
    runtime: &std::path::Path,
    embedded: bool,
    ctx: &RoleCtx,
) -> Option<k8s_cri::v1::VersionResponse> {
    let mut last_warned: Option<std::time::Instant> = None;
    loop {
        let asked = tokio::time::timeout(
            BACKEND_TIMEOUT,
            backend.version(k8s_cri::v1::VersionRequest::default()),
        );
        let why = tokio::select! {
            _ = ctx.shutdown.draining() => return None,
            r = asked => match r {
                Ok(Ok(v)) => return Some(v.into_inner()),
                Ok(Err(e)) => e.message().to_string(),
                Err(_) => format!("no answer to Version within {BACKEND_TIMEOUT:?}"),
            },
        };
        if last_warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            last_warned = Some(std::time::Instant::now());
            if embedded {
                tracing::info!(runtime = %runtime.display(), "runtime proxy idle: no CRI runtime here (--embedded pods run in koord's node runtime, which needs no proxy)");
            } else {
                tracing::warn!(runtime = %runtime.display(), error = %why, "runtime proxy idle: the runtime does not answer; the kubelet's CRI socket is served once it does (retrying every 5 s)");
            }
        }
        if !ctx.shutdown.sleep(RETRY_EVERY).await {
            return None;
        }
    }
}

/// Listens on a fresh socket only root can use (0600: whoever connects drives the
/// container runtime); a stale one is replaced.
fn bind(path: &std::path::Path) -> anyhow::Result<tokio::net::UnixListener> {
    crate::kernel::listen::bind_unix(path, 0o600)
        .map_err(|e| anyhow::anyhow!("listening on {}: {e}", path.display()))
}
