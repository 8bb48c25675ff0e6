//! The kubelet's PodResources API, as this runtime is the node's kubelet: each pod it runs
//! with its containers, at `<data-dir>/kubelet/pod-resources/kubelet.sock` (the kubelet's
//! layout under a root of its own), where the koordlet and its pod-resources proxy look
//! for the kubelet's. Like a kubelet with the `none` CPU manager policy and no device
//! plugins, it assigns no exclusive CPUs, memory or devices, so those lists are empty; the
//! koordlet's proxy adds the devices koord's scheduler allocated.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::Ctx;
use crate::api::podresources::pb;
use pb::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};

/// The socket under the runtime's kubelet root.
pub fn socket(kubelet_root: &Path) -> PathBuf {
    kubelet_root.join("pod-resources/kubelet.sock")
}

struct Lister {
    ctx: Arc<Ctx>,
}

/// A pod of the runtime's view as the kubelet lists it.
fn pod_resources(pod: &Value) -> pb::PodResources {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    pb::PodResources {
        name: text(&pod["metadata"]["name"]),
        namespace: text(&pod["metadata"]["namespace"]),
        containers: containers
            .map(|c| pb::ContainerResources {
                name: text(&c["name"]),
                ..Default::default()
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl PodResourcesLister for Lister {
    async fn list(
        &self,
        _: Request<pb::ListPodResourcesRequest>,
    ) -> Result<Response<pb::ListPodResourcesResponse>, Status> {
        let pod_resources = self.ctx.view_items().iter().map(pod_resources).collect();
        Ok(Response::new(pb::ListPodResourcesResponse {
            pod_resources,
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<pb::AllocatableResourcesRequest>,
    ) -> Result<Response<pb::AllocatableResourcesResponse>, Status> {
        Ok(Response::new(pb::AllocatableResourcesResponse::default()))
    }

    async fn get(
        &self,
        req: Request<pb::GetPodResourcesRequest>,
    ) -> Result<Response<pb::GetPodResourcesResponse>, Status> {
        let want = req.into_inner();
        let found = self
            .ctx
            .view_items()
            .iter()
            .map(pod_resources)
            .find(|p| p.name == want.name && p.namespace == want.namespace);
        match found {
            Some(p) => Ok(Response::new(pb::GetPodResourcesResponse {
                pod_resources: Some(p),
            })),
            None => Err(Status::not_found(format!(
                "pod {}/{} is not running on this node",
                want.namespace, want.name
            ))),
        }
    }
}

/// Serves the API until `stop`; the socket is removed at the end. It is private (0600)
/// like everything under the data dir: the koordlet beside it runs as the same user.
pub async fn serve(ctx: Arc<Ctx>, socket: PathBuf, stop: CancellationToken) {
    if let Some(dir) = socket.parent()
        && let Err(e) = crate::os::files::private_dir(dir)
    {
        tracing::warn!(dir = %dir.display(), error = %e, "pod-resources API not served");
        return;
    }
    let listener = match crate::kernel::listen::bind_unix(&socket, 0o600) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(socket = %socket.display(), error = %e, "pod-resources API not served");
            return;
        }
    };
    let incoming = crate::kernel::listen::local_grpc_incoming(listener, "pod-resources");
    let served = tonic::transport::Server::builder()
        .add_service(PodResourcesListerServer::new(Lister { ctx }))
        .serve_with_incoming_shutdown(incoming, async move { stop.cancelled().await })
        .await;
    if let Err(e) = served {
        tracing::warn!(socket = %socket.display(), error = %e, "pod-resources API stopped");
    }
    let _ = std::fs::remove_file(&socket);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_listed_with_its_containers_and_nothing_assigned() {
        let pod = serde_json::json!({"metadata": {"name": "web", "namespace": "shop"},
            "spec": {"containers": [{"name": "app"}, {"name": "sidecar"}]}});
        let p = pod_resources(&pod);
        assert_eq!((p.name.as_str(), p.namespace.as_str()), ("web", "shop"));
        let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app", "sidecar"]);
        assert!(
            p.containers
                .iter()
                .all(|c| c.cpu_ids.is_empty() && c.devices.is_empty())
        );
        assert!(pod_resources(&serde_json::json!({})).containers.is_empty());
        assert_eq!(
            socket(Path::new("/data/kubelet")),
            Path::new("/data/kubelet/pod-resources/kubelet.sock")
        );
    }
}
