//! What the live descheduler reads, kept warm by watches instead of listed every pass.
//! Listing 10,000 pods every `deschedulingInterval` cost ~0.5 s of CPU and ~130 MiB of
//! peak RSS in the descheduler alone; followed by watches, a pass reads memory, and pods
//! are kept as [`PodView`]s (a full `Pod` only lives while its event is decoded).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Pod, ReplicationController};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher;
use tokio::sync::Notify;

use super::access;
use super::framework::metric::MetricView;
use super::framework::podview::PodView;
use super::framework::world::World;
use crate::api::extension::keys::ANNOTATION_NODE_RAW_ALLOCATABLE;
use crate::api::scheduling::migration::PodMigrationJob;
use crate::api::slo::NodeMetric;
use crate::kernel::access::{Granted, Need};
use crate::kernel::watch::{Watchable, served};
use crate::kernel::{Shutdown, Tasks};

struct Inner<V> {
    map: BTreeMap<String, Arc<V>>,
    /// The next full list while a (re)list is under way.
    building: Option<BTreeMap<String, Arc<V>>>,
    synced: bool,
}

/// One watched kind, each object kept as `V` under a key, in key order.
pub struct Views<V> {
    inner: Arc<Mutex<Inner<V>>>,
    /// Notified on every change after the first list.
    pub changed: Arc<Notify>,
}

impl<V> Clone for Views<V> {
    fn clone(&self) -> Self {
        Views {
            inner: self.inner.clone(),
            changed: self.changed.clone(),
        }
    }
}

impl<V> Views<V> {
    /// Listed and empty: a kind not followed.
    fn empty() -> Views<V> {
        let views = Views::unsynced();
        views.lock().synced = true;
        views
    }

    fn unsynced() -> Views<V> {
        Views {
            inner: Arc::new(Mutex::new(Inner {
                map: BTreeMap::new(),
                building: None,
                synced: false,
            })),
            changed: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<V>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn values(&self) -> Vec<Arc<V>> {
        self.lock().map.values().cloned().collect()
    }

    pub fn entries(&self) -> Vec<(String, Arc<V>)> {
        let g = self.lock();
        g.map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    pub fn synced(&self) -> bool {
        self.lock().synced
    }

    fn apply<K>(&self, ev: watcher::Event<K>, view: fn(&K) -> Option<(String, V)>) {
        let mut g = self.lock();
        let relisted = matches!(ev, watcher::Event::InitDone);
        let changed = match ev {
            watcher::Event::Init => {
                g.building = Some(BTreeMap::new());
                false
            }
            watcher::Event::InitApply(k) => {
                if let (Some((key, v)), Some(b)) = (view(&k), g.building.as_mut()) {
                    b.insert(key, Arc::new(v));
                }
                false
            }
            watcher::Event::InitDone => {
                if let Some(b) = g.building.take() {
                    g.map = b;
                }
                g.synced = true;
                true
            }
            watcher::Event::Apply(k) => {
                if let Some((key, v)) = view(&k) {
                    g.map.insert(key, Arc::new(v));
                }
                true
            }
            watcher::Event::Delete(k) => {
                if let Some((key, _)) = view(&k) {
                    g.map.remove(&key);
                }
                true
            }
        };
        drop(g);
        if changed {
            self.changed.notify_one();
        }
        if relisted {
            // A full list leaves its decoding garbage between the kept views.
            crate::os::memory::trim();
        }
    }
}

/// Follows every `K`, keeping `view(k)`. A custom kind the server does not serve counts as
/// synced (and empty) until it appears.
fn follow<K, V>(
    client: &kube::Client,
    what: &'static str,
    view: fn(&K) -> Option<(String, V)>,
    tasks: &Tasks,
    shutdown: &Shutdown,
) -> Views<V>
where
    K: Watchable,
    V: Send + Sync + 'static,
{
    let views = Views::unsynced();
    let (v, client, shutdown) = (views.clone(), client.clone(), shutdown.clone());
    tasks.spawn(format!("descheduler/cache/{what}"), async move {
        if !K::group(&()).is_empty() && !served::<K>(&client).await {
            v.lock().synced = true;
        }
        // Small pages: nine kinds list at once at start-up, each page decoded whole.
        let cfg = watcher::Config::default().page_size(100);
        let mut index = crate::kernel::pump::forward(|ev: watcher::Event<K>| {
            v.apply(ev, view);
            true
        });
        crate::kernel::pump::pump::<K, _>(client, None, cfg, &mut index, shutdown.draining()).await;
        Ok(())
    });
    views
}

fn ns_name<K: Resource>(k: &K) -> String {
    let m = k.meta();
    format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or("")
    )
}

fn pod_view(p: &Pod) -> Option<(String, PodView)> {
    Some((ns_name(p), PodView::from(p)))
}

/// What the pass reads of a Node: name, labels, the raw-allocatable annotation, taints,
/// unschedulable, allocatable and the Ready condition. Image lists, field managers and
/// node info are most of a real Node's bytes.
fn node_view(n: &Node) -> Option<(String, Node)> {
    let m = &n.metadata;
    let keep = |k: &String| k == ANNOTATION_NODE_RAW_ALLOCATABLE;
    let slim = Node {
        metadata: ObjectMeta {
            name: m.name.clone(),
            labels: m.labels.clone(),
            annotations: m
                .annotations
                .as_ref()
                .map(|a| {
                    a.iter()
                        .filter(|(k, _)| keep(k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .filter(|a: &BTreeMap<String, String>| !a.is_empty()),
            ..Default::default()
        },
        spec: n.spec.as_ref().map(|s| NodeSpec {
            taints: s.taints.clone(),
            unschedulable: s.unschedulable,
            ..Default::default()
        }),
        status: n.status.as_ref().map(|s| NodeStatus {
            allocatable: s.allocatable.clone(),
            conditions: s
                .conditions
                .as_ref()
                .map(|c| c.iter().filter(|c| c.type_ == "Ready").cloned().collect()),
            ..Default::default()
        }),
    };
    Some((ns_name(n), slim))
}

fn metric_view(m: &NodeMetric) -> Option<(String, MetricView)> {
    Some((ns_name(m), MetricView::from(m)))
}

/// The object as watched (the watch already left out its managedFields).
fn whole<K: Resource + Clone>(k: &K) -> Option<(String, K)> {
    Some((ns_name(k), k.clone()))
}

/// A workload's expected replicas by its UID.
fn replicas<K: Resource>(k: &K, n: Option<i32>) -> Option<(String, i32)> {
    Some((k.meta().uid.clone()?, n.unwrap_or(1)))
}

fn rs(k: &ReplicaSet) -> Option<(String, i32)> {
    replicas(k, k.spec.as_ref().and_then(|s| s.replicas))
}

fn sts(k: &StatefulSet) -> Option<(String, i32)> {
    replicas(k, k.spec.as_ref().and_then(|s| s.replicas))
}

fn rc(k: &ReplicationController) -> Option<(String, i32)> {
    replicas(k, k.spec.as_ref().and_then(|s| s.replicas))
}

fn job(k: &Job) -> Option<(String, i32)> {
    replicas(k, k.spec.as_ref().and_then(|s| s.parallelism))
}

fn priority(k: &PriorityClass) -> Option<(String, i32)> {
    Some((k.metadata.name.clone()?, k.value))
}

/// Every kind a pass or the migration controller reads.
#[derive(Clone)]
pub struct Cache {
    pub nodes: Views<Node>,
    pub pods: Views<PodView>,
    pub metrics: Views<MetricView>,
    pub jobs: Views<PodMigrationJob>,
    workloads: [Views<i32>; 4],
    priority_classes: Views<i32>,
}

impl Cache {
    /// Follows every kind; a workload kind RBAC does not let it list stays empty.
    pub fn start(
        client: &kube::Client,
        granted: &Granted,
        tasks: &Tasks,
        shutdown: &Shutdown,
    ) -> Cache {
        let c = client;
        let may = |n: Need| granted.allows("list", n.group, n.resources[0]);
        let rc = if may(access::REPLICATION_CONTROLLERS) {
            follow(c, "replicationcontrollers", rc, tasks, shutdown)
        } else {
            Views::empty()
        };
        let job = if may(access::JOBS) {
            follow(c, "jobs", job, tasks, shutdown)
        } else {
            Views::empty()
        };
        Cache {
            nodes: follow(c, "nodes", node_view, tasks, shutdown),
            pods: follow(c, "pods", pod_view, tasks, shutdown),
            metrics: follow(c, "nodemetrics", metric_view, tasks, shutdown),
            jobs: follow(
                c,
                "podmigrationjobs",
                whole::<PodMigrationJob>,
                tasks,
                shutdown,
            ),
            workloads: [
                follow(c, "replicasets", rs, tasks, shutdown),
                follow(c, "statefulsets", sts, tasks, shutdown),
                rc,
                job,
            ],
            priority_classes: follow(c, "priorityclasses", priority, tasks, shutdown),
        }
    }

    fn synced(&self) -> bool {
        self.nodes.synced()
            && self.pods.synced()
            && self.metrics.synced()
            && self.jobs.synced()
            && self.workloads.iter().all(Views::synced)
            && self.priority_classes.synced()
    }

    /// Resolves once every kind has been listed; false if the process drains first.
    pub async fn wait_synced(&self, shutdown: &Shutdown) -> bool {
        while !self.synced() {
            if !shutdown.sleep(Duration::from_millis(100)).await {
                return false;
            }
        }
        true
    }

    /// The world as the cache shows it now, with the jobs it holds.
    pub fn world(&self) -> (World, Vec<PodMigrationJob>) {
        let jobs: Vec<PodMigrationJob> = self.jobs.values().iter().map(|j| (**j).clone()).collect();
        let mut replicas = HashMap::new();
        for w in &self.workloads {
            replicas.extend(w.entries().into_iter().map(|(k, v)| (k, *v)));
        }
        let mut world = World {
            nodes: self.nodes.values(),
            pods: self.pods.values(),
            metrics: self
                .metrics
                .entries()
                .into_iter()
                .map(|(k, m)| (k.trim_start_matches('/').to_string(), m))
                .collect(),
            replicas,
            priority_classes: self
                .priority_classes
                .entries()
                .into_iter()
                .map(|(k, v)| (k, *v))
                .collect(),
            ..Default::default()
        };
        world.add_jobs(&jobs);
        world.index_owners();
        (world, jobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn views() -> Views<PodView> {
        Views {
            inner: Arc::new(Mutex::new(Inner {
                map: BTreeMap::new(),
                building: None,
                synced: false,
            })),
            changed: Arc::new(Notify::new()),
        }
    }

    fn pod(name: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "d"}})).unwrap()
    }

    fn names(v: &Views<PodView>) -> Vec<String> {
        v.values().iter().map(|p| p.name.clone()).collect()
    }

    #[test]
    fn a_relist_replaces_the_views_and_events_update_them() {
        let v = views();
        v.apply(watcher::Event::Apply(pod("early")), pod_view);
        v.apply(watcher::Event::Init, pod_view);
        v.apply(watcher::Event::InitApply(pod("b")), pod_view);
        v.apply(watcher::Event::InitApply(pod("a")), pod_view);
        assert!(!v.synced(), "not synced before the list is done");
        v.apply(watcher::Event::InitDone, pod_view);
        assert!(v.synced());
        assert_eq!(
            names(&v),
            ["a", "b"],
            "key order; the pre-list object is gone"
        );
        v.apply(watcher::Event::Apply(pod("c")), pod_view);
        v.apply(watcher::Event::Delete(pod("a")), pod_view);
        assert_eq!(names(&v), ["b", "c"]);
    }

    #[test]
    fn nodes_keep_only_what_a_pass_reads() {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"},
                "annotations": {"node.koordinator.sh/raw-allocatable": "{\"cpu\":\"8\"}", "other": "x"}},
            "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"},
            "status": {"allocatable": {"cpu": "8"}, "capacity": {"cpu": "8"},
                "images": [{"names": ["busybox"], "sizeBytes": 1}],
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]}
        }))
        .unwrap();
        let (_, slim) = node_view(&n).unwrap();
        let v = serde_json::to_value(&slim).unwrap();
        assert_eq!(v["metadata"]["labels"]["zone"], "a");
        assert_eq!(
            v["metadata"]["annotations"].as_object().unwrap().len(),
            1,
            "only the raw-allocatable annotation"
        );
        assert_eq!(v["spec"]["unschedulable"], true);
        assert_eq!(v["spec"]["taints"][0]["key"], "k");
        assert!(v["spec"].get("podCIDR").is_none());
        assert_eq!(v["status"]["allocatable"]["cpu"], "8");
        assert!(v["status"].get("images").is_none() && v["status"].get("capacity").is_none());
        assert_eq!(v["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
