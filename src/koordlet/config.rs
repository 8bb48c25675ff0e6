//! The `koordlet` configuration section and its checks.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::kubelet_access::{ADDRESS_TYPES, KubeletConfig};
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
