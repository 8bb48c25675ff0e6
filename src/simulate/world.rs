//! The objects of a recording at one instant of its virtual time, held as the explain
//! `Snapshot` the manager's and the descheduler's code read — nodes, pods and NodeMetrics
//! in place (indexed by key, so a change costs no copy of the rest), the other kinds as
//! JSON, decoded into the snapshot again only after one of them changed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use serde_json::Value;

use crate::api::slo::NodeMetric;
use crate::explain::snapshot::Snapshot;

/// Objects kept in a `Vec` of the snapshot, found by key.
#[derive(Default)]
struct Indexed {
    at: HashMap<String, usize>,
}

impl Indexed {
    fn put<T>(&mut self, list: &mut Vec<T>, key: String, v: T) {
        match self.at.get(&key) {
            Some(&i) => list[i] = v,
            None => {
                self.at.insert(key, list.len());
                list.push(v);
            }
        }
    }

    fn remove<T>(
        &mut self,
        list: &mut Vec<T>,
        key: &str,
        key_of: impl Fn(&T) -> String,
    ) -> Option<T> {
        let i = self.at.remove(key)?;
        let v = list.swap_remove(i);
        if let Some(moved) = list.get(i) {
            self.at.insert(key_of(moved), i);
        }
        Some(v)
    }
}

#[derive(Default)]
pub struct World {
    snap: Snapshot,
    nodes: Indexed,
    pods: Indexed,
    metrics: Indexed,
    /// Every other kind, by (kind, namespace/name).
    other: BTreeMap<(String, String), Value>,
    other_changed: bool,
    /// slo-controller-config given to the replay (replaces the recorded one).
    pub slo_override: Option<ConfigMap>,
}

/// `namespace/name` of an object (`/name` for a cluster-scoped one, as the scheduler keys).
fn key_of(v: &Value) -> String {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    format!("{}/{}", s("/metadata/namespace"), s("/metadata/name"))
}

fn pod_key(p: &Pod) -> String {
    let m = &p.metadata;
    format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or("")
    )
}

fn name<T: kube::Resource>(o: &Arc<T>) -> String {
    o.meta().name.clone().unwrap_or_default()
}

impl World {
    pub fn put_node(&mut self, n: Arc<Node>) {
        self.nodes.put(&mut self.snap.nodes, name(&n), n);
    }

    pub fn remove_node(&mut self, name_: &str) {
        self.nodes.remove(&mut self.snap.nodes, name_, name);
    }

    pub fn put_pod(&mut self, p: Arc<Pod>) {
        self.pods.put(&mut self.snap.pods, pod_key(&p), p);
    }

    pub fn remove_pod(&mut self, key: &str) {
        self.pods.remove(&mut self.snap.pods, key, |p| pod_key(p));
    }

    pub fn pod_mut(&mut self, key: &str) -> Option<&mut Pod> {
        let i = *self.pods.at.get(key)?;
        self.snap.pods.get_mut(i).map(Arc::make_mut)
    }

    pub fn put_metric(&mut self, m: Arc<NodeMetric>) {
        self.metrics.put(&mut self.snap.node_metrics, name(&m), m);
    }

    pub fn remove_metric(&mut self, name_: &str) {
        self.metrics
            .remove(&mut self.snap.node_metrics, name_, name);
    }

    pub fn put_other(&mut self, kind: &str, v: Value) {
        self.other.insert((kind.to_string(), key_of(&v)), v);
        self.other_changed = true;
    }

    pub fn remove_other(&mut self, kind: &str, key: &str) {
        self.other.remove(&(kind.to_string(), key.to_string()));
        self.other_changed = true;
    }

    /// The other objects of one kind.
    pub fn others<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.other
            .iter()
            .filter(move |((k, _), _)| k == kind)
            .map(|(_, v)| v)
    }

    /// The state as an explain snapshot (what the scheduler's loader, the manager's
    /// NodeResource calculation and a descheduling pass read).
    pub fn snapshot(&mut self) -> &Snapshot {
        if std::mem::take(&mut self.other_changed) {
            let keep = Snapshot {
                nodes: std::mem::take(&mut self.snap.nodes),
                pods: std::mem::take(&mut self.snap.pods),
                node_metrics: std::mem::take(&mut self.snap.node_metrics),
                ..Default::default()
            };
            self.snap = keep;
            for v in self.other.values() {
                if let Err(e) = self.snap.add_value("recording", 0, v.clone()) {
                    tracing::debug!(error = %e, "object left out of the replay's snapshot");
                }
            }
        }
        if let Some(cm) = &self.slo_override {
            self.snap.slo_config = Some(cm.clone());
        }
        &self.snap
    }

    /// [`World::snapshot`] taken out, leaving the world empty.
    pub fn take_snapshot(&mut self) -> Snapshot {
        self.snapshot();
        std::mem::take(self).snap
    }

    /// Keys of the objects of `kind` held now.
    pub fn keys_of(&self, kind: &str) -> Vec<String> {
        match kind {
            "Node" => self.nodes.at.keys().cloned().collect(),
            "Pod" => self.pods.at.keys().cloned().collect(),
            "NodeMetric" => self.metrics.at.keys().cloned().collect(),
            _ => self
                .other
                .keys()
                .filter(|(k, _)| k == kind)
                .map(|(_, key)| key.clone())
                .collect(),
        }
    }
}
