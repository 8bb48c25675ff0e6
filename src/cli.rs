//! The command line: `--role` plus the common flags, and the subcommands.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{KeyValue, sources::flag};
use crate::kernel::role::{RoleSet, parse_roles};
use crate::kernel::telemetry::LogFormat;

const ABOUT: &str = "Koordinator in one binary: co-location and QoS for Kubernetes";

const LONG_ABOUT: &str = "Koordinator in one binary: co-location and QoS for Kubernetes.

Roles (--role, comma-separated):
  manager        SLO controllers (NodeMetric, NodeResource, NodeSLO) and admission webhooks
  scheduler      koord-scheduler with LoadAwareScheduling and Koordinator's plugins
  descheduler    koord-descheduler: LowNodeLoad and upstream plugins choose pods to move,
                 the MigrationController moves them with PodMigrationJobs
  koordlet       node agent: metrics, NodeMetric reports, QoS enforcement, the node's Device
  runtime-proxy  CRI v1 proxy between the kubelet and containerd that calls the runtime
                 hook servers of /etc/runtime/hookserver.d (the koordlet's among them)
  all            every role above

--embedded starts an in-process Kubernetes-compatible API server (HTTPS with its own CA,
a token on every request, sled storage under --data-dir, kubeconfig with CA and token
written to <data-dir>/kubeconfig, mode 0600) and runs the roles against it: no cluster
needed. With no --role it serves only the API server.

With --role, each role also accepts the flags of the Koordinator component it replaces,
in Go's syntax as Koordinator's chart writes them (-cgroup-root-dir=/host-cgroup/,
--feature-gates=AllAlpha=true, --config=<KubeSchedulerConfiguration>); flags koord does
not implement are warned about (refused with common.strict: true).

Examples:
  koord --role=all --embedded
  koord --role=koordlet
  koord --role=manager,scheduler
  koord device-scan --oneshot
  koord config print --role=koordlet";

#[derive(Parser, Debug)]
#[command(name = "koord", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    /// Roles to run: manager, scheduler, descheduler, koordlet, runtime-proxy, or all
    #[arg(long, value_name = "ROLES", value_parser = parse_roles)]
    pub role: Option<RoleSet>,

    #[command(flatten)]
    pub common: CommonFlags,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags that override the `common` configuration section.
#[derive(Args, Debug, Default, Clone)]
pub struct CommonFlags {
    /// YAML configuration file (see config/koord.yaml)
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// kubeconfig to reach the cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// This node's name (default: $NODE_NAME, then the host name)
    #[arg(long, global = true)]
    pub node_name: Option<String>,
    /// Log format
    #[arg(long, global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    /// Log level or filter directive (RUST_LOG wins when set)
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    /// Admin endpoint address (/healthz, /readyz, /metrics, /debug/config)
    #[arg(long, global = true, value_name = "ADDR")]
    pub admin_addr: Option<SocketAddr>,
    /// Directory for koord's state
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Run an in-process API server and point every role at it (no cluster needed)
    #[arg(long)]
    pub embedded: bool,
    /// Address of the embedded API server (HTTPS; loopback by default)
    #[arg(long, value_name = "ADDR")]
    pub embedded_addr: Option<SocketAddr>,
    /// Register this many simulated nodes in the embedded API server
    #[arg(long, value_name = "N")]
    pub sim_nodes: Option<u32>,
    /// CPU of each simulated node (a quantity, e.g. 32)
    #[arg(long, value_name = "QUANTITY")]
    pub sim_node_cpu: Option<String>,
    /// Memory of each simulated node (a quantity, e.g. 256Gi)
    #[arg(long, value_name = "QUANTITY")]
    pub sim_node_memory: Option<String>,
    /// koordlet: evict only through the Eviction API, never by stopping containers
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub only_evict_by_api: Option<bool>,
    /// runtime-proxy: the socket the kubelet talks CRI to
    #[arg(long, value_name = "PATH")]
    pub koord_runtimeproxy_endpoint: Option<String>,
    /// runtime-proxy: the runtime's CRI socket (containerd)
    #[arg(long, value_name = "PATH")]
    pub remote_runtime_service_endpoint: Option<String>,
    /// runtime-proxy: the runtime's image service socket (default: the runtime's)
    #[arg(long, value_name = "PATH")]
    pub remote_image_service_endpoint: Option<String>,
}

impl CommonFlags {
    /// The flags that were given, as configuration layers.
    pub fn providers(&self) -> Vec<KeyValue> {
        let path = |p: &PathBuf| p.display().to_string();
        let mut out = Vec::new();
        if let Some(v) = &self.kubeconfig {
            out.push(flag("--kubeconfig", "common.kubeconfig", path(v)));
        }
        if let Some(v) = &self.node_name {
            out.push(flag("--node-name", "common.nodeName", v.clone()));
        }
        if let Some(v) = self.log_format {
            let s = match v {
                LogFormat::Text => "text",
                LogFormat::Json => "json",
            };
            out.push(flag("--log-format", "common.logFormat", s));
        }
        if let Some(v) = &self.log_level {
            out.push(flag("--log-level", "common.logLevel", v.clone()));
        }
        if let Some(v) = self.admin_addr {
            out.push(flag("--admin-addr", "common.adminAddr", v.to_string()));
        }
        if let Some(v) = &self.data_dir {
            out.push(flag("--data-dir", "common.dataDir", path(v)));
        }
        if self.embedded {
            out.push(flag("--embedded", "embedded.enabled", true));
        }
        if let Some(v) = self.embedded_addr {
            out.push(flag("--embedded-addr", "embedded.addr", v.to_string()));
        }
        if let Some(v) = self.sim_nodes {
            out.push(flag("--sim-nodes", "embedded.simNodes", v));
        }
        if let Some(v) = &self.sim_node_cpu {
            out.push(flag("--sim-node-cpu", "embedded.simNodeCpu", v.clone()));
        }
        if let Some(v) = &self.sim_node_memory {
            out.push(flag(
                "--sim-node-memory",
                "embedded.simNodeMemory",
                v.clone(),
            ));
        }
        if let Some(v) = self.only_evict_by_api {
            out.push(flag(
                "--only-evict-by-api",
                "koordlet.eviction.onlyEvictByAPI",
                v,
            ));
        }
        for (name, key, v) in [
            (
                "--koord-runtimeproxy-endpoint",
                "runtimeProxy.koordRuntimeproxyEndpoint",
                &self.koord_runtimeproxy_endpoint,
            ),
            (
                "--remote-runtime-service-endpoint",
                "runtimeProxy.remoteRuntimeServiceEndpoint",
                &self.remote_runtime_service_endpoint,
            ),
            (
                "--remote-image-service-endpoint",
                "runtimeProxy.remoteImageServiceEndpoint",
                &self.remote_image_service_endpoint,
            ),
        ] {
            if let Some(v) = v {
                out.push(flag(name, key, v.clone()));
            }
        }
        out
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print every CRD manifest as YAML, generated from koord's types
    Crds {
        /// Write one file per CRD into this directory instead of printing
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Write manifests/ (CRDs, RBAC, workloads, webhooks, ConfigMaps, kustomize base and
    /// overlays, Grafana dashboards), generated from koord's code
    Manifests {
        /// Directory to write into (e.g. manifests); without it, list the files
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Write the book's generated references (configuration keys, flags, metrics, feature
    /// gates) from koord's code
    Docs {
        /// Directory to write into (e.g. docs/reference); without it, list the pages
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Run koord's decision code offline on a cluster snapshot and say why
    Explain {
        #[command(subcommand)]
        what: crate::explain::ExplainCommand,
    },
    /// Record a cluster, and replay recordings through koord's scheduler, manager and
    /// descheduler under other configurations
    Simulate {
        #[command(subcommand)]
        what: crate::simulate::SimulateCommand,
    },
    /// Koordinator's device daemon: find the accelerators (Huawei, Cambricon, Kunlun,
    /// MetaX) on the PCI bus and write them where the koordlet reads them
    DeviceScan(crate::device_daemon::Args),
    /// Inspect the effective configuration
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConfigAction {
    /// Print the merged configuration (defaults ← file ← KOORD_* env ← flags) as YAML
    Print {
        /// Only print `common` and the sections of these roles
        #[arg(long, value_name = "ROLES", value_parser = parse_roles)]
        role: Option<RoleSet>,
    },
}
