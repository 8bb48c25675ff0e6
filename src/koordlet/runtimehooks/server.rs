//! RuntimeHookService as the koordlet serves it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tonic::{Request, Response, Status};

use super::cpuset::CpusetRule;
use super::request;
use super::rules::{ContainerValues, NodeCpus, Rules};
use crate::kernel::Shutdown;
use crate::kernel::hookproto::runtime_hook_service_server::{
    RuntimeHookService, RuntimeHookServiceServer,
};
use crate::kernel::hookproto::{
    ContainerResourceHookRequest, ContainerResourceHookResponse, LinuxContainerResources,
    LinuxDevice, PodSandboxHookRequest, PodSandboxHookResponse,
};
use crate::koordlet::informer::{Informer, PodMeta, States};
use crate::koordlet::metrics::KoordletMetrics;
use crate::os::{CgroupDir, Cgroups, Resource};
use k8s_openapi::api::core::v1::Pod;

/// HAMi-core's settings for the container of `req`, its cache directory made.
fn hami_isolation(
    h: &super::hami::HamiCore,
    req: &ContainerResourceHookRequest,
) -> Result<super::hami::Isolation, Status> {
    let uid = req.pod_meta.as_ref().map_or("", |m| m.uid.as_str());
    let container = req.container_meta.as_ref().map_or("", |m| m.name.as_str());
    let i = super::hami::isolation(h, &req.pod_labels, &req.pod_annotations, uid, container)
        .map_err(|e| Status::failed_precondition(format!("GPUEnvInject: {e}")))?;
    if let Some(dir) = &i.cache_dir {
        super::hami::prepare_cache_dir(dir)
            .map_err(|e| Status::internal(format!("GPUEnvInject: {}: {e}", dir.display())))?;
    }
    Ok(i)
}

/// What PreCreateContainer adds besides resources.
#[derive(Debug, Default)]
pub struct Extras {
    /// GPUEnvInject's `NVIDIA_VISIBLE_DEVICES` and HAMi-core's settings.
    pub env: Vec<(String, String)>,
    /// RDMADeviceInject's devices.
    pub devices: Vec<LinuxDevice>,
    /// HAMi-core's bind mounts (NRI only: the proxy's protocol has no mounts).
    pub mounts: Vec<super::hami::BindMount>,
    /// The Resctrl hook's group for the container (NRI's `rdtClass`), made ready.
    pub rdt_class: Option<String>,
}

pub struct Hooks {
    pub informer: Informer,
    pub rules: Rules,
    pub cgroups: Cgroups,
    /// The node's online CPUs.
    pub cpus: Vec<crate::os::system::CpuInfo>,
    /// The kubelet's CPU manager state (`koordlet.kubelet.cpuManagerStateFile`): its
    /// static-policy pins stay out of the share pools.
    pub kubelet_state: Option<std::path::PathBuf>,
    /// Where RDMADeviceInject finds the devices.
    pub device_roots: super::rdma::Roots,
    /// Where each hook's duration goes (`koordlet_runtime_hook_invoked_duration_milliseconds`)
    /// and the node it is labelled with.
    pub observed: Option<(Arc<KoordletMetrics>, String)>,
    /// HAMi-core isolation within GPUEnvInject (its library and the monitor gate).
    pub hami: Option<super::hami::HamiCore>,
    /// The Resctrl gate: the host whose resctrl root a pod's own group is made in.
    pub resctrl: Option<crate::os::system::Host>,
    bvt_missing: AtomicBool,
}

impl Hooks {
    pub fn new(
        informer: Informer,
        rules: Rules,
        cgroups: Cgroups,
        cpus: Vec<crate::os::system::CpuInfo>,
    ) -> Hooks {
        Hooks {
            informer,
            rules,
            cgroups,
            cpus,
            kubelet_state: None,
            device_roots: Default::default(),
            hami: None,
            resctrl: None,
            observed: None,
            bvt_missing: AtomicBool::new(false),
        }
    }

    /// The node state and the informer's copy of the pod with this uid, if it has one
    /// (one snapshot for both).
    fn known(&self, uid: &str) -> (States, Option<PodMeta>) {
        let states = self.informer.snapshot();
        let pod = states.pods.iter().find(|p| p.uid == uid).cloned();
        (states, pod)
    }

    /// Runs one hook and records its duration under Koordinator's hook and stage names.
    fn timed<T>(
        &self,
        hook: &str,
        stage: &str,
        run: impl FnOnce() -> Result<T, Status>,
    ) -> Result<T, Status> {
        let start = Instant::now();
        let out = run();
        if let Some((m, node)) = &self.observed {
            m.ops
                .hook_invoked(node, hook, stage, out.is_ok(), start.elapsed());
        }
        out
    }

    /// What the hooks decide for a container (BatchResource, CPUSetAllocator), from the
    /// request and, for what it lacks, the informer's copy of the pod.
    pub fn container_values(
        &self,
        req: &ContainerResourceHookRequest,
        stage: &str,
    ) -> Option<ContainerValues> {
        let uid = req.pod_meta.as_ref()?.uid.as_str();
        let name = req.container_meta.as_ref()?.name.as_str();
        let (states, known) = self.known(uid);
        let pod = request::container_pod(req, known.as_ref().map(|p| &*p.pod))?;
        let mut v = ContainerValues::default();
        if self.rules.batch_resource {
            let _ = self.timed("BatchResource", stage, || {
                Rules::batch(&pod, name, &states, &mut v);
                Ok(())
            });
        }
        if self.rules.cpuset {
            v.cpuset = self
                .timed("CPUSetAllocator", stage, || {
                    let cpus =
                        NodeCpus::read(&self.cpus, self.kubelet_state.as_deref(), &states.pods);
                    CpusetRule::from_node(&states, &cpus, self.rules.be_cpu_manager)
                        .container_cpuset(&pod)
                        .map_err(|e| Status::invalid_argument(format!("CPUSetAllocator: {e}")))
                })
                .unwrap_or_default();
            if self.rules.unsets_quota(&pod) {
                v.cfs_quota = Some(-1);
            }
        }
        Some(v)
    }

    /// The container's resources with the hooks' values in (the proxy expects complete
    /// resources back: cpusets are always replaced).
    pub fn container_answer(
        &self,
        req: &ContainerResourceHookRequest,
        stage: &str,
    ) -> Option<LinuxContainerResources> {
        let v = self.container_values(req, stage)?;
        let mut r = req.container_resources.clone().unwrap_or_default();
        if let Some(s) = v.cpu_shares {
            r.cpu_shares = s;
        }
        if let Some(q) = v.cfs_quota {
            r.cpu_quota = q;
            if r.cpu_period <= 0 {
                r.cpu_period = 100_000;
            }
        }
        if let Some(m) = v.memory_limit.filter(|m| *m > 0) {
            r.memory_limit_in_bytes = m;
        }
        if let Some(c) = v.cpuset {
            r.cpuset_cpus = c;
        }
        Some(r)
    }

    /// What PreCreateContainer adds besides resources: with GPUEnvInject, the
    /// `NVIDIA_VISIBLE_DEVICES` env; with RDMADeviceInject, the RDMA devices (an error when
    /// the allocated ones are missing, as Koordinator).
    pub fn container_extras(
        &self,
        req: &ContainerResourceHookRequest,
        stage: &str,
    ) -> Result<Extras, Status> {
        if stage != "PreCreateContainer" {
            return Ok(Extras::default());
        }
        let mut extras = Extras::default();
        if self.rules.gpu_env_inject {
            extras.env.extend(self.timed("gpu env inject", stage, || {
                Ok(self.rules.gpu_env(&req.pod_annotations))
            })?);
            if let Some(h) = &self.hami {
                let i = self.timed("gpu env inject", stage, || hami_isolation(h, req))?;
                extras.env.extend(i.envs);
                extras.mounts = i.mounts;
            }
        }
        if let Some(host) = &self.resctrl {
            extras.rdt_class = self.timed("Resctrl", stage, || {
                crate::koordlet::qos::resctrlpod::ready_group(host, req)
                    .map_err(|e| Status::failed_precondition(format!("Resctrl: {e}")))
            })?;
        }
        if self.rules.rdma_device_inject {
            extras.devices = self.timed("rdma device inject", stage, || {
                super::rdma::devices(&req.pod_annotations, &self.device_roots)
                    .map_err(|e| Status::failed_precondition(format!("RDMADeviceInject: {e}")))
            })?;
        }
        Ok(extras)
    }

    /// The whole answer to a container hook in proxy mode: resources (see
    /// `container_answer`) and the extras; envs are replaced whole by the proxy, so the
    /// request's are echoed with the injected one.
    pub fn container_response(
        &self,
        req: &ContainerResourceHookRequest,
        stage: &str,
    ) -> Result<ContainerResourceHookResponse, Status> {
        let mut resp = ContainerResourceHookResponse {
            container_resources: self.container_answer(req, stage),
            ..Default::default()
        };
        let extras = self.container_extras(req, stage)?;
        if !extras.env.is_empty() {
            resp.container_envs = req.container_envs.clone();
            resp.container_envs.extend(extras.env);
        }
        resp.container_devices = extras.devices;
        Ok(resp)
    }

    /// PreRunPodSandbox: GroupIdentity's bvt and CPUSetAllocator's quota lifting on the
    /// pod cgroup. Failure policy Ignore, as Koordinator's default: the sandbox still runs.
    pub fn pre_run_pod_sandbox(&self, req: &PodSandboxHookRequest) {
        if self.rules.group_identity {
            let _ = self.timed("GroupIdentity", "PreRunPodSandbox", || self.set_bvt(req));
        }
        if self.rules.cpuset {
            let _ = self.timed("CPUSetAllocator", "PreRunPodSandbox", || {
                self.unset_pod_quota(req)
            });
        }
    }

    /// The pod a sandbox request is for and its cgroup: the runtime's cgroup parent
    /// (cgroupfs paths), else where the kubelet put the pod when the informer knows it.
    fn sandbox(&self, req: &PodSandboxHookRequest) -> Option<(States, Pod, CgroupDir)> {
        let uid = req.pod_meta.as_ref()?.uid.as_str();
        let (states, known) = self.known(uid);
        let pod = request::sandbox_pod(req, known.as_ref().map(|p| &*p.pod))?;
        let dir = match (req.cgroup_parent.as_str(), &known) {
            (p, _) if p.starts_with('/') => CgroupDir::new(p),
            (_, Some(k)) => k.dir.clone(),
            (_, None) => return None,
        };
        Some((states, pod, dir))
    }

    /// CPUSetAllocator at PreRunPodSandbox: a pinned pod's cgroup loses its CFS quota.
    fn unset_pod_quota(&self, req: &PodSandboxHookRequest) -> Result<(), Status> {
        let Some((_, pod, dir)) = self.sandbox(req) else {
            return Ok(());
        };
        if !self.rules.unsets_quota(&pod) {
            return Ok(());
        }
        self.cgroups
            .write(Resource::CfsQuota, &dir, "-1")
            .map_err(|e| Status::internal(format!("CPUSetAllocator: {e}")))
    }

    /// GroupIdentity: the pod cgroup's bvt, where the kernel has it.
    fn set_bvt(&self, req: &PodSandboxHookRequest) -> Result<(), Status> {
        let Some((states, pod, dir)) = self.sandbox(req) else {
            return Ok(());
        };
        let Some(bvt) = self.rules.pod_bvt(&pod, &states) else {
            return Ok(());
        };
        let file = self.cgroups.file(Resource::BvtWarpNs, &dir);
        if !Path::new(&file).exists() {
            if !self.bvt_missing.swap(true, Ordering::Relaxed) {
                tracing::warn!(file = %file.display(), "GroupIdentity: this kernel has no cpu.bvt_warp_ns; bvt is not set");
            }
            return Ok(());
        }
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.cgroups
            .write(Resource::BvtWarpNs, &dir, &bvt.to_string())
            .map_err(|e| {
                tracing::warn!(pod = %name, error = %e, "GroupIdentity: writing bvt failed");
                Status::internal(format!("GroupIdentity: {e}"))
            })
    }
}

type R<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl RuntimeHookService for Arc<Hooks> {
    async fn pre_run_pod_sandbox_hook(
        &self,
        r: Request<PodSandboxHookRequest>,
    ) -> R<PodSandboxHookResponse> {
        self.pre_run_pod_sandbox(r.get_ref());
        Ok(Response::new(PodSandboxHookResponse::default()))
    }
    async fn post_stop_pod_sandbox_hook(
        &self,
        _r: Request<PodSandboxHookRequest>,
    ) -> R<PodSandboxHookResponse> {
        Ok(Response::new(PodSandboxHookResponse::default()))
    }
    async fn pre_create_container_hook(
        &self,
        r: Request<ContainerResourceHookRequest>,
    ) -> R<ContainerResourceHookResponse> {
        self.container_response(r.get_ref(), "PreCreateContainer")
            .map(Response::new)
    }
    async fn pre_start_container_hook(
        &self,
        _r: Request<ContainerResourceHookRequest>,
    ) -> R<ContainerResourceHookResponse> {
        Ok(Response::new(ContainerResourceHookResponse::default()))
    }
    async fn post_start_container_hook(
        &self,
        _r: Request<ContainerResourceHookRequest>,
    ) -> R<ContainerResourceHookResponse> {
        Ok(Response::new(ContainerResourceHookResponse::default()))
    }
    async fn post_stop_container_hook(
        &self,
        _r: Request<ContainerResourceHookRequest>,
    ) -> R<ContainerResourceHookResponse> {
        Ok(Response::new(ContainerResourceHookResponse::default()))
    }
    async fn pre_update_container_resources_hook(
        &self,
        r: Request<ContainerResourceHookRequest>,
    ) -> R<ContainerResourceHookResponse> {
        self.container_response(r.get_ref(), "PreUpdateContainerResources")
            .map(Response::new)
    }
}

/// Serves the hooks on `socket` until the process drains; the socket and the registration
/// file are removed at the end.
pub async fn serve(
    cfg: super::Config,
    hooks: Arc<Hooks>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    // 0600: the callers (the runtime proxy, the embedded node runtime) run as root.
    let listener = crate::kernel::listen::bind_unix(&cfg.socket, 0o600).map_err(|e| {
        anyhow::anyhow!("runtime hooks: listening on {}: {e}", cfg.socket.display())
    })?;
    let registered = super::register(&cfg);
    tracing::info!(socket = %cfg.socket.display(), registered = ?registered, "koordlet runtime hook server listening");
    let incoming = crate::kernel::listen::local_grpc_incoming(listener, "runtime-hooks");
    let served = tonic::transport::Server::builder()
        .add_service(RuntimeHookServiceServer::new(hooks))
        .serve_with_incoming_shutdown(incoming, async move { shutdown.draining().await })
        .await;
    if let Some(f) = registered {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_file(&cfg.socket);
    served.map_err(Into::into)
}
