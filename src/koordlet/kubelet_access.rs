//! How the koordlet reaches its node's kubelet: the pod list, the CPU manager checkpoint,
//! the kubelet's configuration (`/configz` or its file) and its root directory. Its own
//! file so the readers of these settings (topology, configz) need not import the whole
//! koordlet configuration, which in turn names theirs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The node address types Koordinator accepts (`IsNodeAddressTypeSupported`).
pub const ADDRESS_TYPES: [&str; 5] = [
    "Hostname",
    "ExternalIP",
    "ExternalDNS",
    "InternalIP",
    "InternalDNS",
];

/// Where the node's pods come from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct KubeletConfig {
    /// The kubelet's pod list (`https://<node>:10250/pods` or `http://127.0.0.1:10255/pods`).
    /// Unset: watch the API server with `spec.nodeName=<node>`.
    pub pods_url: Option<String>,
    /// Service account token for HTTPS.
    pub token_file: PathBuf,
    pub sync_interval_seconds: u64,
    pub timeout_seconds: u64,
    /// Kubelet's CPU manager checkpoint (static policy pins), reported in the
    /// NodeResourceTopology; absent: kubelet pins nothing.
    pub cpu_manager_state_file: PathBuf,
    /// The kubelet's root directory (`-var-lib-kubelet-dir`): pods' volume mounts under
    /// `pods/<uid>/volumes`, for blkio's `podvolume` blocks, and the kubelet's
    /// `pod-resources/kubelet.sock`, where the pod-resources proxy forwards.
    pub root_dir: PathBuf,
    /// The kubelet's configuration file (`KubeletConfiguration`): its CPU manager policy,
    /// reserved CPUs and topology manager policy go into the NodeResourceTopology; absent:
    /// the checkpoint's policy and `topologyPolicies: [None]`.
    pub config_file: PathBuf,
    /// The kubelet's `/configz`, where its configuration is read first. Unset: the kubelet
    /// `podsUrl` names, else the Node's address of `preferredAddressType` at its
    /// `daemonEndpoints` port over HTTPS (with `insecureTls`: `readOnlyPort` over HTTP).
    pub configz_url: Option<String>,
    /// `Hostname`, `ExternalIP`, `ExternalDNS`, `InternalIP` or `InternalDNS`.
    pub preferred_address_type: String,
    /// Reach the kubelet on its read-only port over HTTP.
    pub insecure_tls: bool,
    pub read_only_port: u64,
    /// Read neither `/configz` nor the config file: the kubelet's CPU manager goes
    /// unreported, as Koordinator's `disable-query-kubelet-config`.
    pub disable_query_kubelet_config: bool,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            pods_url: None,
            token_file: "/var/run/secrets/kubernetes.io/serviceaccount/token".into(),
            sync_interval_seconds: 10,
            timeout_seconds: 3,
            cpu_manager_state_file: "/var/lib/kubelet/cpu_manager_state".into(),
            root_dir: "/var/lib/kubelet".into(),
            config_file: "/var/lib/kubelet/config.yaml".into(),
            configz_url: None,
            preferred_address_type: "InternalIP".into(),
            insecure_tls: false,
            read_only_port: 10255,
            disable_query_kubelet_config: false,
        }
    }
}
