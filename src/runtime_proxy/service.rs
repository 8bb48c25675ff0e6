//! The CRI v1 RuntimeService and ImageService of the proxy: every call goes to the backend
//! runtime; RunPodSandbox, StopPodSandbox, CreateContainer, StartContainer, StopContainer
//! and UpdateContainerResources call the hook servers around it (Koordinator's
//! interceptors), and RemoveContainer forgets the container.

use std::sync::Arc;

use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use super::hooks::{HookFailed, HookType, Hooks};
use super::store::{ContainerInfo, PodInfo, Store};
use super::{merge, proto};

pub struct Proxy {
    pub backend: RuntimeServiceClient<Channel>,
    pub hooks: Arc<Hooks>,
    pub store: Arc<Store>,
    /// Pods labelled `key=value` are never hooked.
    pub skip: (String, String),
}

pub struct Images {
    pub backend: ImageServiceClient<Channel>,
}

fn failed(e: HookFailed) -> Status {
    Status::internal(e.0)
}

pub(crate) fn to_map(
    m: &std::collections::BTreeMap<String, String>,
) -> std::collections::HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn pod_meta(p: &PodInfo) -> proto::PodSandboxMetadata {
    proto::PodSandboxMetadata {
        name: p.name.clone(),
        uid: p.uid.clone(),
        namespace: p.namespace.clone(),
        attempt: p.attempt,
    }
}

fn pod_request(p: &PodInfo) -> proto::PodSandboxHookRequest {
    proto::PodSandboxHookRequest {
        pod_meta: Some(pod_meta(p)),
        runtime_handler: p.runtime_handler.clone(),
        labels: to_map(&p.labels),
        annotations: to_map(&p.annotations),
        cgroup_parent: p.cgroup_parent.clone(),
        overhead: None,
        resources: None,
    }
}

fn container_request(
    c: &ContainerInfo,
    p: &PodInfo,
    id: &str,
) -> proto::ContainerResourceHookRequest {
    use prost::Message;
    proto::ContainerResourceHookRequest {
        pod_meta: Some(pod_meta(p)),
        container_meta: Some(proto::ContainerMetadata {
            name: c.name.clone(),
            attempt: c.attempt,
            id: id.into(),
        }),
        container_annotations: to_map(&c.annotations),
        container_resources: proto::LinuxContainerResources::decode(c.resources.as_slice()).ok(),
        pod_resources: None,
        pod_annotations: to_map(&p.annotations),
        pod_labels: to_map(&p.labels),
        pod_cgroup_parent: p.cgroup_parent.clone(),
        container_envs: to_map(&c.envs),
    }
}

fn pod_info(config: &cri::PodSandboxConfig, handler: &str) -> PodInfo {
    let m = config.metadata.clone().unwrap_or_default();
    PodInfo {
        name: m.name,
        uid: m.uid,
        namespace: m.namespace,
        attempt: m.attempt,
        runtime_handler: handler.into(),
        labels: config.labels.clone().into_iter().collect(),
        annotations: config.annotations.clone().into_iter().collect(),
        cgroup_parent: config
            .linux
            .as_ref()
            .map(|l| l.cgroup_parent.clone())
            .unwrap_or_default(),
    }
}

fn container_info(sandbox_id: &str, config: &cri::ContainerConfig) -> ContainerInfo {
    use prost::Message;
    let m = config.metadata.clone().unwrap_or_default();
    ContainerInfo {
        sandbox_id: sandbox_id.into(),
        name: m.name,
        attempt: m.attempt,
        annotations: config.annotations.clone().into_iter().collect(),
        resources: config
            .linux
            .as_ref()
            .and_then(|l| l.resources.as_ref())
            .map(|r| r.encode_to_vec())
            .unwrap_or_default(),
        envs: config
            .envs
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect(),
    }
}

impl Proxy {
    fn hooked(&self, p: &PodInfo) -> bool {
        p.labels.get(&self.skip.0) != Some(&self.skip.1)
    }

    async fn container_hook(&self, hook: HookType, id: &str) -> Result<(), Status> {
        let Some((c, p)) = self.store.container(id) else {
            return Ok(());
        };
        if self.hooked(&p) {
            self.hooks
                .container(hook, container_request(&c, &p, id))
                .await
                .map_err(failed)?;
        }
        Ok(())
    }
}

/// Methods that go to the backend unchanged. Written as `#[async_trait]` expands them,
/// since that attribute does not see into macro output.
macro_rules! pass {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {$(
        fn $name<'life0, 'async_trait>(
            &'life0 self,
            r: Request<$req>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response<$resp>, Status>> + Send + 'async_trait>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move { self.backend.clone().$name(r.into_inner()).await })
        }
    )*};
}

#[tonic::async_trait]
impl cri::runtime_service_server::RuntimeService for Proxy {
    type GetContainerEventsStream = tonic::codec::Streaming<cri::ContainerEventResponse>;

    pass! {
        version(cri::VersionRequest) -> cri::VersionResponse;
        remove_pod_sandbox(cri::RemovePodSandboxRequest) -> cri::RemovePodSandboxResponse;
        pod_sandbox_status(cri::PodSandboxStatusRequest) -> cri::PodSandboxStatusResponse;
        list_pod_sandbox(cri::ListPodSandboxRequest) -> cri::ListPodSandboxResponse;
        list_containers(cri::ListContainersRequest) -> cri::ListContainersResponse;
        container_status(cri::ContainerStatusRequest) -> cri::ContainerStatusResponse;
        reopen_container_log(cri::ReopenContainerLogRequest) -> cri::ReopenContainerLogResponse;
        exec_sync(cri::ExecSyncRequest) -> cri::ExecSyncResponse;
        exec(cri::ExecRequest) -> cri::ExecResponse;
        attach(cri::AttachRequest) -> cri::AttachResponse;
        port_forward(cri::PortForwardRequest) -> cri::PortForwardResponse;
        container_stats(cri::ContainerStatsRequest) -> cri::ContainerStatsResponse;
        list_container_stats(cri::ListContainerStatsRequest) -> cri::ListContainerStatsResponse;
        pod_sandbox_stats(cri::PodSandboxStatsRequest) -> cri::PodSandboxStatsResponse;
        list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest) -> cri::ListPodSandboxStatsResponse;
        update_runtime_config(cri::UpdateRuntimeConfigRequest) -> cri::UpdateRuntimeConfigResponse;
        status(cri::StatusRequest) -> cri::StatusResponse;
        checkpoint_container(cri::CheckpointContainerRequest) -> cri::CheckpointContainerResponse;
        get_container_events(cri::GetEventsRequest) -> Self::GetContainerEventsStream;
        list_metric_descriptors(cri::ListMetricDescriptorsRequest) -> cri::ListMetricDescriptorsResponse;
        list_pod_sandbox_metrics(cri::ListPodSandboxMetricsRequest) -> cri::ListPodSandboxMetricsResponse;
        runtime_config(cri::RuntimeConfigRequest) -> cri::RuntimeConfigResponse;
    }

    async fn run_pod_sandbox(
        &self,
        r: Request<cri::RunPodSandboxRequest>,
    ) -> Result<Response<cri::RunPodSandboxResponse>, Status> {
        let mut req = r.into_inner();
        let info = pod_info(
            &req.config.clone().unwrap_or_default(),
            &req.runtime_handler,
        );
        if self.hooked(&info) {
            let answer = self
                .hooks
                .pod(HookType::PreRunPodSandbox, pod_request(&info))
                .await
                .map_err(failed)?;
            if let Some(a) = answer {
                merge::run_pod_sandbox(&mut req, &a);
            }
        }
        let info = pod_info(
            &req.config.clone().unwrap_or_default(),
            &req.runtime_handler,
        );
        let resp = self.backend.clone().run_pod_sandbox(req).await?;
        self.store.put_pod(&resp.get_ref().pod_sandbox_id, info);
        Ok(resp)
    }

    async fn stop_pod_sandbox(
        &self,
        r: Request<cri::StopPodSandboxRequest>,
    ) -> Result<Response<cri::StopPodSandboxResponse>, Status> {
        let req = r.into_inner();
        let id = req.pod_sandbox_id.clone();
        let resp = self.backend.clone().stop_pod_sandbox(req).await;
        if let Some(p) = self.store.pod(&id).filter(|p| self.hooked(p)) {
            // Post hooks run even when the runtime failed; their answers are ignored.
            let _ = self
                .hooks
                .pod(HookType::PostStopPodSandbox, pod_request(&p))
                .await;
        }
        if resp.is_ok() {
            self.store.remove_pod(&id);
        }
        resp
    }

    async fn create_container(
        &self,
        r: Request<cri::CreateContainerRequest>,
    ) -> Result<Response<cri::CreateContainerResponse>, Status> {
        let mut req = r.into_inner();
        let pod = self
            .store
            .pod(&req.pod_sandbox_id)
            .unwrap_or_else(|| pod_info(&req.sandbox_config.clone().unwrap_or_default(), ""));
        let config = req.config.clone().unwrap_or_default();
        if self.hooked(&pod) {
            let c = container_info(&req.pod_sandbox_id, &config);
            let answer = self
                .hooks
                .container(
                    HookType::PreCreateContainer,
                    container_request(&c, &pod, ""),
                )
                .await
                .map_err(failed)?;
            if let Some(a) = answer {
                merge::create_container(&mut req, &a);
            }
        }
        let info = container_info(&req.pod_sandbox_id, &req.config.clone().unwrap_or_default());
        let resp = self.backend.clone().create_container(req).await?;
        self.store.put_container(&resp.get_ref().container_id, info);
        Ok(resp)
    }

    async fn start_container(
        &self,
        r: Request<cri::StartContainerRequest>,
    ) -> Result<Response<cri::StartContainerResponse>, Status> {
        let req = r.into_inner();
        let id = req.container_id.clone();
        self.container_hook(HookType::PreStartContainer, &id)
            .await?;
        let resp = self.backend.clone().start_container(req).await;
        let _ = self.container_hook(HookType::PostStartContainer, &id).await;
        resp
    }

    async fn stop_container(
        &self,
        r: Request<cri::StopContainerRequest>,
    ) -> Result<Response<cri::StopContainerResponse>, Status> {
        let req = r.into_inner();
        let id = req.container_id.clone();
        let resp = self.backend.clone().stop_container(req).await;
        let _ = self.container_hook(HookType::PostStopContainer, &id).await;
        resp
    }

    async fn remove_container(
        &self,
        r: Request<cri::RemoveContainerRequest>,
    ) -> Result<Response<cri::RemoveContainerResponse>, Status> {
        let req = r.into_inner();
        let id = req.container_id.clone();
        let resp = self.backend.clone().remove_container(req).await?;
        self.store.remove_container(&id);
        Ok(resp)
    }

    async fn update_container_resources(
        &self,
        r: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Result<Response<cri::UpdateContainerResourcesResponse>, Status> {
        use prost::Message;
        let mut req = r.into_inner();
        let id = req.container_id.clone();
        if let Some((mut c, p)) = self.store.container(&id).filter(|(_, p)| self.hooked(p)) {
            let mut current =
                cri::LinuxContainerResources::decode(c.resources.as_slice()).unwrap_or_default();
            if let Some(asked) = &req.linux {
                merge::resources(&mut current, &merge::to_hook(asked));
            }
            c.resources = current.encode_to_vec();
            let answer = self
                .hooks
                .container(
                    HookType::PreUpdateContainerResources,
                    container_request(&c, &p, &id),
                )
                .await
                .map_err(failed)?;
            if let Some(a) = answer {
                merge::union(&mut req.annotations, &a.container_annotations);
                if let Some(r) = &a.container_resources {
                    merge::resources(&mut current, r);
                }
                req.linux = Some(current.clone());
            }
            c.resources = current.encode_to_vec();
            self.store.put_container(&id, c);
        }
        self.backend.clone().update_container_resources(req).await
    }
}

#[tonic::async_trait]
impl cri::image_service_server::ImageService for Images {
    pass! {
        list_images(cri::ListImagesRequest) -> cri::ListImagesResponse;
        image_status(cri::ImageStatusRequest) -> cri::ImageStatusResponse;
        pull_image(cri::PullImageRequest) -> cri::PullImageResponse;
        remove_image(cri::RemoveImageRequest) -> cri::RemoveImageResponse;
        image_fs_info(cri::ImageFsInfoRequest) -> cri::ImageFsInfoResponse;
    }
}
