//! Hook servers, as Koordinator registers them: every `*.json` file in
//! `/etc/runtime/hookserver.d` is `{"remote-endpoint": "<unix socket>", "failure-policy":
//! "Fail"|"Ignore", "runtime-hooks": ["PreRunPodSandbox", …]}`. The directory is re-read
//! when a file's modification time changes (checked at most every few seconds). One hook
//! server is called per stage: the first file, in name order, that lists the hook.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;
use tonic::transport::Channel;

use super::proto::runtime_hook_service_client::RuntimeHookServiceClient;
use super::proto::{
    ContainerResourceHookRequest, ContainerResourceHookResponse, PodSandboxHookRequest,
    PodSandboxHookResponse,
};

/// Koordinator's hook points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookType {
    PreRunPodSandbox,
    PostStopPodSandbox,
    PreCreateContainer,
    PreStartContainer,
    PostStartContainer,
    PostStopContainer,
    PreUpdateContainerResources,
}

impl HookType {
    fn parse(s: &str) -> Option<HookType> {
        Some(match s {
            "PreRunPodSandbox" => HookType::PreRunPodSandbox,
            "PostStopPodSandbox" => HookType::PostStopPodSandbox,
            "PreCreateContainer" => HookType::PreCreateContainer,
            "PreStartContainer" => HookType::PreStartContainer,
            "PostStartContainer" => HookType::PostStartContainer,
            "PostStopContainer" => HookType::PostStopContainer,
            "PreUpdateContainerResources" => HookType::PreUpdateContainerResources,
            _ => return None,
        })
    }
}

#[derive(Debug, Deserialize)]
struct HookServerFile {
    #[serde(rename = "remote-endpoint")]
    remote_endpoint: String,
    #[serde(rename = "failure-policy", default)]
    failure_policy: String,
    #[serde(rename = "runtime-hooks", default)]
    runtime_hooks: Vec<String>,
}

#[derive(Clone)]
pub struct HookServer {
    pub endpoint: String,
    /// `failure-policy: Fail`: a failed hook fails the CRI call.
    pub fail: bool,
    hooks: Vec<HookType>,
    client: RuntimeHookServiceClient<Channel>,
}

/// Every hook call gives up after this long (Koordinator's client has no deadline; a hung
/// hook server must not hang pod creation forever).
const HOOK_TIMEOUT: Duration = Duration::from_secs(5);
const RESCAN_EVERY: Duration = Duration::from_secs(3);

pub struct Hooks {
    dir: PathBuf,
    state: Mutex<Scan>,
}

#[derive(Default)]
struct Scan {
    at: Option<Instant>,
    files: BTreeMap<PathBuf, (SystemTime, Option<HookServer>)>,
}

fn load(path: &Path) -> Option<HookServer> {
    let text = std::fs::read(path).ok()?;
    let f: HookServerFile = match serde_json::from_slice(&text) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "hook server file ignored");
            return None;
        }
    };
    let socket = crate::kernel::cri::socket_path(&f.remote_endpoint)
        .map_err(|e| tracing::warn!(file = %path.display(), error = %e, "hook server file ignored"))
        .ok()?;
    let hooks = f
        .runtime_hooks
        .iter()
        .filter_map(|h| {
            let t = HookType::parse(h);
            if t.is_none() {
                tracing::warn!(file = %path.display(), hook = %h, "unknown runtime hook ignored");
            }
            t
        })
        .collect();
    Some(HookServer {
        endpoint: f.remote_endpoint,
        fail: f.failure_policy == "Fail",
        hooks,
        client: RuntimeHookServiceClient::new(crate::kernel::cri::unix_channel(socket)),
    })
}

impl Hooks {
    pub fn new(dir: PathBuf) -> Hooks {
        Hooks {
            dir,
            state: Mutex::new(Scan::default()),
        }
    }

    /// The server to call for `hook`, after re-reading changed files if due.
    pub fn server_for(&self, hook: HookType) -> Option<HookServer> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.at.is_none_or(|at| at.elapsed() >= RESCAN_EVERY) {
            s.at = Some(Instant::now());
            self.rescan(&mut s);
        }
        s.files
            .values()
            .filter_map(|(_, h)| h.as_ref())
            .find(|h| h.hooks.contains(&hook))
            .cloned()
    }

    fn rescan(&self, s: &mut Scan) {
        let mut seen = BTreeMap::new();
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(meta) = e.metadata() else { continue };
            if !meta.is_file() || !p.to_string_lossy().ends_with("json") {
                continue;
            }
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let entry = match s.files.remove(&p) {
                Some((t, h)) if t == mtime => (t, h),
                _ => (mtime, load(&p)),
            };
            seen.insert(p, entry);
        }
        s.files = seen;
    }
}

/// What a failed hook means for the CRI call.
#[derive(Debug)]
pub struct HookFailed(pub String);

async fn timed<T>(
    server: &HookServer,
    f: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<Option<T>, HookFailed> {
    let outcome = match tokio::time::timeout(HOOK_TIMEOUT, f).await {
        Ok(Ok(r)) => return Ok(Some(r.into_inner())),
        Ok(Err(s)) => s.message().to_string(),
        Err(_) => format!("no answer within {HOOK_TIMEOUT:?}"),
    };
    tracing::warn!(endpoint = %server.endpoint, error = %outcome, fail = server.fail, "runtime hook failed");
    if server.fail {
        Err(HookFailed(format!("hook server err: {outcome}")))
    } else {
        Ok(None)
    }
}

impl Hooks {
    pub async fn pod(
        &self,
        hook: HookType,
        req: PodSandboxHookRequest,
    ) -> Result<Option<PodSandboxHookResponse>, HookFailed> {
        let Some(server) = self.server_for(hook) else {
            return Ok(None);
        };
        let mut c = server.client.clone();
        match hook {
            HookType::PreRunPodSandbox => timed(&server, c.pre_run_pod_sandbox_hook(req)).await,
            HookType::PostStopPodSandbox => timed(&server, c.post_stop_pod_sandbox_hook(req)).await,
            _ => Ok(None),
        }
    }

    pub async fn container(
        &self,
        hook: HookType,
        req: ContainerResourceHookRequest,
    ) -> Result<Option<ContainerResourceHookResponse>, HookFailed> {
        let Some(server) = self.server_for(hook) else {
            return Ok(None);
        };
        let mut c = server.client.clone();
        let call = async {
            match hook {
                HookType::PreCreateContainer => c.pre_create_container_hook(req).await,
                HookType::PreStartContainer => c.pre_start_container_hook(req).await,
                HookType::PostStartContainer => c.post_start_container_hook(req).await,
                HookType::PostStopContainer => c.post_stop_container_hook(req).await,
                _ => c.pre_update_container_resources_hook(req).await,
            }
        };
        timed(&server, call).await
    }
}
