//! The latency koord-runtime-proxy adds to a CRI call (budget: ≤ 1 ms at p99), in one
//! process over unix sockets: a stand-in runtime answering at once, the proxy in front of
//! it (its checkpoint file written as in production), and a hook server answering at once.
//!
//! `cargo bench --bench runtime_proxy`. Numbers go to docs/performance.md.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_cri::v1 as cri;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::runtime_service_server::{RuntimeService, RuntimeServiceServer};
use koord::runtime_proxy::hooks::Hooks;
use koord::runtime_proxy::proto;
use koord::runtime_proxy::proto::runtime_hook_service_server::{
    RuntimeHookService, RuntimeHookServiceServer,
};
use koord::runtime_proxy::service::Proxy;
use koord::runtime_proxy::store::{ContainerInfo, PodInfo, Store};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

const CALLS: usize = 5000;

/// A runtime that answers Version and UpdateContainerResources at once.
struct FakeRuntime;

macro_rules! unimplemented_calls {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {$(
        fn $name<'a, 'b>(&'a self, _r: Request<$req>)
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response<$resp>, Status>> + Send + 'b>>
        where 'a: 'b, Self: 'b {
            Box::pin(async { Err(Status::unimplemented("fake runtime")) })
        }
    )*};
}

#[tonic::async_trait]
impl RuntimeService for FakeRuntime {
    type GetContainerEventsStream = tonic::codec::Streaming<cri::ContainerEventResponse>;

    async fn version(
        &self,
        _r: Request<cri::VersionRequest>,
    ) -> Result<Response<cri::VersionResponse>, Status> {
        Ok(Response::new(cri::VersionResponse {
            runtime_name: "fake".into(),
            ..Default::default()
        }))
    }

    async fn update_container_resources(
        &self,
        _r: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Result<Response<cri::UpdateContainerResourcesResponse>, Status> {
        Ok(Response::new(Default::default()))
    }

    unimplemented_calls! {
        run_pod_sandbox(cri::RunPodSandboxRequest) -> cri::RunPodSandboxResponse;
        stop_pod_sandbox(cri::StopPodSandboxRequest) -> cri::StopPodSandboxResponse;
        remove_pod_sandbox(cri::RemovePodSandboxRequest) -> cri::RemovePodSandboxResponse;
        pod_sandbox_status(cri::PodSandboxStatusRequest) -> cri::PodSandboxStatusResponse;
        list_pod_sandbox(cri::ListPodSandboxRequest) -> cri::ListPodSandboxResponse;
        create_container(cri::CreateContainerRequest) -> cri::CreateContainerResponse;
        start_container(cri::StartContainerRequest) -> cri::StartContainerResponse;
        stop_container(cri::StopContainerRequest) -> cri::StopContainerResponse;
        remove_container(cri::RemoveContainerRequest) -> cri::RemoveContainerResponse;
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
}

/// A hook server that echoes the resources it is given.
struct EchoHooks;

type R<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl RuntimeHookService for EchoHooks {
    async fn pre_run_pod_sandbox_hook(
        &self,
        _r: Request<proto::PodSandboxHookRequest>,
    ) -> R<proto::PodSandboxHookResponse> {
        Ok(Response::new(Default::default()))
    }
    async fn post_stop_pod_sandbox_hook(
        &self,
        _r: Request<proto::PodSandboxHookRequest>,
    ) -> R<proto::PodSandboxHookResponse> {
        Ok(Response::new(Default::default()))
    }
    async fn pre_create_container_hook(
        &self,
        _r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        Ok(Response::new(Default::default()))
    }
    async fn pre_start_container_hook(
        &self,
        _r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        Ok(Response::new(Default::default()))
    }
    async fn post_start_container_hook(
        &self,
        _r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        Ok(Response::new(Default::default()))
    }
    async fn post_stop_container_hook(
        &self,
        _r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        Ok(Response::new(Default::default()))
    }
    async fn pre_update_container_resources_hook(
        &self,
        r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        Ok(Response::new(proto::ContainerResourceHookResponse {
            container_resources: r.into_inner().container_resources,
            ..Default::default()
        }))
    }
}

fn incoming(
    path: &Path,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::UnixStream>> + use<> {
    let listener = tokio::net::UnixListener::bind(path).unwrap();
    async_stream::stream! {
        loop {
            if let Ok((s, _)) = listener.accept().await {
                yield Ok(s);
            }
        }
    }
}

fn client(path: &Path) -> RuntimeServiceClient<Channel> {
    RuntimeServiceClient::new(koord::kernel::cri::unix_channel(path.to_path_buf()))
}

/// p50 and p99 of `CALLS` sequential calls, in microseconds.
async fn measure<F, Fut>(mut call: F) -> (f64, f64)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..200 {
        call().await;
    }
    let mut t = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let s = Instant::now();
        call().await;
        t.push(s.elapsed());
    }
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(t[CALLS / 2]), us(t[CALLS * 99 / 100]))
}

fn proxy(dir: &Path, runtime: &Path, hook_dir: PathBuf) -> PathBuf {
    let store = Store::open(Some(dir.join(format!("store-{}.json", rand_suffix()))));
    store.put_pod(
        "sb",
        PodInfo {
            name: "p".into(),
            ..Default::default()
        },
    );
    store.put_container(
        "c",
        ContainerInfo {
            sandbox_id: "sb".into(),
            name: "c".into(),
            ..Default::default()
        },
    );
    let p = Proxy {
        backend: client(runtime),
        hooks: Arc::new(Hooks::new(hook_dir)),
        store: Arc::new(store),
        skip: (
            "runtimeproxy.koordinator.sh/skip-hookserver".into(),
            "true".into(),
        ),
    };
    let socket = dir.join(format!("proxy-{}.sock", std::process::id() ^ rand_suffix()));
    let inc = incoming(&socket);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RuntimeServiceServer::new(p))
            .serve_with_incoming(inc),
    );
    socket
}

fn rand_suffix() -> u32 {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let runtime = dir.path().join("runtime.sock");
        tokio::spawn(tonic::transport::Server::builder().add_service(RuntimeServiceServer::new(FakeRuntime)).serve_with_incoming(incoming(&runtime)));
        let hooks = dir.path().join("hooks.sock");
        tokio::spawn(tonic::transport::Server::builder().add_service(RuntimeHookServiceServer::new(EchoHooks)).serve_with_incoming(incoming(&hooks)));
        let hook_dir = dir.path().join("hookserver.d");
        std::fs::create_dir_all(&hook_dir).unwrap();
        std::fs::write(hook_dir.join("echo.json"), format!(
            r#"{{"remote-endpoint": "unix://{}", "failure-policy": "Ignore", "runtime-hooks": ["PreUpdateContainerResources"]}}"#,
            hooks.display())).unwrap();
        let empty = dir.path().join("none.d");
        let plain = proxy(dir.path(), &runtime, empty);
        let hooked = proxy(dir.path(), &runtime, hook_dir);
        let update = || cri::UpdateContainerResourcesRequest {
            container_id: "c".into(),
            linux: Some(cri::LinuxContainerResources { cpu_shares: 2, ..Default::default() }),
            ..Default::default()
        };
        println!("koord-runtime-proxy latency, {CALLS} sequential calls each, unix sockets, 2 CPUs");
        let direct = client(&runtime);
        let (p50, p99) = measure(|| { let mut c = direct.clone(); async move { c.version(cri::VersionRequest::default()).await.unwrap(); } }).await;
        println!("Version, straight to the runtime:                   p50 {p50:6.0} µs  p99 {p99:6.0} µs");
        let (d50, d99) = measure(|| { let mut c = direct.clone(); let r = update(); async move { c.update_container_resources(r).await.unwrap(); } }).await;
        println!("UpdateContainerResources, straight to the runtime:  p50 {d50:6.0} µs  p99 {d99:6.0} µs");
        let via = client(&plain);
        let (p50, p99) = measure(|| { let mut c = via.clone(); async move { c.version(cri::VersionRequest::default()).await.unwrap(); } }).await;
        println!("Version through the proxy (passed through):         p50 {p50:6.0} µs  p99 {p99:6.0} µs");
        let (n50, n99) = measure(|| { let mut c = via.clone(); let r = update(); async move { c.update_container_resources(r).await.unwrap(); } }).await;
        println!("UpdateContainerResources, proxy, no hook server:    p50 {n50:6.0} µs  p99 {n99:6.0} µs  (added: p50 {:.0} µs, p99 {:.0} µs)", n50 - d50, n99 - d99);
        let via = client(&hooked);
        let (h50, h99) = measure(|| { let mut c = via.clone(); let r = update(); async move { c.update_container_resources(r).await.unwrap(); } }).await;
        println!("UpdateContainerResources, proxy + hook server:      p50 {h50:6.0} µs  p99 {h99:6.0} µs  (added: p50 {:.0} µs, p99 {:.0} µs)", h50 - d50, h99 - d99);
    });
}
