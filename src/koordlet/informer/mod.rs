//! The states informer: this node, its pods (from the kubelet's `/pods` or the API
//! server), its NodeSLO and NodeMetric. Consumers read consistent snapshots; `synced`
//! turns true once every source has delivered its first full state.

pub mod pods;
pub mod slo;

use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher;
use tokio::sync::watch;

use crate::api::extension::qos::{KubeQoS, QoSClass, kube_qos, pod_qos_class};
use crate::api::slo::{NodeMetric, NodeSLO};
use crate::kernel::{Shutdown, Tasks};
use crate::koordlet::store::series::Labels;
use crate::os::{CgroupDir, Cgroups};

/// A pod and where its cgroups are.
#[derive(Debug, Clone)]
pub struct PodMeta {
    pub pod: Arc<Pod>,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub dir: CgroupDir,
    /// (container name, container id as reported, cgroup dir) of started containers.
    pub containers: Vec<ContainerMeta>,
    /// Facts the per-second loops ask of every pod, taken once a pod update: read from the
    /// pod object each second they touched several of its allocations a pod, and the
    /// koordlet's CPU follows the pages it touches a second (issue 41).
    pub facts: PodFacts,
    /// `pod_uid=<uid>`, the labels of the pod's series (made once, shared by its keys).
    pub series: Labels,
}

#[derive(Debug, Clone, Copy)]
pub struct PodFacts {
    /// The `koordinator.sh/qosClass` label's class (`None` without one).
    pub qos: QoSClass,
    /// The class the runtime hooks and their reconcilers act on (`pod_hook_qos_class`:
    /// the label, else BE for the batch and free priority bands).
    pub hook_qos: QoSClass,
    pub kube_qos: KubeQoS,
    /// The phase is unset, Pending or Running.
    pub live: bool,
    /// The pod's CPU request (`pod_requests`), milli-cores.
    pub cpu_request_milli: i64,
    pub has_spec: bool,
}

impl PodFacts {
    /// `pod_qos_class_with_default`.
    pub fn qos_with_default(&self) -> QoSClass {
        crate::api::extension::qos::qos_class_with_default(self.qos, || self.kube_qos)
    }

    pub fn of(pod: &Pod) -> PodFacts {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        PodFacts {
            qos: pod_qos_class(pod),
            hook_qos: crate::api::extension::priority::pod_hook_qos_class(pod),
            kube_qos: kube_qos(pod),
            live: matches!(phase, None | Some("Pending") | Some("Running")),
            cpu_request_milli: crate::api::pod::pod_requests(pod)
                .get(crate::api::extension::resources::CPU)
                .copied()
                .unwrap_or(0),
            has_spec: pod.spec.is_some(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ContainerMeta {
    pub name: String,
    pub id: String,
    pub dir: CgroupDir,
    /// The spec's CPU limit (`container_limits`, milli-cores, 0 without one); `None` when
    /// the spec has no container of this name. A fact like `PodFacts`.
    pub cpu_limit_milli: Option<i64>,
    /// Its status says running.
    pub running: bool,
    /// `container_id=<bare id>`, the labels of the container's series.
    pub series: Labels,
}

impl PodMeta {
    pub fn new(pod: Pod, cgroups: &Cgroups) -> Option<PodMeta> {
        Self::shared(Arc::new(pod), cgroups)
    }

    /// A `PodMeta` of a pod the informer's list holds too.
    pub fn shared(pod: Arc<Pod>, cgroups: &Cgroups) -> Option<PodMeta> {
        let uid = pod.metadata.uid.clone()?;
        let facts = PodFacts::of(&pod);
        let dir = cgroups.pod_dir(facts.kube_qos, &uid);
        let containers = pod
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .filter_map(|c| {
                let id = c.container_id.clone().filter(|i| !i.is_empty())?;
                let spec = pod.spec.iter().flat_map(|s| &s.containers);
                let cpu_limit_milli = spec.into_iter().find(|s| s.name == c.name).map(|s| {
                    let limits = crate::api::pod::container_limits(s);
                    limits
                        .get(crate::api::extension::resources::CPU)
                        .copied()
                        .unwrap_or(0)
                });
                let bare = id.split_once("://").map_or(id.as_str(), |(_, b)| b);
                Some(ContainerMeta {
                    name: c.name.clone(),
                    dir: cgroups.container_dir(&dir, &id)?,
                    series: Labels::container(bare),
                    id,
                    cpu_limit_milli,
                    running: c.state.as_ref().is_some_and(|s| s.running.is_some()),
                })
            })
            .collect();
        Some(PodMeta {
            series: Labels::pod(&uid),
            uid,
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            dir,
            containers,
            facts,
            pod,
        })
    }

    /// The bare container id (`abc` of `containerd://abc`).
    pub fn container_id(c: &ContainerMeta) -> &str {
        c.id.split_once("://").map_or(c.id.as_str(), |(_, id)| id)
    }
}

/// Everything the koordlet knows about its node, at one moment.
#[derive(Debug, Clone, Default)]
pub struct States {
    pub node: Option<Arc<Node>>,
    pub pods: Arc<Vec<PodMeta>>,
    pub node_slo: Option<Arc<NodeSLO>>,
    pub node_metric: Option<Arc<NodeMetric>>,
    /// `node_slo` with defaults applied, computed on first use and shared by every
    /// snapshot until the NodeSLO changes.
    pub slo_view: Arc<OnceLock<slo::SloView>>,
}

impl States {
    /// The NodeSLO's sections with Koordinator's defaults applied.
    pub fn slo(&self) -> &slo::SloView {
        self.slo_view
            .get_or_init(|| slo::SloView::new(self.node_slo.as_deref()))
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Synced {
    node: bool,
    pods: bool,
    node_slo: bool,
    node_metric: bool,
}

/// Handle to the informer's state.
#[derive(Clone)]
pub struct Informer {
    states: watch::Receiver<States>,
    synced: watch::Receiver<bool>,
}

impl Informer {
    /// An informer that always holds `states` (tests, benchmarks, offline tools).
    pub fn fixed(states: States) -> Informer {
        let (_, states) = watch::channel(states);
        let (_, synced) = watch::channel(true);
        Informer { states, synced }
    }

    pub fn snapshot(&self) -> States {
        self.states.borrow().clone()
    }

    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until every source synced; false if the process drains first.
    pub async fn wait_synced(&self, shutdown: &Shutdown) -> bool {
        let mut rx = self.synced.clone();
        tokio::select! {
            r = rx.wait_for(|s| *s) => r.is_ok(),
            _ = shutdown.draining() => false,
        }
    }

    /// A receiver that changes whenever the state does.
    pub fn subscribe(&self) -> watch::Receiver<States> {
        self.states.clone()
    }
}

/// Where pods come from.
#[derive(Debug, Clone)]
pub enum PodSource {
    /// The API server, with `spec.nodeName=<node>`.
    Api,
    /// A kubelet `/pods` URL, polled.
    Kubelet(pods::KubeletPods),
}

struct Shared {
    states: watch::Sender<States>,
    synced: watch::Sender<bool>,
    flags: std::sync::Mutex<Synced>,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut States)) {
        self.states.send_modify(f);
    }

    fn mark(&self, f: impl FnOnce(&mut Synced)) {
        let mut flags = self.flags.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut flags);
        if flags.node && flags.pods && flags.node_slo && flags.node_metric {
            self.synced.send_replace(true);
        }
    }
}

/// Starts the informer's watches as tracked tasks.
pub fn start(
    client: kube::Client,
    node: &str,
    cgroups: Cgroups,
    source: PodSource,
    tasks: &Tasks,
    shutdown: &Shutdown,
) -> Informer {
    let (states_tx, states) = watch::channel(States::default());
    let (synced_tx, synced) = watch::channel(false);
    let shared = Arc::new(Shared {
        states: states_tx,
        synced: synced_tx,
        flags: Default::default(),
    });
    let by_name = format!("metadata.name={node}");

    let (s, sd, c, f) = (
        shared.clone(),
        shutdown.clone(),
        client.clone(),
        by_name.clone(),
    );
    tasks.spawn("koordlet/informer/node", async move {
        watch_one::<Node>(
            c,
            &f,
            &sd,
            |n| s.update(|st| st.node = n.map(Arc::new)),
            || s.mark(|m| m.node = true),
        )
        .await;
        Ok(())
    });
    let (s, sd, c, f) = (
        shared.clone(),
        shutdown.clone(),
        client.clone(),
        by_name.clone(),
    );
    tasks.spawn("koordlet/informer/nodeslo", async move {
        watch_one::<NodeSLO>(
            c,
            &f,
            &sd,
            |n| {
                s.update(|st| {
                    st.node_slo = n.map(Arc::new);
                    st.slo_view = Arc::default();
                })
            },
            || s.mark(|m| m.node_slo = true),
        )
        .await;
        Ok(())
    });
    let (s, sd, c, f) = (shared.clone(), shutdown.clone(), client.clone(), by_name);
    tasks.spawn("koordlet/informer/nodemetric", async move {
        watch_one::<NodeMetric>(
            c,
            &f,
            &sd,
            |n| s.update(|st| st.node_metric = n.map(Arc::new)),
            || s.mark(|m| m.node_metric = true),
        )
        .await;
        Ok(())
    });
    let source = match source {
        PodSource::Kubelet(mut k) => {
            let wake = Arc::new(tokio::sync::Notify::new());
            let dirs = crate::koordlet::pleg::qos_dirs(&cgroups);
            let (w, sd) = (wake.clone(), shutdown.clone());
            tasks.spawn("koordlet/pleg", crate::koordlet::pleg::run(dirs, w, sd));
            k.wake = Some(wake);
            PodSource::Kubelet(k)
        }
        api => api,
    };
    let (s, sd, node) = (shared, shutdown.clone(), node.to_string());
    tasks.spawn("koordlet/informer/pods", async move {
        let publish = |pods: Vec<Arc<Pod>>| {
            let metas: Vec<PodMeta> = pods
                .into_iter()
                .filter_map(|p| PodMeta::shared(p, &cgroups))
                .collect();
            s.update(|st| st.pods = Arc::new(metas));
            s.mark(|m| m.pods = true);
        };
        match source {
            PodSource::Api => pods::watch_api(client, &node, &sd, publish).await,
            PodSource::Kubelet(k) => pods::poll_kubelet(&k, &sd, publish).await,
        }
        Ok(())
    });
    Informer { states, synced }
}

/// Watches the single object selected by `field` (this node's Node, NodeSLO, NodeMetric).
async fn watch_one<K>(
    client: kube::Client,
    field: &str,
    shutdown: &Shutdown,
    mut set: impl FnMut(Option<K>),
    mut synced: impl FnMut(),
) where
    K: crate::kernel::watch::Watchable,
{
    let mut pending: Option<K> = None;
    let cfg = watcher::Config::default().fields(field);
    let mut index = crate::kernel::pump::forward(move |ev: watcher::Event<K>| {
        match ev {
            watcher::Event::Init => pending = None,
            watcher::Event::InitApply(o) => pending = Some(o),
            watcher::Event::InitDone => {
                set(pending.take());
                synced();
            }
            watcher::Event::Apply(o) => set(Some(o)),
            watcher::Event::Delete(_) => set(None),
        }
        true
    });
    crate::kernel::pump::pump::<K, _>(client, None, cfg, &mut index, shutdown.draining()).await;
}

#[cfg(test)]
mod facts_tests;
