//! How a picked pod is evicted (`pkg/koordlet/qosmanager/plugins/util/evictor.go`). By default, as Koordinator does: stop
//! every running container through the node's CRI runtime (chosen by the container id's
//! scheme) with timeout 0. With `onlyEvictByAPI`, or when a container's runtime has no
//! reachable CRI socket (e.g. the `--embedded` node runtime), the Eviction API instead.
//! Either way: a Warning event with the reason on the pod, and the pod UID remembered for
//! 2 minutes so a pod on its way out is not picked again. Only ever called for the
//! candidates of a strategy (BE pods, or pods that opted in to CPUEvict/MemoryEvict).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Api;
use kube::api::EvictParams;

use crate::kernel::cri::{self, CriClient};
use crate::kernel::events;
use crate::koordlet::informer::States;

const REMEMBER: Duration = Duration::from_secs(120);

/// Koordinator's event reason for a koordlet eviction.
pub const EVICT_REASON: &str = "evictPodSuccess";

/// Where the runtimes' CRI sockets are.
#[derive(Debug, Clone, Default)]
pub struct Runtimes {
    /// One endpoint for every container (`koordlet.eviction.runtimeEndpoint`).
    pub endpoint: Option<String>,
    /// The host's `/var/run` as the koordlet sees it: where sockets are discovered.
    pub var_run: PathBuf,
}

impl Runtimes {
    /// The CRI socket for a container id scheme, if one exists now. Koordinator looks at
    /// `<var-run>/containerd.sock` then `<var-run>/containerd/containerd.sock`.
    pub fn socket_for(&self, scheme: &str) -> Option<String> {
        if let Some(e) = &self.endpoint {
            return Some(e.clone());
        }
        let candidates: &[&str] = match scheme {
            "containerd" => &["containerd.sock", "containerd/containerd.sock"],
            "cri-o" => &["crio/crio.sock"],
            "docker" => &["cri-dockerd.sock"],
            _ => &[],
        };
        candidates
            .iter()
            .map(|c| self.var_run.join(c))
            .find(|p| cri::exists(p))
            .map(|p| p.display().to_string())
    }
}

/// Running containers of a pod as `(scheme, id)`.
pub fn running_containers(pod: &Pod) -> Vec<(String, String)> {
    pod.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .filter_map(|c| c.container_id.as_deref()?.split_once("://"))
        .map(|(s, id)| (s.to_string(), id.to_string()))
        .collect()
}

pub struct Evictor {
    only_by_api: bool,
    runtimes: Runtimes,
    clients: Mutex<HashMap<String, CriClient>>,
    recent: Mutex<HashMap<String, Instant>>,
    /// Counts evictions (`koordlet_pod_eviction`); the role swaps in the registered one.
    pub metrics: std::sync::Arc<crate::koordlet::metrics::KoordletMetrics>,
}

impl Default for Evictor {
    fn default() -> Self {
        Evictor::new(true, Runtimes::default())
    }
}

impl Evictor {
    pub fn new(only_by_api: bool, runtimes: Runtimes) -> Evictor {
        Evictor {
            only_by_api,
            runtimes,
            clients: Mutex::default(),
            recent: Mutex::default(),
            metrics: Default::default(),
        }
    }

    /// Pod UIDs evicted in the last 2 minutes.
    pub fn recent(&self) -> BTreeSet<String> {
        let mut g = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        g.retain(|_, at| at.elapsed() < REMEMBER);
        g.keys().cloned().collect()
    }

    fn client(&self, socket: &str) -> Option<CriClient> {
        let mut g = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = g.get(socket) {
            return Some(c.clone());
        }
        match CriClient::new(socket) {
            Ok(c) => Some(g.entry(socket.into()).or_insert(c).clone()),
            Err(e) => {
                tracing::warn!(error = %e, "unusable CRI endpoint");
                None
            }
        }
    }

    /// The CRI clients for every running container, or `None` when one has no runtime
    /// socket (then the Eviction API is used for the whole pod).
    fn plan(&self, pod: &Pod) -> Option<Vec<(CriClient, String)>> {
        running_containers(pod)
            .into_iter()
            .map(|(scheme, id)| {
                let socket = self.runtimes.socket_for(&scheme)?;
                Some((self.client(&socket)?, id))
            })
            .collect()
    }

    /// Evicts `pod` for koordlet feature `feature` (`BEMemoryEvict`, ...) because of
    /// `why`; true when its containers were stopped or the API accepted the eviction.
    /// The event is Koordinator's (`evictPodSuccess`, same message prefix) with `why`
    /// appended, so existing alerts keep matching and the numbers are visible.
    pub async fn evict(
        &self,
        client: &kube::Client,
        pod: &Pod,
        node: &str,
        feature: &str,
        why: &str,
    ) -> bool {
        let m = &pod.metadata;
        let (ns, name) = (
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or(""),
        );
        let uid = m.uid.as_deref().unwrap_or("");
        let plan = if self.only_by_api {
            None
        } else {
            self.plan(pod)
        };
        let done = match plan {
            Some(stops) => stop_all(&stops, ns, name).await,
            None => evict_by_api(client, ns, name).await,
        };
        if !done {
            return false;
        }
        self.recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid.to_string(), Instant::now());
        let involved = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.into()),
            namespace: Some(ns.into()),
            uid: Some(uid.into()),
            ..Default::default()
        };
        let message = format!(
            "evict Pod:{ns}/{name}, reason: evicted, message: trigger by koordlet feature {feature}, kill pod: {name}; {why}"
        );
        let event = events::event(
            "koordlet",
            Some(node),
            involved,
            ns,
            "Warning",
            EVICT_REASON,
            message.clone(),
        );
        events::record(client, &event).await;
        self.metrics.evicted(node, feature);
        self.metrics.ops.evicted(node, ns, name, feature);
        tracing::info!(pod = %format!("{ns}/{name}"), feature, message, "evicted");
        crate::koordlet::audit::record(0, || {
            crate::koordlet::audit::Event::pod(ns, name)
                .reason(feature)
                .message(message)
        });
        true
    }
}

async fn stop_all(stops: &[(CriClient, String)], ns: &str, name: &str) -> bool {
    let mut ok = true;
    for (c, id) in stops {
        if let Err(e) = c.stop_container(id, 0).await {
            tracing::warn!(pod = %format!("{ns}/{name}"), container = %id, error = %e, "stopping a container failed");
            ok = false;
        }
    }
    ok
}

async fn evict_by_api(client: &kube::Client, ns: &str, name: &str) -> bool {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    match api.evict(name, &EvictParams::default()).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "eviction refused");
            false
        }
    }
}

/// A Normal event on the Node (cpusuppress changes).
pub async fn node_event(client: &kube::Client, node: &str, reason: &str, message: &str) {
    let involved = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.into()),
        ..Default::default()
    };
    let event = events::event(
        "koordlet",
        Some(node),
        involved,
        "default",
        "Normal",
        reason,
        message.to_string(),
    );
    events::record(client, &event).await;
}

fn pod_by_uid<'a>(states: &'a States, uid: &str) -> Option<&'a Pod> {
    states.pods.iter().find(|p| p.uid == uid).map(|p| &*p.pod)
}

/// Evicts `uid` (if it is still on the node) and says whether it went.
pub(super) async fn evict_uid(
    client: &kube::Client,
    evictor: &Evictor,
    states: &States,
    uid: &str,
    feature: &str,
    msg: &str,
) -> bool {
    let node = states
        .node
        .as_ref()
        .and_then(|n| n.metadata.name.as_deref())
        .unwrap_or_default();
    match pod_by_uid(states, uid) {
        Some(pod) => evictor.evict(client, pod, node, feature, msg).await,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn running_containers_by_scheme() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"containerStatuses": [
            {"name": "a", "containerID": "containerd://aaa", "state": {"running": {}}, "image": "", "imageID": "", "ready": true, "restartCount": 0},
            {"name": "b", "containerID": "containerd://bbb", "state": {"terminated": {"exitCode": 0}}, "image": "", "imageID": "", "ready": false, "restartCount": 0},
            {"name": "c", "state": {"waiting": {}}, "image": "", "imageID": "", "ready": false, "restartCount": 0}
        ]}}))
        .unwrap();
        assert_eq!(
            running_containers(&pod),
            vec![("containerd".to_string(), "aaa".to_string())]
        );
    }

    #[test]
    fn sockets_are_discovered_under_var_run() {
        let dir = tempfile::tempdir().unwrap();
        let r = Runtimes {
            endpoint: None,
            var_run: dir.path().to_path_buf(),
        };
        assert_eq!(r.socket_for("containerd"), None);
        std::fs::create_dir(dir.path().join("containerd")).unwrap();
        std::fs::write(dir.path().join("containerd/containerd.sock"), "").unwrap();
        assert_eq!(
            r.socket_for("containerd").unwrap(),
            dir.path()
                .join("containerd/containerd.sock")
                .display()
                .to_string()
        );
        assert_eq!(
            r.socket_for("koord-process"),
            None,
            "no CRI for the node runtime"
        );
        let fixed = Runtimes {
            endpoint: Some("unix:///x.sock".into()),
            ..r
        };
        assert_eq!(fixed.socket_for("anything").unwrap(), "unix:///x.sock");
    }

    #[test]
    fn pods_without_a_runtime_socket_fall_back_to_the_api() {
        let ev = Evictor::new(false, Runtimes::default());
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"containerStatuses": [
            {"name": "a", "containerID": "koord-process://aaa", "state": {"running": {}}, "image": "", "imageID": "", "ready": true, "restartCount": 0}
        ]}}))
        .unwrap();
        assert!(ev.plan(&pod).is_none());
    }
}
