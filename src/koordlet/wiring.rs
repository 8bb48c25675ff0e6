//! How `run` puts the koordlet together: the host parts it measures and enforces on
//! (cgroups, the rooted host, the metric store, the pod informer), the reporters beside
//! the measuring (devices, node topology, runtime hooks, the pod-resources proxy), and the
//! loops (collect, report, store GC, QoS, prediction).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use super::advisor::Advisor;
use super::informer::{self, Informer, PodSource};
use super::measure::{LoopCtx, collect_loop, gc_loop, prediction_loop, report_loop};
use super::metrics::KoordletMetrics;
use super::prediction::{self, Predictor};
use super::store::{MetricStore, StoreOptions};
use super::{
    Config, audit, collectors, devices, features, kubelet_access, podresources, qos, runtimehooks,
    topology, usage_series,
};
use crate::kernel::RoleCtx;
use crate::os::Cgroups;
use crate::os::system::Host;

/// The API server, once reachable and once the koordlet's permissions settled; None when
/// the process drains first.
pub(super) async fn settle(ctx: &RoleCtx) -> anyhow::Result<Option<kube::Client>> {
    let cluster = ctx.cluster()?.clone();
    if !crate::kernel::cluster::wait_reachable(&cluster.client, &ctx.shutdown).await {
        return Ok(None);
    }
    let settled = crate::kernel::access::settle(
        &cluster.client,
        "koordlet",
        super::access::NEEDS,
        "",
        &ctx.ready,
        &ctx.shutdown,
    );
    Ok(settled.await.map(|_| cluster.client))
}

/// What the koordlet works on, opened once.
pub(super) struct Parts {
    node: String,
    client: kube::Client,
    cgroups: Cgroups,
    host: Host,
    store: Arc<MetricStore>,
    metrics: Arc<KoordletMetrics>,
    informer: Informer,
    gates: features::Gates,
}

impl Parts {
    pub(super) fn open(cfg: &Config, ctx: &RoleCtx, client: kube::Client) -> anyhow::Result<Parts> {
        let node = ctx.common.node_name.clone();
        let cgroups = open_cgroups(cfg)?;
        let store = open_store(cfg, ctx)?;
        let metrics = KoordletMetrics::register(&ctx.metrics);
        tracing::info!(%node, version = ?cgroups.version(), driver = ?cgroups.driver(), pods = ?cfg.kubelet.pods_url, "koordlet starting");
        let kind = &cfg.kubelet.preferred_address_type;
        if !kubelet_access::ADDRESS_TYPES.contains(&kind.as_str()) {
            tracing::warn!(%kind, "kubelet.preferredAddressType is not a node address type; InternalIP will be used");
        }
        let informer = informer::start(
            client.clone(),
            &node,
            cgroups.clone(),
            pod_source(cfg, &metrics),
            &ctx.tasks,
            &ctx.shutdown,
        );
        metrics.started(&node);
        let gates = features::KOORDLET_GATES.from_user(&cfg.feature_gates);
        ctx.report_unsupported(&features::KOORDLET_GATES.unsupported(&cfg.feature_gates));
        Ok(Parts {
            node,
            client,
            cgroups,
            host: Host::new(&cfg.proc_root, &cfg.sys_root),
            store,
            metrics,
            informer,
            gates,
        })
    }

    /// What reports beside the measuring: audit events, the pod-resources proxy, the node's
    /// devices and topology, and the runtime hook server.
    pub(super) fn spawn_reporters(&self, cfg: &Config, ctx: &RoleCtx) {
        let on = |g| self.gates.on(g);
        audit::http::start(
            &cfg.audit,
            on(features::AUDIT_EVENTS),
            on(features::AUDIT_EVENTS_HTTP_HANDLER),
        );
        if on(features::POD_RESOURCES_PROXY) {
            let upstream = cfg.kubelet.root_dir.join("pod-resources/kubelet.sock");
            let proxy = podresources::Proxy::new(upstream, self.informer.clone());
            let (dir, sd) = (cfg.pod_resources_proxy_path.clone(), ctx.shutdown.clone());
            ctx.tasks.spawn("koordlet/pod-resources-proxy", async move {
                podresources::serve(&dir, proxy, sd).await
            });
        }
        let kinds = devices::Kinds {
            gpus: on(features::ACCELERATORS),
            rdma: on(features::RDMA_DEVICES),
        };
        if kinds.gpus || kinds.rdma {
            let (c, i, h) = (
                self.client.clone(),
                self.informer.clone(),
                self.host.clone(),
            );
            let (d, s) = ((cfg.devices.clone(), kinds), ctx.shutdown.clone());
            ctx.tasks.spawn("koordlet/devices", async move {
                devices::report_loop(c, i, h, d, s).await;
                Ok(())
            });
        }
        if on(features::NODE_TOPOLOGY_REPORT) {
            let (c, i, h) = (
                self.client.clone(),
                self.informer.clone(),
                self.host.clone(),
            );
            let f = (
                cfg.kubelet.clone(),
                self.metrics.clone(),
                on(features::PER_CPU_METRIC),
            );
            let s = ctx.shutdown.clone();
            ctx.tasks.spawn("koordlet/node-topology", async move {
                topology::report_loop(c, i, h, f, s).await;
                Ok(())
            });
        }
        if cfg.runtime_hooks.enabled {
            start_runtime_hooks(cfg, self, ctx);
        }
    }

    /// The loops: collect, report the NodeMetric, the store's GC, the QoS strategies and
    /// peak prediction.
    pub(super) fn spawn_loops(self, cfg: Config, ctx: &RoleCtx) -> anyhow::Result<()> {
        let loop_ctx = LoopCtx {
            informer: self.informer.clone(),
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            usage: usage_series::UsageSeries::register(&ctx.metrics),
            shutdown: ctx.shutdown.clone(),
            node: self.node.clone(),
        };
        let base = Duration::from_secs(cfg.collectors.collect_res_used_interval_seconds.max(1));
        let advisor = Advisor::new(
            self.collectors(&cfg),
            self.host.clone(),
            self.cgroups.clone(),
        );
        let (synced, collected) = (
            ctx.ready.child("informer"),
            ctx.ready.child("first-collection"),
        );
        let l = loop_ctx.clone();
        ctx.tasks.spawn("koordlet/collect", async move {
            collect_loop(l, advisor, base, synced, collected).await
        });
        let predictor = Arc::new(Mutex::new(Predictor::new(cfg.prediction.clone())));
        let (l, client, rc, p) = (
            loop_ctx.clone(),
            self.client.clone(),
            cfg.reporter.clone(),
            predictor.clone(),
        );
        let predicting = cfg.prediction.enabled;
        ctx.tasks.spawn("koordlet/report", async move {
            report_loop(l, client, rc, p, predicting).await
        });
        let (l, every) = (
            loop_ctx.clone(),
            Duration::from_secs(cfg.store.gc_interval_seconds.max(1)),
        );
        ctx.tasks
            .spawn("koordlet/store-gc", async move { gc_loop(l, every).await });
        let l = loop_ctx.clone();
        qos::registry::spawn(
            &self.gates,
            move || l.qos(),
            self.qos_deps(&cfg, base),
            &ctx.tasks,
        );
        if predicting {
            let checkpoints = checkpoints(&cfg.prediction, &self.store)?;
            ctx.tasks.spawn("koordlet/prediction", async move {
                prediction_loop(loop_ctx, predictor, checkpoints).await
            });
        }
        Ok(())
    }

    fn collectors(&self, cfg: &Config) -> Vec<Box<dyn collectors::Collector>> {
        let on = |g| self.gates.on(g);
        let gated = collectors::Gated {
            psi: on(features::PSI_COLLECTOR),
            cpi: on(features::CPI_COLLECTOR),
            resctrl: on(features::RESCTRL_COLLECTOR),
            cold_page: on(features::COLD_PAGE_COLLECTOR),
        };
        let nvml = on(features::ACCELERATORS).then_some(cfg.devices.nvml_library.as_str());
        collectors::registry(&cfg.collectors, gated, nvml)
    }

    /// What every QoS strategy is built from.
    fn qos_deps(&self, cfg: &Config, collect_interval: Duration) -> qos::context::Deps {
        let mut executor =
            qos::executor::Executor::new(self.cgroups.clone(), Duration::from_secs(60));
        executor.observed = Some(self.metrics.clone());
        let mut evictor = qos::evictor::Evictor::new(
            cfg.eviction.only_evict_by_api,
            qos::evictor::Runtimes {
                endpoint: cfg.eviction.runtime_endpoint.clone(),
                var_run: cfg.eviction.var_run_root.clone(),
            },
        );
        evictor.metrics = self.metrics.clone();
        qos::context::Deps {
            executor: Arc::new(executor),
            host: self.host.clone(),
            client: self.client.clone(),
            collect_interval,
            unset_cpu_quota: !cfg.runtime_hooks.disable_unset_cpu_quota,
            kubelet_state: cfg.kubelet.cpu_manager_state_file.clone(),
            be_cpu_manager: self.gates.on(features::BECPU_MANAGER),
            core_sched: self.gates.on(features::CORE_SCHED),
            kubelet_root: cfg.kubelet.root_dir.clone(),
            evictor: Arc::new(evictor),
            storage_info_interval: Duration::from_secs(
                cfg.collectors.node_storage_info_interval_seconds.max(1),
            ),
        }
    }
}

/// The node's cgroups: the version found under the root, the driver configured or found.
fn open_cgroups(cfg: &Config) -> anyhow::Result<Cgroups> {
    let found = Cgroups::detect(
        &cfg.cgroup_root,
        &cfg.cgroup_parent,
        cfg.cgroup_driver.unwrap_or_default(),
    )
    .with_context(|| format!("koordlet.cgroupRoot {}", cfg.cgroup_root.display()))?;
    Ok(match cfg.cgroup_driver {
        Some(d) => Cgroups::new(&cfg.cgroup_root, found.version(), d, &cfg.cgroup_parent),
        None => found,
    })
}

/// The metric store under `store.path` (default `<dataDir>/koordlet/metrics`), private.
fn open_store(cfg: &Config, ctx: &RoleCtx) -> anyhow::Result<Arc<MetricStore>> {
    let dir = (cfg.store.path.clone())
        .unwrap_or_else(|| ctx.common.data_dir.join("koordlet").join("metrics"));
    crate::os::files::private_dir(&dir)?;
    let opts = StoreOptions {
        retention: Duration::from_secs(cfg.store.retention_hours * 3600),
        max_disk_bytes: cfg.store.max_disk_mib << 20,
        cache_bytes: cfg.store.cache_mib << 20,
        ..StoreOptions::default()
    };
    let store = MetricStore::open(&dir, opts)
        .with_context(|| format!("opening the metric store at {}", dir.display()))?;
    // sled creates its files with the umask.
    crate::os::files::restrict_tree(&dir)?;
    Ok(Arc::new(store))
}

/// Where the node's pods come from: the kubelet's pod list, or the API server.
fn pod_source(cfg: &Config, metrics: &KoordletMetrics) -> PodSource {
    match &cfg.kubelet.pods_url {
        Some(url) => PodSource::Kubelet(informer::pods::KubeletPods {
            url: url.clone(),
            token_file: Some(cfg.kubelet.token_file.clone()),
            sync_interval: Duration::from_secs(cfg.kubelet.sync_interval_seconds.max(1)),
            timeout: Duration::from_secs(cfg.kubelet.timeout_seconds.max(1)),
            requests: Some(metrics.ops.kubelet_requests.clone()),
            wake: None,
        }),
        None => PodSource::Api,
    }
}

/// Where prediction models are kept: `checkpointDir`, or the metric store.
fn checkpoints(
    cfg: &prediction::Config,
    store: &Arc<MetricStore>,
) -> anyhow::Result<Arc<dyn prediction::checkpoints::Checkpoints>> {
    Ok(match &cfg.checkpoint_dir {
        Some(dir) => Arc::new(prediction::checkpoints::CheckpointDir::open(dir)?),
        None => store.clone(),
    })
}

/// The runtime hook server (proxy mode). Failing to listen (no root, read-only /var/run)
/// leaves the koordlet running without hooks, loudly.
fn start_runtime_hooks(cfg: &Config, parts: &Parts, ctx: &RoleCtx) {
    let (gates, host) = (&parts.gates, &parts.host);
    let rules = runtimehooks::rules::Rules {
        batch_resource: gates.on(features::BATCH_RESOURCE),
        cpuset: gates.on(features::CPU_SET_ALLOCATOR),
        group_identity: gates.on(features::GROUP_IDENTITY),
        gpu_env_inject: gates.on(features::GPU_ENV_INJECT),
        rdma_device_inject: gates.on(features::RDMA_DEVICE_INJECT),
        be_cpu_manager: gates.on(features::BECPU_MANAGER),
        unset_cpu_quota: !cfg.runtime_hooks.disable_unset_cpu_quota,
    };
    let cpus = host.cpu_topology().unwrap_or_default();
    let (informer, cgroups) = (parts.informer.clone(), parts.cgroups.clone());
    let mut hooks = runtimehooks::server::Hooks::new(informer, rules, cgroups, cpus);
    hooks.device_roots.sys = host.sys_root.clone();
    hooks.kubelet_state = Some(cfg.kubelet.cpu_manager_state_file.clone());
    hooks.observed = Some((parts.metrics.clone(), parts.node.clone()));
    hooks.resctrl = gates.on(features::RESCTRL).then(|| host.clone());
    hooks.hami = Some(runtimehooks::hami::HamiCore {
        library: cfg.runtime_hooks.hami_core_library_path.clone(),
        monitor: gates.on(features::HAMI_CORE_VGPU_MONITOR),
    });
    let hooks = Arc::new(hooks);
    if cfg.runtime_hooks.nri.enabled {
        let nri = cfg.runtime_hooks.nri.clone();
        let socket = runtimehooks::nri::socket(&nri, &cfg.eviction.var_run_root);
        let plugin = runtimehooks::nri::plugin::Plugin {
            hooks: hooks.clone(),
            fail: cfg
                .runtime_hooks
                .failure_policy
                .eq_ignore_ascii_case("Fail"),
        };
        let shutdown = ctx.shutdown.clone();
        ctx.tasks.spawn("koordlet/nri", async move {
            runtimehooks::nri::run(nri, socket, plugin, shutdown).await;
            Ok(())
        });
    }
    let (hc, shutdown) = (cfg.runtime_hooks.clone(), ctx.shutdown.clone());
    ctx.tasks.spawn("koordlet/runtime-hooks", async move {
        if let Err(e) = runtimehooks::server::serve(hc, hooks, shutdown).await {
            tracing::warn!(error = %e, "koordlet runtime hooks not served: BatchResource applies only through its QoS loop, after containers start; GroupIdentity and CPUSetAllocator do nothing");
        }
        Ok(())
    });
}
