//! Each Koordinator component's flags and where they go in koord's configuration. Flags
//! named here but not mapped say why; flags missing from the table are warned about as
//! unknown. Koordinator's defaults are koord's, so a flag that restates one changes nothing.

use crate::kernel::role::Role;

/// How a flag value becomes a configuration value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conv {
    Str,
    Bool,
    U64,
    /// A decimal number (a back-off factor).
    F64,
    /// A Go duration (`500ms`, `6s`) in whole milliseconds.
    Millis,
    /// A Go duration (`10s`, `1m30s`) in whole seconds.
    Secs,
    /// Like `Secs`, but 0 keeps koord's default (Koordinator's "0 = unset").
    SecsOrDefault,
    Mins,
    Hours,
    /// A Go listen address (`:9316` = every interface).
    Addr,
    /// kube-scheduler's `--port`: a bare number listens on every interface (0: not set).
    Port,
    /// A directory (Koordinator joins `koordlet.json` to it); a `*.json` file path means
    /// its directory.
    Dir,
    /// `A=true,B=false` feature gates.
    Gates,
}

#[derive(Debug)]
pub enum To {
    Key(&'static str, Conv),
    /// Accepted with nothing to do in koord; the reason is logged once.
    Note(&'static str),
    /// Fine with this value (case-insensitive); any other is unsupported, for this reason.
    Only(&'static str, &'static str),
    Unsupported(&'static str),
}

#[derive(Debug)]
pub struct Spec {
    pub role: Role,
    pub name: &'static str,
    pub to: To,
}

impl Spec {
    pub fn conv(&self) -> Option<Conv> {
        match self.to {
            To::Key(_, c) => Some(c),
            _ => None,
        }
    }
}

const fn key(role: Role, name: &'static str, key: &'static str, conv: Conv) -> Spec {
    Spec {
        role,
        name,
        to: To::Key(key, conv),
    }
}

const fn note(role: Role, name: &'static str, why: &'static str) -> Spec {
    Spec {
        role,
        name,
        to: To::Note(why),
    }
}

const fn unsupported(role: Role, name: &'static str, why: &'static str) -> Spec {
    Spec {
        role,
        name,
        to: To::Unsupported(why),
    }
}

const KLOG: &str = "klog output settings; koord logs to stderr at common.logLevel";
const PPROF: &str = "Go profiling; koord has none";
const QPS: &str = "client-go rate limits; koord's clients are not throttled";

use Conv::*;
use Role::{Descheduler as D, Koordlet as K, Manager as M, RuntimeProxy as P, Scheduler as S};

/// Flags every Koordinator component takes from klog and client-go.
const COMMON: &[(&str, &str)] = &[
    ("v", KLOG),
    ("logtostderr", KLOG),
    ("alsologtostderr", KLOG),
    ("stderrthreshold", KLOG),
    ("log-dir", KLOG),
    ("log-file", KLOG),
    ("vmodule", KLOG),
    ("add-dir-header", KLOG),
    ("skip-headers", KLOG),
    ("async-log", KLOG),
    ("async-log-queue-length", KLOG),
    ("enable-pprof", PPROF),
    ("pprof-addr", PPROF),
    ("kube-api-qps", QPS),
    ("kube-api-burst", QPS),
];

static SPECS: &[Spec] = &[
    // koordlet (cmd/koordlet/options, pkg/koordlet/config and its modules)
    key(K, "addr", "common.adminAddr", Addr),
    key(K, "cgroup-root-dir", "koordlet.cgroupRoot", Str),
    key(K, "proc-root-dir", "koordlet.procRoot", Str),
    key(K, "sys-root-dir", "koordlet.sysRoot", Str),
    key(K, "cgroup-driver", "koordlet.cgroupDriver", Str),
    key(K, "feature-gates", "koordlet.featureGates", Gates),
    key(K, "runtime-hooks-addr", "koordlet.runtimeHooks.socket", Str),
    key(
        K,
        "xpu-device-infos-dir",
        "koordlet.devices.xpuDeviceInfosDir",
        Str,
    ),
    key(
        K,
        "runtime-hooks-host-endpoint",
        "koordlet.runtimeHooks.hostEndpoint",
        Str,
    ),
    key(
        K,
        "runtime-hooks-failure-policy",
        "koordlet.runtimeHooks.failurePolicy",
        Str,
    ),
    key(
        K,
        "disable-unset-cpu-quota",
        "koordlet.runtimeHooks.disableUnsetCpuQuota",
        Bool,
    ),
    key(
        K,
        "enable-nri-runtime-hook",
        "koordlet.runtimeHooks.nri.enabled",
        Bool,
    ),
    key(
        K,
        "runtime-hooks-nri-socket-path",
        "koordlet.runtimeHooks.nri.socketPath",
        Str,
    ),
    key(
        K,
        "runtime-hooks-nri-plugin-name",
        "koordlet.runtimeHooks.nri.pluginName",
        Str,
    ),
    key(
        K,
        "runtime-hooks-nri-plugin-index",
        "koordlet.runtimeHooks.nri.pluginIndex",
        Str,
    ),
    key(
        K,
        "runtime-hooks-nri-connect-timeout",
        "koordlet.runtimeHooks.nri.connectTimeoutMillis",
        Millis,
    ),
    key(
        K,
        "runtime-hooks-nri-backoff-duration",
        "koordlet.runtimeHooks.nri.backoff.durationMillis",
        Millis,
    ),
    key(
        K,
        "runtime-hooks-nri-backoff-cap",
        "koordlet.runtimeHooks.nri.backoff.capSeconds",
        Secs,
    ),
    key(
        K,
        "runtime-hooks-nri-backoff-steps",
        "koordlet.runtimeHooks.nri.backoff.steps",
        U64,
    ),
    key(
        K,
        "runtime-hooks-nri-backoff-factor",
        "koordlet.runtimeHooks.nri.backoff.factor",
        F64,
    ),
    key(
        K,
        "runtime-hooks-config-path",
        "koordlet.runtimeHooks.hookServerDir",
        Dir,
    ),
    Spec {
        role: K,
        name: "runtime-hooks-network",
        to: To::Only("unix", "koord's hook server listens on a unix socket only"),
    },
    key(
        K,
        "coldpage-collector-interval",
        "koordlet.collectors.coldPageIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "enable-resctrl-collector",
        "koordlet.collectors.enableResctrlCollector",
        Bool,
    ),
    key(
        K,
        "resctrl-collector-interval",
        "koordlet.collectors.resctrlIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "collect-node-storage-info-interval",
        "koordlet.collectors.nodeStorageInfoIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "collect-res-used-interval",
        "koordlet.collectors.collectResUsedIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "psi-collector-interval",
        "koordlet.collectors.psiIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "cpi-collector-interval",
        "koordlet.collectors.cpiIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "collect-cpi-timewindow",
        "koordlet.collectors.cpiWindowSeconds",
        Secs,
    ),
    key(
        K,
        "enable-node-metric-report",
        "koordlet.reporter.enableNodeMetricReport",
        Bool,
    ),
    key(
        K,
        "only-evict-by-api",
        "koordlet.eviction.onlyEvictByAPI",
        Bool,
    ),
    key(K, "var-run-root-dir", "koordlet.eviction.varRunRoot", Str),
    key(K, "var-lib-kubelet-dir", "koordlet.kubelet.rootDir", Str),
    key(
        K,
        "containerd-endpoint",
        "koordlet.eviction.runtimeEndpoint",
        Str,
    ),
    key(
        K,
        "kubelet-sync-interval",
        "koordlet.kubelet.syncIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "kubelet-sync-timeout",
        "koordlet.kubelet.timeoutSeconds",
        Secs,
    ),
    key(
        K,
        "kubelet-preferred-address-type",
        "koordlet.kubelet.preferredAddressType",
        Str,
    ),
    key(
        K,
        "kubelet-insecure-tls",
        "koordlet.kubelet.insecureTls",
        Bool,
    ),
    key(
        K,
        "kubelet-read-only-port",
        "koordlet.kubelet.readOnlyPort",
        U64,
    ),
    key(
        K,
        "disable-query-kubelet-config",
        "koordlet.kubelet.disableQueryKubeletConfig",
        Bool,
    ),
    key(
        K,
        "prediction-training-interval",
        "koordlet.prediction.trainingIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "prediction-model-checkpoint-interval",
        "koordlet.prediction.checkpointIntervalSeconds",
        Secs,
    ),
    key(
        K,
        "prediction-model-checkpoint-max-per-step",
        "koordlet.prediction.maxCheckpointsPerRound",
        U64,
    ),
    key(
        K,
        "prediction-model-expiration-duration",
        "koordlet.prediction.modelExpireMinutes",
        Mins,
    ),
    key(
        K,
        "prediction-cold-start-duration",
        "koordlet.prediction.coldStartHours",
        Hours,
    ),
    key(
        K,
        "prediction-safety-margin-percent",
        "koordlet.prediction.safetyMarginPercent",
        U64,
    ),
    key(
        K,
        "prediction-cpu-histogram-decay-halflife",
        "koordlet.prediction.cpuHalfLifeHours",
        Hours,
    ),
    key(
        K,
        "prediction-memory-histogram-decay-halflife",
        "koordlet.prediction.memoryHalfLifeHours",
        Hours,
    ),
    note(
        K,
        "configmap-name",
        "koord reads the slo-controller-config through NodeSLO, as Koordinator does",
    ),
    note(
        K,
        "configmap-namespace",
        "koord reads the slo-controller-config through NodeSLO, as Koordinator does",
    ),
    key(K, "tsdb-path", "koordlet.store.path", Str),
    key(K, "audit-log-dir", "koordlet.audit.logDir", Str),
    key(
        K,
        "hami-core-library-directory-path",
        "koordlet.runtimeHooks.hamiCoreLibraryPath",
        Str,
    ),
    key(
        K,
        "pod-resources-proxy-path",
        "koordlet.podResourcesProxyPath",
        Str,
    ),
    key(K, "audit-verbose", "koordlet.audit.verbose", U64),
    key(
        K,
        "audit-max-disk-space-mb",
        "koordlet.audit.maxDiskSpaceMB",
        U64,
    ),
    key(
        K,
        "audit-max-concurrent-readers",
        "koordlet.audit.maxConcurrentReaders",
        U64,
    ),
    key(
        K,
        "audit-max-events-limit",
        "koordlet.audit.maxEventsLimit",
        U64,
    ),
    key(
        K,
        "prediction-checkpoint-filepath",
        "koordlet.prediction.checkpointDir",
        Str,
    ),
    note(
        K,
        "tsdb-retention-duration",
        "the metric store's retention is koordlet.store.retentionHours",
    ),
    note(
        K,
        "tsdb-max-bytes",
        "the metric store's disk bound is koordlet.store.maxDiskMib",
    ),
    // koord-manager (cmd/koord-manager/options)
    key(
        M,
        "enable-leader-election",
        "manager.leaderElection.enabled",
        Bool,
    ),
    key(
        M,
        "leader-election-namespace",
        "manager.leaderElection.namespace",
        Str,
    ),
    key(M, "metrics-addr", "common.adminAddr", Addr),
    key(M, "health-probe-addr", "common.healthProbeAddr", Addr),
    key(M, "feature-gates", "manager.featureGates", Gates),
    key(M, "sync-period", "manager.resyncSeconds", SecsOrDefault),
    key(M, "config-namespace", "manager.configNamespace", Str),
    key(M, "controllers", "manager.controllers", Str),
    key(
        M,
        "binding-admission-user-name",
        "manager.webhook.bindingAdmission.userName",
        Str,
    ),
    key(
        M,
        "binding-admission-dry-run",
        "manager.webhook.bindingAdmission.dryRun",
        Bool,
    ),
    key(
        M,
        "binding-admission-namespaces",
        "manager.webhook.bindingAdmission.namespaces",
        Str,
    ),
    key(
        M,
        "binding-admission-exclude-namespaces",
        "manager.webhook.bindingAdmission.excludeNamespaces",
        Str,
    ),
    key(
        M,
        "binding-admission-bypass-labels",
        "manager.webhook.bindingAdmission.bypassLabels",
        Str,
    ),
    key(
        M,
        "binding-admission-bypass-annotations",
        "manager.webhook.bindingAdmission.bypassAnnotations",
        Str,
    ),
    // koord-scheduler (kube-scheduler's options plus Koordinator's)
    key(S, "port", "common.adminAddr", Port),
    key(S, "feature-gates", "scheduler.featureGates", Gates),
    key(S, "leader-elect", "scheduler.leaderElection.enabled", Bool),
    key(
        S,
        "leader-elect-resource-name",
        "scheduler.leaderElection.name",
        Str,
    ),
    key(
        S,
        "leader-elect-resource-namespace",
        "scheduler.leaderElection.namespace",
        Str,
    ),
    note(
        S,
        "authentication-skip-lookup",
        "koord's scheduler serves no authenticated endpoint",
    ),
    note(
        S,
        "authorization-always-allow-paths",
        "koord's admin endpoint needs no authorization",
    ),
    key(
        S,
        "enable-network-topology-manager",
        "scheduler.networkTopologyManager",
        Bool,
    ),
    key(
        S,
        "scheduling-timeout",
        "scheduler.schedulingTimeoutSeconds",
        Secs,
    ),
    key(
        S,
        "scheduler-monitor-period",
        "scheduler.monitorPeriodSeconds",
        Secs,
    ),
    note(
        S,
        "scheduling-drop-unhandled-timeout",
        "koord schedules every pod it takes from the queue at once: none is left unhandled",
    ),
    unsupported(
        S,
        "secure-port",
        "koord serves /healthz and /metrics on common.adminAddr over HTTP",
    ),
    // koord-descheduler: its component configuration is --config (handled by kind).
    // koord-runtime-proxy (cmd/koord-runtime-proxy)
    key(
        P,
        "runtime-hook-server-key",
        "runtimeProxy.runtimeHookServerKey",
        Str,
    ),
    key(
        P,
        "runtime-hook-server-val",
        "runtimeProxy.runtimeHookServerVal",
        Str,
    ),
    Spec {
        role: P,
        name: "backend-runtime-mode",
        to: To::Only("containerd", "koord proxies containerd's CRI only"),
    },
];

static COMMON_SPECS: std::sync::LazyLock<Vec<Spec>> = std::sync::LazyLock::new(|| {
    [K, M, S, D, P]
        .iter()
        .flat_map(|r| COMMON.iter().map(|(n, why)| note(*r, n, why)))
        .collect()
});

/// The specs of `name` for the running roles: one per role that takes the flag.
pub fn find(roles: &[Role], name: &str) -> Vec<&'static Spec> {
    SPECS
        .iter()
        .chain(COMMON_SPECS.iter())
        .filter(|s| s.name == name && roles.contains(&s.role))
        .collect()
}

/// Every flag of every role, in the table's order (the flags reference).
pub fn all() -> impl Iterator<Item = &'static Spec> {
    SPECS.iter().chain(COMMON_SPECS.iter())
}
