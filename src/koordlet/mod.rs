//! koordlet: the node agent. It measures (host metrics through the rooted host layer, a
//! sled time-series store, the NodeMetric reporter, peak prediction: `measure.rs`) and
//! enforces (the QoS strategies: `qos/`). `run` wires them together.

pub mod access;
pub mod advisor;
pub mod audit;
pub mod collectors;
mod config;
pub mod configz;
pub mod devices;
pub mod features;
pub mod gpu_health;
mod grid;
pub mod informer;
pub mod kubelet_access;
pub mod kubeletconfig;
mod measure;
pub mod metrics;
pub mod pleg;
pub mod podresources;
pub mod prediction;
pub mod qos;
pub mod reporter;
pub mod runtimehooks;
pub mod store;
pub mod topology;
mod topology_merge;
mod upsert;
pub mod usage_series;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use crate::kernel::RoleCtx;
use crate::os::Cgroups;
use crate::os::system::Host;
use advisor::Advisor;
use informer::PodSource;
use measure::{LoopCtx, collect_loop, gc_loop, prediction_loop, report_loop};
use metrics::KoordletMetrics;
use prediction::Predictor;
use store::{MetricStore, StoreOptions};

pub use config::{Config, EvictionConfig, ReporterConfig, StoreConfig, validate};
pub use kubelet_access::KubeletConfig;

/// Runs the koordlet until the process drains.
pub async fn run(cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    let cluster = ctx.cluster()?.clone();
    if !crate::kernel::cluster::wait_reachable(&cluster.client, &ctx.shutdown).await {
        return Ok(());
    }
    let settled = crate::kernel::access::settle(
        &cluster.client,
        "koordlet",
        access::NEEDS,
        "",
        &ctx.ready,
        &ctx.shutdown,
    );
    if settled.await.is_none() {
        return Ok(());
    }
    let node = ctx.common.node_name.clone();
    let mut cgroups = Cgroups::detect(
        &cfg.cgroup_root,
        &cfg.cgroup_parent,
        cfg.cgroup_driver.unwrap_or_default(),
    )
    .with_context(|| format!("koordlet.cgroupRoot {}", cfg.cgroup_root.display()))?;
    if let Some(d) = cfg.cgroup_driver {
        cgroups = Cgroups::new(&cfg.cgroup_root, cgroups.version(), d, &cfg.cgroup_parent);
    }
    let host = Host::new(&cfg.proc_root, &cfg.sys_root);
    let store_dir = (cfg.store.path.clone())
        .unwrap_or_else(|| ctx.common.data_dir.join("koordlet").join("metrics"));
    crate::os::files::private_dir(&store_dir)?;
    let opts = StoreOptions {
        retention: Duration::from_secs(cfg.store.retention_hours * 3600),
        max_disk_bytes: cfg.store.max_disk_mib << 20,
        cache_bytes: cfg.store.cache_mib << 20,
        ..StoreOptions::default()
    };
    let store = Arc::new(
        MetricStore::open(&store_dir, opts)
            .with_context(|| format!("opening the metric store at {}", store_dir.display()))?,
    );
    // sled creates its files with the umask.
    crate::os::files::restrict_tree(&store_dir)?;
    let metrics = KoordletMetrics::register(&ctx.metrics);
    let source = match &cfg.kubelet.pods_url {
        Some(url) => PodSource::Kubelet(informer::pods::KubeletPods {
            url: url.clone(),
            token_file: Some(cfg.kubelet.token_file.clone()),
            sync_interval: Duration::from_secs(cfg.kubelet.sync_interval_seconds.max(1)),
            timeout: Duration::from_secs(cfg.kubelet.timeout_seconds.max(1)),
            requests: Some(metrics.ops.kubelet_requests.clone()),
            wake: None,
        }),
        None => PodSource::Api,
    };
    tracing::info!(%node, version = ?cgroups.version(), driver = ?cgroups.driver(), pods = ?cfg.kubelet.pods_url, "koordlet starting");
    let kind = &cfg.kubelet.preferred_address_type;
    if !kubelet_access::ADDRESS_TYPES.contains(&kind.as_str()) {
        tracing::warn!(%kind, "kubelet.preferredAddressType is not a node address type; InternalIP will be used");
    }
    let informer = informer::start(
        cluster.client.clone(),
        &node,
        cgroups.clone(),
        source,
        &ctx.tasks,
        &ctx.shutdown,
    );
    metrics.started(&node);
    let gates = features::KOORDLET_GATES.from_user(&cfg.feature_gates);
    ctx.report_unsupported(&features::KOORDLET_GATES.unsupported(&cfg.feature_gates));
    audit::http::start(
        &cfg.audit,
        gates.on(features::AUDIT_EVENTS),
        gates.on(features::AUDIT_EVENTS_HTTP_HANDLER),
    );
    let gated = collectors::Gated {
        psi: gates.on(features::PSI_COLLECTOR),
        cpi: gates.on(features::CPI_COLLECTOR),
        resctrl: gates.on(features::RESCTRL_COLLECTOR),
        cold_page: gates.on(features::COLD_PAGE_COLLECTOR),
    };
    let collectors = collectors::registry(
        &cfg.collectors,
        gated,
        gates
            .on(features::ACCELERATORS)
            .then_some(cfg.devices.nvml_library.as_str()),
    );
    if gates.on(features::POD_RESOURCES_PROXY) {
        let upstream = cfg.kubelet.root_dir.join("pod-resources/kubelet.sock");
        let proxy = podresources::Proxy::new(upstream, informer.clone());
        let (dir, sd) = (cfg.pod_resources_proxy_path.clone(), ctx.shutdown.clone());
        ctx.tasks.spawn("koordlet/pod-resources-proxy", async move {
            podresources::serve(&dir, proxy, sd).await
        });
    }
    let qos_host = host.clone();
    let mut executor = qos::executor::Executor::new(cgroups.clone(), Duration::from_secs(60));
    executor.observed = Some(metrics.clone());
    let executor = Arc::new(executor);
    let kinds = devices::Kinds {
        gpus: gates.on(features::ACCELERATORS),
        rdma: gates.on(features::RDMA_DEVICES),
    };
    if kinds.gpus || kinds.rdma {
        let (c, i, h, d, s) = (
            cluster.client.clone(),
            informer.clone(),
            host.clone(),
            (cfg.devices.clone(), kinds),
            ctx.shutdown.clone(),
        );
        ctx.tasks.spawn("koordlet/devices", async move {
            devices::report_loop(c, i, h, d, s).await;
            Ok(())
        });
    }
    if gates.on(features::NODE_TOPOLOGY_REPORT) {
        let (c, i, h, f, s) = (
            cluster.client.clone(),
            informer.clone(),
            host.clone(),
            cfg.kubelet.clone(),
            ctx.shutdown.clone(),
        );
        let m = metrics.clone();
        let per_cpu = gates.on(features::PER_CPU_METRIC);
        ctx.tasks.spawn("koordlet/node-topology", async move {
            topology::report_loop(c, i, h, (f, m, per_cpu), s).await;
            Ok(())
        });
    }
    if cfg.runtime_hooks.enabled {
        let observed = (metrics.clone(), node.clone());
        start_runtime_hooks(
            &cfg,
            &gates,
            &host,
            &cgroups,
            informer.clone(),
            &ctx,
            observed,
        );
    }
    let advisor = Advisor::new(collectors, host, cgroups);
    let predictor = Arc::new(Mutex::new(Predictor::new(cfg.prediction.clone())));
    let synced = ctx.ready.child("informer");
    let collected = ctx.ready.child("first-collection");

    let loop_ctx = LoopCtx {
        informer: informer.clone(),
        store: store.clone(),
        metrics: metrics.clone(),
        usage: usage_series::UsageSeries::register(&ctx.metrics),
        shutdown: ctx.shutdown.clone(),
        node: node.clone(),
    };
    let base = Duration::from_secs(cfg.collectors.collect_res_used_interval_seconds.max(1));
    let l = loop_ctx.clone();
    ctx.tasks.spawn("koordlet/collect", async move {
        collect_loop(l, advisor, base, synced, collected).await
    });
    let (l, client, rc, p) = (
        loop_ctx.clone(),
        cluster.client.clone(),
        cfg.reporter.clone(),
        predictor.clone(),
    );
    ctx.tasks.spawn("koordlet/report", async move {
        report_loop(l, client, rc, p, cfg.prediction.enabled).await
    });
    let (l, every) = (
        loop_ctx.clone(),
        Duration::from_secs(cfg.store.gc_interval_seconds.max(1)),
    );
    ctx.tasks
        .spawn("koordlet/store-gc", async move { gc_loop(l, every).await });
    let mut evictor = qos::evictor::Evictor::new(
        cfg.eviction.only_evict_by_api,
        qos::evictor::Runtimes {
            endpoint: cfg.eviction.runtime_endpoint.clone(),
            var_run: cfg.eviction.var_run_root.clone(),
        },
    );
    evictor.metrics = metrics.clone();
    let deps = qos::context::Deps {
        executor,
        host: qos_host,
        client: cluster.client.clone(),
        collect_interval: base,
        unset_cpu_quota: !cfg.runtime_hooks.disable_unset_cpu_quota,
        kubelet_state: cfg.kubelet.cpu_manager_state_file.clone(),
        be_cpu_manager: gates.on(features::BECPU_MANAGER),
        core_sched: gates.on(features::CORE_SCHED),
        kubelet_root: cfg.kubelet.root_dir.clone(),
        evictor: Arc::new(evictor),
        storage_info_interval: Duration::from_secs(
            cfg.collectors.node_storage_info_interval_seconds.max(1),
        ),
    };
    let l = loop_ctx.clone();
    qos::registry::spawn(&gates, move || l.qos(), deps, &ctx.tasks);
    if cfg.prediction.enabled {
        let l = loop_ctx.clone();
        let checkpoints = checkpoints(&cfg.prediction, &store)?;
        ctx.tasks.spawn("koordlet/prediction", async move {
            prediction_loop(l, predictor, checkpoints).await
        });
    }
    ctx.ready.set(true);
    ctx.shutdown.draining().await;
    Ok(())
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
fn start_runtime_hooks(
    cfg: &Config,
    gates: &features::Gates,
    host: &Host,
    cgroups: &Cgroups,
    informer: informer::Informer,
    ctx: &RoleCtx,
    observed: (Arc<KoordletMetrics>, String),
) {
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
    let mut hooks = runtimehooks::server::Hooks::new(informer, rules, cgroups.clone(), cpus);
    hooks.device_roots.sys = host.sys_root.clone();
    hooks.kubelet_state = Some(cfg.kubelet.cpu_manager_state_file.clone());
    hooks.observed = Some(observed);
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
