//! One NRI connection: register, be configured, answer the runtime's calls.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use prost::Message as _;
use tokio::net::UnixStream;

use super::ttrpc::{self, Frame, Request, Status, WireError};
use super::{Config, api, convert};
use crate::kernel::Shutdown;
use crate::koordlet::runtimehooks::server::Hooks;

const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";
const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";
/// Koordinator's subscription (`pkg/koordlet/runtimehooks/nri/server.go`).
pub const EVENTS: &str = "RunPodSandbox,RemovePodSandbox,CreateContainer,UpdateContainer";

/// How a session ended without an error.
#[derive(Debug, PartialEq)]
pub enum Ended {
    /// The koordlet is shutting down.
    Drained,
    /// The runtime closed the connection or asked the plugin to shut down.
    Closed,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("dialling {socket}: {err}")]
    Dial { socket: String, err: std::io::Error },
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("the runtime refused RegisterPlugin: {0}")]
    Refused(String),
    #[error("the runtime did not configure the plugin within {0:?}")]
    NotConfigured(Duration),
    #[error("the runtime closed the connection before configuring the plugin")]
    ClosedEarly,
}

/// NRI's `ParseEventMask`: names (any case, comma-separated), `all`, `pod`, `container`.
pub fn event_mask(events: &[String]) -> Result<i32, String> {
    let bits = [
        ("runpodsandbox", api::Event::RunPodSandbox),
        ("updatepodsandbox", api::Event::UpdatePodSandbox),
        ("postupdatepodsandbox", api::Event::PostUpdatePodSandbox),
        ("stoppodsandbox", api::Event::StopPodSandbox),
        ("removepodsandbox", api::Event::RemovePodSandbox),
        ("createcontainer", api::Event::CreateContainer),
        ("postcreatecontainer", api::Event::PostCreateContainer),
        ("startcontainer", api::Event::StartContainer),
        ("poststartcontainer", api::Event::PostStartContainer),
        ("updatecontainer", api::Event::UpdateContainer),
        ("postupdatecontainer", api::Event::PostUpdateContainer),
        ("stopcontainer", api::Event::StopContainer),
        ("removecontainer", api::Event::RemoveContainer),
        (
            "validatecontaineradjustment",
            api::Event::ValidateContainerAdjustment,
        ),
    ];
    let bit = |e: api::Event| 1i32 << (e as i32 - 1);
    let mut mask = 0;
    for name in events.iter().flat_map(|e| e.split(',')) {
        let name = name.trim().to_ascii_lowercase();
        let group = |part: &str| {
            bits.iter()
                .filter(|(n, _)| n.contains(part))
                .fold(0, |m, (_, e)| m | bit(*e))
        };
        match name.as_str() {
            "all" => mask |= (1 << (api::Event::Last as i32 - 1)) - 1,
            "pod" | "podsandbox" => mask |= group("pod"),
            "container" => mask |= group("container"),
            n => match bits.iter().find(|(b, _)| *b == n) {
                Some((_, e)) => mask |= bit(*e),
                None => return Err(format!("unknown event {n:?}")),
            },
        }
    }
    Ok(mask)
}

/// The plugin configuration a runtime may pass (`events:` as Koordinator reads it).
#[derive(Debug, Default, serde::Deserialize)]
struct PluginConfig {
    #[serde(default)]
    events: Vec<String>,
}

/// Answers the runtime's calls with the hooks' decisions.
pub struct Plugin {
    pub hooks: Arc<Hooks>,
    /// `Fail`: a hook error fails the runtime's call; `Ignore` (default): logged.
    pub fail: bool,
}

fn bad(e: WireError) -> Status {
    Status {
        code: ttrpc::CODE_INTERNAL,
        message: e.to_string(),
    }
}

impl Plugin {
    /// One call of the Plugin service: the encoded answer, or the status to fail it with.
    pub fn call(&self, service: &str, method: &str, payload: &[u8]) -> Result<Vec<u8>, Status> {
        if service != PLUGIN_SERVICE {
            return Err(unimplemented(service, method));
        }
        let out = match method {
            "Configure" => self.configure(payload)?.encode_to_vec(),
            "Synchronize" => {
                let req: api::SynchronizeRequest =
                    ttrpc::decode("SynchronizeRequest", payload).map_err(bad)?;
                api::SynchronizeResponse {
                    update: Vec::new(),
                    more: req.more,
                }
                .encode_to_vec()
            }
            "RunPodSandbox" => {
                let req: api::RunPodSandboxRequest =
                    ttrpc::decode("RunPodSandboxRequest", payload).map_err(bad)?;
                self.run_pod_sandbox(req.pod.as_ref());
                Vec::new()
            }
            "StateChange" => {
                let ev: api::StateChangeEvent =
                    ttrpc::decode("StateChangeEvent", payload).map_err(bad)?;
                if ev.event == api::Event::RunPodSandbox as i32 {
                    self.run_pod_sandbox(ev.pod.as_ref());
                }
                Vec::new()
            }
            "CreateContainer" => {
                let req: api::CreateContainerRequest =
                    ttrpc::decode("CreateContainerRequest", payload).map_err(bad)?;
                self.create_container(&req)?.encode_to_vec()
            }
            "UpdateContainer" => {
                let req: api::UpdateContainerRequest =
                    ttrpc::decode("UpdateContainerRequest", payload).map_err(bad)?;
                self.update_container(&req).encode_to_vec()
            }
            // Nothing of the koordlet's runs there; every answer is an empty message.
            "Shutdown"
            | "RemovePodSandbox"
            | "StopPodSandbox"
            | "UpdatePodSandbox"
            | "PostUpdatePodSandbox"
            | "PostCreateContainer"
            | "StartContainer"
            | "PostStartContainer"
            | "PostUpdateContainer"
            | "StopContainer"
            | "RemoveContainer"
            | "ValidateContainerAdjustment" => Vec::new(),
            _ => return Err(unimplemented(service, method)),
        };
        Ok(out)
    }

    fn configure(&self, payload: &[u8]) -> Result<api::ConfigureResponse, Status> {
        let req: api::ConfigureRequest = ttrpc::decode("ConfigureRequest", payload).map_err(bad)?;
        tracing::info!(runtime = %req.runtime_name, version = %req.runtime_version, "NRI: configured by the runtime");
        let events = match req.config.trim() {
            "" => vec![EVENTS.to_string()],
            text => {
                crate::api::input::prescan_yaml(text.as_bytes())
                    .map_err(|e| invalid(format!("NRI plugin configuration: {e}")))?;
                serde_yaml::from_str::<PluginConfig>(text)
                    .map_err(|e| invalid(format!("NRI plugin configuration: {e}")))?
                    .events
            }
        };
        let events = event_mask(&events)
            .map_err(|e| invalid(format!("NRI plugin configuration: events: {e}")))?;
        Ok(api::ConfigureResponse { events })
    }

    fn run_pod_sandbox(&self, pod: Option<&api::PodSandbox>) {
        if let Some(pod) = pod {
            self.hooks
                .pre_run_pod_sandbox(&convert::sandbox_request(pod));
        }
    }

    fn create_container(
        &self,
        req: &api::CreateContainerRequest,
    ) -> Result<api::CreateContainerResponse, Status> {
        let (Some(pod), Some(c)) = (&req.pod, &req.container) else {
            return Ok(Default::default());
        };
        let hook_req = convert::container_request(pod, c);
        let stage = "PreCreateContainer";
        let values = self
            .hooks
            .container_values(&hook_req, stage)
            .unwrap_or_default();
        let extras = match self.hooks.container_extras(&hook_req, stage) {
            Ok(x) => x,
            Err(e) if self.fail => {
                return Err(Status {
                    code: e.code() as i32,
                    message: e.message().to_string(),
                });
            }
            Err(e) => {
                tracing::warn!(pod = %pod.name, container = %c.name, error = %e.message(), "NRI CreateContainer: a hook failed (failure policy Ignore)");
                Default::default()
            }
        };
        Ok(api::CreateContainerResponse {
            adjust: Some(convert::adjustment(&values, &extras)),
            ..Default::default()
        })
    }

    fn update_container(&self, req: &api::UpdateContainerRequest) -> api::UpdateContainerResponse {
        let (Some(pod), Some(c)) = (&req.pod, &req.container) else {
            return Default::default();
        };
        let hook_req = convert::container_request(pod, c);
        let values = self
            .hooks
            .container_values(&hook_req, "PreUpdateContainerResources")
            .unwrap_or_default();
        api::UpdateContainerResponse {
            update: convert::update(&c.id, &values).into_iter().collect(),
            ..Default::default()
        }
    }
}

fn unimplemented(service: &str, method: &str) -> Status {
    Status {
        code: ttrpc::CODE_UNIMPLEMENTED,
        message: format!("{service}/{method} is not implemented"),
    }
}

fn invalid(message: String) -> Status {
    Status {
        code: 3, // InvalidArgument
        message,
    }
}

/// Dials the runtime, registers and serves until the connection ends.
pub async fn session(
    cfg: &Config,
    socket: &Path,
    plugin: &Plugin,
    shutdown: &Shutdown,
) -> Result<Ended, SessionError> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|err| SessionError::Dial {
            socket: socket.display().to_string(),
            err,
        })?;
    let (rd, mut wr) = stream.into_split();
    let mut reader = ttrpc::Reader::new(rd);
    let register = api::RegisterPluginRequest {
        plugin_name: cfg.plugin_name.clone(),
        plugin_idx: cfg.plugin_index.clone(),
        nri_version: String::new(),
    };
    let call = Request {
        service: RUNTIME_SERVICE.into(),
        method: "RegisterPlugin".into(),
        payload: register.encode_to_vec(),
        timeout_nano: 0,
    };
    let first = Frame {
        conn: ttrpc::RUNTIME_CONN,
        stream: 1,
        kind: ttrpc::TYPE_REQUEST,
        flags: 0,
        body: call.encode_to_vec(),
    };
    ttrpc::write(&mut wr, &first).await?;
    let timeout = Duration::from_millis(cfg.connect_timeout_millis.max(1));
    let deadline = tokio::time::Instant::now() + timeout;
    let mut configured = false;
    loop {
        let next = tokio::select! {
            m = reader.next() => m?,
            _ = shutdown.draining() => return Ok(Ended::Drained),
            _ = tokio::time::sleep_until(deadline), if !configured => {
                return Err(SessionError::NotConfigured(timeout));
            }
        };
        let Some(msg) = next else {
            return match configured {
                true => Ok(Ended::Closed),
                false => Err(SessionError::ClosedEarly),
            };
        };
        match (msg.conn, msg.kind) {
            (ttrpc::RUNTIME_CONN, ttrpc::TYPE_RESPONSE) => {
                let resp: ttrpc::Response = ttrpc::decode("Response", &msg.body)?;
                match resp.status {
                    Some(s) if s.code != 0 => return Err(SessionError::Refused(s.message)),
                    _ => {
                        tracing::info!(socket = %socket.display(), name = %cfg.plugin_name, index = %cfg.plugin_index, "NRI: registered with the runtime")
                    }
                }
            }
            (ttrpc::PLUGIN_CONN, ttrpc::TYPE_REQUEST) => {
                let req: Request = ttrpc::decode("Request", &msg.body)?;
                let answer = plugin.call(&req.service, &req.method, &req.payload);
                // A configuration we refused is no configuration: the runtime drops us and
                // the next dial waits out the back-off.
                configured |= req.method == "Configure" && answer.is_ok();
                ttrpc::write(&mut wr, &ttrpc::response(msg.stream, answer)).await?;
                if req.method == "Shutdown" {
                    return Ok(Ended::Closed);
                }
            }
            (conn, kind) => {
                tracing::debug!(conn, kind, "NRI: unexpected message ignored")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn koordinators_events_are_its_four_bits() {
        let mask = event_mask(&[EVENTS.to_string()]).unwrap();
        // RunPodSandbox 1, RemovePodSandbox 3, CreateContainer 4, UpdateContainer 8.
        assert_eq!(mask, 1 | 1 << 2 | 1 << 3 | 1 << 7);
        assert_eq!(event_mask(&["all".into()]).unwrap(), (1 << 14) - 1);
        assert!(event_mask(&["Bogus".into()]).is_err());
    }
}
