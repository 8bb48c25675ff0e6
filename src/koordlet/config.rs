//! The `koordlet` configuration section and its checks.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{collectors, features, prediction};
use crate::os::Driver;

/// The `koordlet` configuration section.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// Host /proc (the DaemonSet runs with hostPID, so `/proc`).
    pub proc_root: PathBuf,
    /// Host /sys (DaemonSet: `/host-sys`).
    pub sys_root: PathBuf,
    /// Host cgroup mount (DaemonSet: `/host-cgroup`).
    pub cgroup_root: PathBuf,
    /// `cgroupfs` or `systemd`; unset: detect (kubepods.slice → systemd, kubepods → cgroupfs).
    pub cgroup_driver: Option<Driver>,
    /// The kubelet's `--cgroup-root` ('' = the root).
    pub cgroup_parent: String,
    pub kubelet: KubeletConfig,
    /// Koordinator's koordlet feature gates (`CPICollector`, `PSICollector`, ...).
    pub feature_gates: BTreeMap<String, bool>,
    pub collectors: collectors::Config,
    pub store: StoreConfig,
    pub reporter: ReporterConfig,
    pub prediction: prediction::Config,
    pub eviction: EvictionConfig,
    /// Audit events (gates `AuditEvents`, `AuditEventsHTTPHandler`).
    pub audit: crate::koordlet::audit::Config,
    /// Where the pod-resources proxy serves `kubelet.sock` (gate `PodResourcesProxy`).
    pub pod_resources_proxy_path: PathBuf,
    /// The runtime hook server the runtime proxy calls (`runtimehooks`).
    pub runtime_hooks: crate::koordlet::runtimehooks::Config,
    /// The Device report (gate Accelerators).
    pub devices: crate::koordlet::devices::Config,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            proc_root: "/proc".into(),
            sys_root: "/sys".into(),
            cgroup_root: "/sys/fs/cgroup".into(),
            cgroup_driver: None,
            cgroup_parent: String::new(),
            kubelet: KubeletConfig::default(),
            feature_gates: BTreeMap::new(),
            collectors: collectors::Config::default(),
            store: StoreConfig::default(),
            reporter: ReporterConfig::default(),
            prediction: prediction::Config::default(),
            eviction: EvictionConfig::default(),
            audit: Default::default(),
            pod_resources_proxy_path: "/var/run/koordlet/pod-resources".into(),
            runtime_hooks: Default::default(),
            devices: Default::default(),
        }
    }
}

/// How the QoS strategies evict (`pkg/koordlet/qosmanager/plugins/util/evictor.go`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct EvictionConfig {
    /// Koordinator's `--only-evict-by-api`: never stop containers through the runtime.
    #[serde(rename = "onlyEvictByAPI")]
    pub only_evict_by_api: bool,
    /// The CRI socket for every container (`unix:///run/containerd/containerd.sock`).
    /// Unset: discovered by the container id's scheme under `varRunRoot`.
    pub runtime_endpoint: Option<String>,
    /// The host's /var/run as mounted for the koordlet (DaemonSet: `/host-var-run`).
    pub var_run_root: PathBuf,
}

impl Default for EvictionConfig {
    fn default() -> Self {
        Self {
            only_evict_by_api: false,
            runtime_endpoint: None,
            var_run_root: "/var/run".into(),
        }
    }
}

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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct StoreConfig {
    /// The store's directory; unset: `<common.dataDir>/koordlet/metrics`.
    pub path: Option<PathBuf>,
    pub retention_hours: u64,
    /// Hard cap; the oldest points go first when it is exceeded.
    pub max_disk_mib: u64,
    /// sled page cache.
    pub cache_mib: u64,
    pub gc_interval_seconds: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            path: None,
            retention_hours: 12,
            max_disk_mib: 100,
            cache_mib: 1,
            gc_interval_seconds: 300,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ReporterConfig {
    pub enable_node_metric_report: bool,
    /// Floor under `NodeMetric.spec.metricCollectPolicy.reportIntervalSeconds`.
    pub min_report_interval_seconds: u64,
    /// Floor under `aggregateDurationSeconds`.
    pub min_aggregate_duration_seconds: u64,
    /// Set by `--embedded` (not a configuration key): a ceiling over the report interval,
    /// so `kubectl top` sees a new pod within seconds, as metrics-server users do.
    #[serde(skip)]
    pub max_report_interval_seconds: Option<u64>,
}

impl Default for ReporterConfig {
    fn default() -> Self {
        Self {
            enable_node_metric_report: true,
            min_report_interval_seconds: 30,
            min_aggregate_duration_seconds: 60,
            max_report_interval_seconds: None,
        }
    }
}

/// Problems with the section, as (key, message).
pub fn validate(cfg: &Config, strict: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if strict {
        let items = features::KOORDLET_GATES.unsupported(&cfg.feature_gates);
        for e in crate::kernel::compat::errors(&items) {
            out.push(("featureGates".into(), e));
        }
    }
    let urls = [
        ("kubelet.podsUrl", &cfg.kubelet.pods_url),
        ("kubelet.configzUrl", &cfg.kubelet.configz_url),
    ];
    for (key, url) in urls {
        if let Some(url) = url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            out.push((
                key.into(),
                format!("{url:?} must be an http:// or https:// URL"),
            ));
        }
    }
    // Koordinator warns and uses InternalIP (as koord does at start); strict mode refuses.
    let kind = &cfg.kubelet.preferred_address_type;
    if strict && !ADDRESS_TYPES.contains(&kind.as_str()) {
        out.push((
            "kubelet.preferredAddressType".into(),
            format!("{kind:?} is not one of {}", ADDRESS_TYPES.join(", ")),
        ));
    }
    out
}
