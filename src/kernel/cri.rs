//! A CRI runtime client over a unix socket (the `k8s-cri` tonic bindings): the koordlet
//! stops the containers of evicted pods with it. Speaks `runtime.v1` and falls back to
//! `runtime.v1alpha2` for runtimes that predate v1. Callers see plain types only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_cri::{v1, v1alpha2};
use tonic::transport::{Channel, Endpoint, Uri};

/// Every call gives up after this long (a hung runtime must not stall a QoS loop).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum CriError {
    #[error("CRI endpoint {0}: {1}")]
    Endpoint(String, String),
    #[error("CRI {call} on {endpoint}: {message}")]
    Call {
        call: &'static str,
        endpoint: String,
        message: String,
    },
    #[error("CRI {call} on {endpoint}: no answer within {CALL_TIMEOUT:?}")]
    Timeout {
        call: &'static str,
        endpoint: String,
    },
}

/// What the runtime says a container is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

impl ContainerState {
    fn from_i32(v: i32) -> ContainerState {
        match v {
            0 => ContainerState::Created,
            1 => ContainerState::Running,
            2 => ContainerState::Exited,
            _ => ContainerState::Unknown,
        }
    }
}

/// The socket path of `unix:///run/x.sock`, `unix:/run/x.sock` or `/run/x.sock`.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, CriError> {
    let p = endpoint
        .strip_prefix("unix://")
        .or_else(|| endpoint.strip_prefix("unix:"))
        .unwrap_or(endpoint);
    if p.starts_with('/') {
        Ok(PathBuf::from(p))
    } else {
        Err(CriError::Endpoint(
            endpoint.into(),
            "only unix sockets with an absolute path are supported".into(),
        ))
    }
}

/// A gRPC channel to a unix socket, connected on first use (and again after a failure).
pub fn unix_channel(path: PathBuf) -> Channel {
    Endpoint::from_static("http://[::]:50051").connect_with_connector_lazy(tower::service_fn(
        move |_: Uri| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(s))
            }
        },
    ))
}

/// A lazily connected client; cheap to clone.
#[derive(Clone)]
pub struct CriClient {
    endpoint: String,
    channel: Channel,
}

impl CriClient {
    /// A client for the runtime socket at `endpoint`; connects on first use.
    pub fn new(endpoint: &str) -> Result<CriClient, CriError> {
        let channel = unix_channel(socket_path(endpoint)?);
        Ok(CriClient {
            endpoint: endpoint.into(),
            channel,
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn call<T, F>(&self, call: &'static str, f: F) -> Result<T, CriError>
    where
        F: std::future::Future<Output = Result<T, tonic::Status>>,
    {
        match tokio::time::timeout(CALL_TIMEOUT, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(s)) => Err(CriError::Call {
                call,
                endpoint: self.endpoint.clone(),
                message: format!("{:?}: {}", s.code(), s.message()),
            }),
            Err(_) => Err(CriError::Timeout {
                call,
                endpoint: self.endpoint.clone(),
            }),
        }
    }

    /// `(runtime name, runtime version, CRI api version)`.
    pub async fn version(&self) -> Result<(String, String, String), CriError> {
        let mut c = v1::runtime_service_client::RuntimeServiceClient::new(self.channel.clone());
        let r = self
            .call("Version", async {
                c.version(v1::VersionRequest::default()).await
            })
            .await?
            .into_inner();
        Ok((r.runtime_name, r.runtime_version, r.runtime_api_version))
    }

    /// Stops a container, killing it after `timeout` seconds (0: at once).
    pub async fn stop_container(&self, id: &str, timeout: i64) -> Result<(), CriError> {
        let mut c = v1::runtime_service_client::RuntimeServiceClient::new(self.channel.clone());
        let req = v1::StopContainerRequest {
            container_id: id.into(),
            timeout,
        };
        let r = self
            .call("StopContainer", async { c.stop_container(req).await })
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(e) if is_unimplemented(&e) => {
                let mut c = v1alpha2::runtime_service_client::RuntimeServiceClient::new(
                    self.channel.clone(),
                );
                let req = v1alpha2::StopContainerRequest {
                    container_id: id.into(),
                    timeout,
                };
                self.call("StopContainer(v1alpha2)", async {
                    c.stop_container(req).await
                })
                .await
                .map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// The state the runtime reports for a container.
    pub async fn container_state(&self, id: &str) -> Result<ContainerState, CriError> {
        let mut c = v1::runtime_service_client::RuntimeServiceClient::new(self.channel.clone());
        let req = v1::ContainerStatusRequest {
            container_id: id.into(),
            verbose: false,
        };
        let r = self
            .call("ContainerStatus", async { c.container_status(req).await })
            .await?
            .into_inner();
        Ok(r.status.map_or(ContainerState::Unknown, |s| {
            ContainerState::from_i32(s.state)
        }))
    }
}

fn is_unimplemented(e: &CriError) -> bool {
    matches!(e, CriError::Call { message, .. } if message.starts_with("Unimplemented"))
}

/// True when `path` is an existing socket or file (what Koordinator's discovery checks).
pub fn exists(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        for e in ["unix:///run/c.sock", "unix:/run/c.sock", "/run/c.sock"] {
            assert_eq!(socket_path(e).unwrap(), PathBuf::from("/run/c.sock"), "{e}");
        }
        let err = socket_path("tcp://127.0.0.1:1").unwrap_err().to_string();
        assert!(err.contains("tcp://127.0.0.1:1"), "{err}");
    }

    #[tokio::test]
    async fn missing_socket_is_a_clear_error() {
        let c = CriClient::new("/nonexistent/koord-test.sock").unwrap();
        let err = c.stop_container("abc", 0).await.unwrap_err().to_string();
        assert!(err.contains("StopContainer"), "{err}");
        assert!(err.contains("/nonexistent/koord-test.sock"), "{err}");
    }
}
