//! The `common` configuration section: settings every role shares. It lives in the
//! kernel (not `config/`) so the kernel never imports upward.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::telemetry::LogFormat;

/// Settings every role shares.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct CommonConfig {
    /// Path to a kubeconfig; unset means `$KUBECONFIG`, `~/.kube/config`, then in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// This node's name (default: `$NODE_NAME`, then the host name).
    pub node_name: String,
    pub log_format: LogFormat,
    /// A level or tracing filter directive; `RUST_LOG` wins when set.
    pub log_level: String,
    /// Address of `/healthz`, `/readyz`, `/metrics`, `/debug/config`.
    pub admin_addr: SocketAddr,
    /// A second address serving the same admin endpoint (Koordinator's manager probes
    /// `--health-probe-addr` apart from `--metrics-addr`); null: none.
    pub health_probe_addr: Option<SocketAddr>,
    /// Where koord keeps state (sled stores, kubeconfig of the embedded server).
    pub data_dir: PathBuf,
    /// How long a graceful drain may take before koord aborts.
    pub shutdown_grace_seconds: u64,
    /// Refuse, instead of warning about, Koordinator plugins, feature gates, flags and
    /// args koord does not implement yet.
    pub strict: bool,
}

impl Default for CommonConfig {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            node_name: String::new(),
            log_format: LogFormat::Text,
            log_level: "info".into(),
            admin_addr: SocketAddr::from(([127, 0, 0, 1], 9316)),
            health_probe_addr: None,
            data_dir: PathBuf::from("/var/lib/koord"),
            shutdown_grace_seconds: 30,
            strict: false,
        }
    }
}
