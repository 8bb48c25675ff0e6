//! The kubelet's configuration from its `/configz`, as Koordinator's koordlet reads it
//! (`kubelet_stub.go`): over the kubelet's authenticated port with the service account's
//! token, at the Node's address of the preferred type and its `daemonEndpoints` port (with
//! `insecureTls`: the read-only port over HTTP). The config file is the fallback when the
//! kubelet does not answer, said once per streak in the log; `disableQueryKubeletConfig`
//! reads neither, as Koordinator.

use std::time::Duration;

use hyper::Method;
use k8s_openapi::api::core::v1::Node;

use super::kubelet_access::{ADDRESS_TYPES, KubeletConfig};
use super::kubeletconfig::{KubeletConfigError, KubeletConfiguration};
use crate::kernel::http_client::{self, Trust};

#[derive(Debug, thiserror::Error)]
pub enum ConfigzError {
    #[error("{0}")]
    Client(#[from] http_client::ClientError),
    #[error("request {0} failed, code {1}")]
    Status(String, u16),
    #[error("{0}")]
    Decode(#[from] KubeletConfigError),
    #[error("{0}")]
    Kubelet(#[from] super::informer::pods::KubeletError),
    #[error("no address matched types {0}")]
    NoAddress(String),
}

/// Where the kubelet's `/configz` is: `configzUrl`; else the kubelet `podsUrl` names; else
/// the Node's address (Koordinator's `newKubeletStubFromConfig`).
pub fn url(k: &KubeletConfig, node: &Node) -> Result<String, ConfigzError> {
    if let Some(u) = &k.configz_url {
        return Ok(u.clone());
    }
    if let Some(pods) = &k.pods_url
        && let Some(base) = pods.strip_suffix("/pods").or(pods.strip_suffix("/pods/"))
    {
        return Ok(format!("{base}/configz"));
    }
    // An unsupported type is InternalIP (warned when the configuration is checked).
    let wanted = Some(k.preferred_address_type.as_str())
        .filter(|t| ADDRESS_TYPES.contains(t))
        .unwrap_or("InternalIP");
    let status = node.status.as_ref();
    let address = status
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .find(|a| a.type_ == wanted)
        .map(|a| a.address.clone())
        .ok_or_else(|| ConfigzError::NoAddress(wanted.to_string()))?;
    let host = match address.contains(':') {
        true => format!("[{address}]"),
        false => address,
    };
    if k.insecure_tls {
        return Ok(format!("http://{host}:{}/configz", k.read_only_port));
    }
    let port = status
        .and_then(|s| s.daemon_endpoints.as_ref())
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .map(|e| e.port)
        .filter(|p| *p > 0)
        .unwrap_or(10250);
    Ok(format!("https://{host}:{port}/configz"))
}

/// One GET of `/configz`, decoded.
pub async fn fetch(
    url: &str,
    token_file: &std::path::Path,
    timeout: Duration,
) -> Result<KubeletConfiguration, ConfigzError> {
    let auth = super::informer::pods::authorization(url, Some(token_file))?;
    let mut headers = vec![("accept", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    let trust = Some(&Trust::Insecure);
    let resp = http_client::send(Method::GET, url, &headers, None, trust, timeout).await?;
    if !resp.status.is_success() {
        return Err(ConfigzError::Status(url.to_string(), resp.status.as_u16()));
    }
    Ok(KubeletConfiguration::from_configz(&resp.body)?)
}

/// Where the last configuration came from, so a change of source is logged once.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub enum Source {
    #[default]
    Unknown,
    Configz,
    File,
    Neither,
}

/// The kubelet's configuration for this report: `/configz`, else the config file.
pub async fn read(
    k: &KubeletConfig,
    node: &Node,
    last: &mut Source,
) -> Option<KubeletConfiguration> {
    if k.disable_query_kubelet_config {
        return None;
    }
    let timeout = Duration::from_secs(k.timeout_seconds.max(1));
    let configz = match url(k, node) {
        Ok(u) => fetch(&u, &k.token_file, timeout)
            .await
            .map_err(|e| (u, e.to_string())),
        Err(e) => Err((String::new(), e.to_string())),
    };
    let (failure, now) = match configz {
        Ok(c) => {
            if *last != Source::Configz {
                tracing::info!("kubelet configuration read from the kubelet's /configz");
            }
            *last = Source::Configz;
            return Some(c);
        }
        Err(e) => (e, KubeletConfiguration::read(&k.config_file)),
    };
    let source = match &now {
        Ok(Some(_)) => Source::File,
        _ => Source::Neither,
    };
    if source != *last {
        let (url, error) = failure;
        let file = k.config_file.display().to_string();
        match &now {
            Ok(Some(_)) => {
                tracing::warn!(%url, %error, %file, "kubelet /configz unreadable; using the kubelet's config file")
            }
            Ok(None) => {
                tracing::warn!(%url, %error, %file, "kubelet /configz unreadable and no config file; NodeResourceTopology reported without the kubelet's configuration")
            }
            Err(e) => {
                tracing::warn!(%url, %error, file_error = %e, "kubelet /configz and config file unreadable; NodeResourceTopology reported without the kubelet's configuration")
            }
        }
    }
    *last = source;
    now.ok().flatten()
}

#[cfg(test)]
#[path = "configz_tests.rs"]
mod tests;
