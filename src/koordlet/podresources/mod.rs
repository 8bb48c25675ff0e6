//! The pod-resources proxy (gate `PodResourcesProxy`; Koordinator's
//! `statesinformer/impl/states_pod_resources.go`): the kubelet's PodResources gRPC API
//! served at `<koordlet.podResourcesProxyPath>/kubelet.sock` (`-pod-resources-proxy-path`,
//! `/var/run/koordlet/pod-resources`), each call forwarded to the kubelet's socket
//! (`<kubelet.rootDir>/pod-resources/kubelet.sock`); `List` answers also carry the devices
//! koord's scheduler allocated (the pod's `scheduling.koordinator.sh/device-allocated`
//! annotation: GPUs as `nvidia.com/gpu`, RDMA as `koordinator.sh/rdma`, by id or by the
//! virtual functions' bus ids) on each pod's first container — so device monitors that ask
//! the kubelet see what koord placed.

pub mod fill;

use std::path::{Path, PathBuf};

use tonic::{Request, Response, Status};

use crate::kernel::Shutdown;
use crate::koordlet::informer::Informer;

pub use crate::api::podresources::pb;

use pb::pod_resources_lister_client::PodResourcesListerClient;
use pb::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};

/// The largest answer read from the kubelet (Koordinator's `defaultPodResourcesMaxSize`).
const MAX_MESSAGE: usize = 16 << 20;

pub struct Proxy {
    upstream: PodResourcesListerClient<tonic::transport::Channel>,
    informer: Informer,
}

impl Proxy {
    /// Forwards to the kubelet's socket at `kubelet_socket`, connected on first use.
    pub fn new(kubelet_socket: PathBuf, informer: Informer) -> Proxy {
        let channel = crate::kernel::cri::unix_channel(kubelet_socket);
        Proxy {
            upstream: PodResourcesListerClient::new(channel).max_decoding_message_size(MAX_MESSAGE),
            informer,
        }
    }
}

#[tonic::async_trait]
impl PodResourcesLister for Proxy {
    async fn list(
        &self,
        req: Request<pb::ListPodResourcesRequest>,
    ) -> Result<Response<pb::ListPodResourcesResponse>, Status> {
        let mut answer = self
            .upstream
            .clone()
            .list(req.into_inner())
            .await?
            .into_inner();
        let states = self.informer.snapshot();
        fill::fill_pod_devices_allocated_by_koord(&mut answer, states.pods.iter().map(|p| &*p.pod));
        Ok(Response::new(answer))
    }

    async fn get_allocatable_resources(
        &self,
        req: Request<pb::AllocatableResourcesRequest>,
    ) -> Result<Response<pb::AllocatableResourcesResponse>, Status> {
        self.upstream
            .clone()
            .get_allocatable_resources(req.into_inner())
            .await
    }

    async fn get(
        &self,
        req: Request<pb::GetPodResourcesRequest>,
    ) -> Result<Response<pb::GetPodResourcesResponse>, Status> {
        self.upstream.clone().get(req.into_inner()).await
    }
}

/// Serves the proxy at `<dir>/kubelet.sock` until the process drains; the socket is
/// removed at the end.
pub async fn serve(dir: &Path, proxy: Proxy, shutdown: Shutdown) -> anyhow::Result<()> {
    let socket = dir.join("kubelet.sock");
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("pod-resources proxy: {}: {e}", dir.display()))?;
    // 0660 as the kubelet's: device monitors run as root or the kubelet's group.
    let listener = crate::kernel::listen::bind_unix(&socket, 0o660).map_err(|e| {
        anyhow::anyhow!(
            "pod-resources proxy: listening on {}: {e}",
            socket.display()
        )
    })?;
    tracing::info!(socket = %socket.display(), "pod-resources proxy listening");
    let incoming = crate::kernel::listen::local_grpc_incoming(listener, "pod-resources");
    let served = tonic::transport::Server::builder()
        .add_service(PodResourcesListerServer::new(proxy).max_encoding_message_size(MAX_MESSAGE))
        .serve_with_incoming_shutdown(incoming, async move { shutdown.draining().await })
        .await;
    let _ = std::fs::remove_file(&socket);
    served.map_err(Into::into)
}

#[cfg(test)]
#[path = "proxy_tests.rs"]
mod tests;
