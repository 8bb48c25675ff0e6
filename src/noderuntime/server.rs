//! The kubelet-compatible API: `GET /pods` (a PodList with live statuses, what the
//! koordlet's states informer reads), `GET /configz` (what this runtime does as a kubelet
//! configuration: no CPU or topology manager), and `POST /pods/{namespace}/{name}/stop` which kills
//! a pod's containers at once (they restart under the pod's restart policy). Like the
//! kubelet's authenticated port, every request but `/healthz` needs the API server's
//! bearer token: pod specs carry secrets in their environment.

use std::sync::Arc;

use hyper::{Method, Request, StatusCode};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::Ctx;
use crate::kernel::http::{Body, ServerAuth, json as json_response, text};

/// A request the manager forwards to a pod's worker.
pub struct StopRequest {
    pub namespace: String,
    pub name: String,
    pub reply: oneshot::Sender<Option<usize>>,
}

pub async fn handle(
    ctx: Arc<Ctx>,
    auth: Arc<ServerAuth>,
    stops: mpsc::Sender<StopRequest>,
    req: Request<hyper::body::Incoming>,
) -> hyper::Response<Body> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs != ["healthz"] && !auth.allows(req.headers()) {
        return text(StatusCode::UNAUTHORIZED, "Unauthorized\n");
    }
    match (req.method(), segs.as_slice()) {
        (&Method::GET, ["pods"]) => {
            let items = ctx.view_items();
            json_response(
                StatusCode::OK,
                &json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}),
            )
        }
        (&Method::GET, ["configz"]) => json_response(StatusCode::OK, &configz(&ctx)),
        (&Method::GET, ["healthz"]) => text(StatusCode::OK, "ok"),
        (&Method::POST, ["pods", ns, name, "stop"]) => {
            let (reply, rx) = oneshot::channel();
            let sent = stops
                .send(StopRequest {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    reply,
                })
                .await;
            match (sent, rx.await) {
                (Ok(()), Ok(Some(n))) => json_response(StatusCode::OK, &json!({"stopped": n})),
                (Ok(()), Ok(None)) => text(
                    StatusCode::NOT_FOUND,
                    format!("pod {ns}/{name} is not running on this node\n"),
                ),
                _ => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "node runtime is stopping\n",
                ),
            }
        }
        _ => text(StatusCode::NOT_FOUND, format!("{path} not found\n")),
    }
}

/// This runtime as the kubelet's `/configz` reports a kubelet: it pins no CPUs and aligns
/// nothing by NUMA node (the koordlet's cpuset hooks do), with the Node's 110 pods.
fn configz(ctx: &Ctx) -> serde_json::Value {
    let driver = match ctx.cgroups.driver() {
        crate::os::cgroup::Driver::Systemd => "systemd",
        crate::os::cgroup::Driver::Cgroupfs => "cgroupfs",
    };
    json!({"kubeletconfig": {"enableServer": true, "cgroupDriver": driver, "maxPods": 110,
        "cpuManagerPolicy": "none", "memoryManagerPolicy": "None",
        "topologyManagerPolicy": "none", "topologyManagerScope": "container"}})
}
