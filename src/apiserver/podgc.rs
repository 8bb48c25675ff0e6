//! Pod garbage collection, as kube-controller-manager's PodGC does for orphans: a pod
//! bound to a node that does not exist is force-deleted once it has been orphaned for the
//! grace period (kube-controller-manager quarantines 40 s). Without it, pods applied with
//! a `nodeName` of a node that never registers stay Pending and their deletion hangs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::store::{Change, Filter, Skippable, Store};

fn key(kind: &str) -> (String, String) {
    (String::new(), kind.to_string())
}

/// One pass: pods orphaned for at least `grace` (first seen orphaned per `seen`) are
/// deleted; returns their `namespace/name`.
pub fn pass(store: &Store, seen: &mut HashMap<String, Instant>, grace: Duration) -> Vec<String> {
    let (_, nodes) = store.list(&key("nodes"), &Filter::default());
    let nodes: HashSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let (_, pods) = store.list(&key("pods"), &Filter::default());
    let mut orphans = HashSet::new();
    let mut removed = Vec::new();
    for pod in &pods {
        let value = pod.value();
        let node = value
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if node.is_empty() || nodes.contains(node) {
            continue;
        }
        let id = format!("{}/{}/{}", pod.namespace, pod.name, pod.uid);
        orphans.insert(id.clone());
        let since = *seen.entry(id).or_insert_with(Instant::now);
        if since.elapsed() < grace {
            continue;
        }
        let uid = pod.uid.clone();
        let deleted = store.commit(&key("pods"), &pod.namespace, &pod.name, |cur| match cur {
            Some(c) if c.uid == uid => Ok(Change::Delete),
            _ => Err(Skippable::Skip),
        });
        if deleted.is_ok() {
            orphans.remove(&format!("{}/{}/{}", pod.namespace, pod.name, pod.uid));
            tracing::info!(pod = %format!("{}/{}", pod.namespace, pod.name), node, "deleted a pod bound to a node that does not exist");
            removed.push(format!("{}/{}", pod.namespace, pod.name));
        }
    }
    seen.retain(|id, _| orphans.contains(id));
    removed
}

/// Runs [`pass`] every `min(grace, 10 s)` until `stop`.
pub async fn run(store: Arc<Store>, grace: Duration, stop: CancellationToken) {
    let every = grace.clamp(Duration::from_millis(200), Duration::from_secs(10));
    let mut tick = tokio::time::interval(every);
    let mut seen = HashMap::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        pass(&store, &mut seen, grace);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::store::{StoreError, StoreOptions};
    use serde_json::json;

    fn put(s: &Store, kind: &str, ns: &str, name: &str, v: Value) {
        s.commit::<StoreError>(&key(kind), ns, name, |_| Ok(Change::Put(v)))
            .unwrap();
    }

    #[test]
    fn orphans_go_after_the_grace_and_bound_pods_stay() {
        let s = Store::temporary(StoreOptions::default()).unwrap();
        put(
            &s,
            "nodes",
            "",
            "n1",
            json!({"metadata": {"name": "n1", "uid": "u-n1"}}),
        );
        for (name, node) in [("ok", "n1"), ("orphan", "ghost"), ("pending", "")] {
            let pod = json!({"metadata": {"name": name, "namespace": "d", "uid": format!("u-{name}")},
                "spec": {"nodeName": node}});
            put(&s, "pods", "d", name, pod);
        }
        let mut seen = HashMap::new();
        assert!(
            pass(&s, &mut seen, Duration::from_millis(50)).is_empty(),
            "quarantined first"
        );
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(pass(&s, &mut seen, Duration::from_millis(50)), ["d/orphan"]);
        assert!(s.get(&key("pods"), "d", "ok").is_some());
        assert!(s.get(&key("pods"), "d", "pending").is_some());
        assert!(seen.is_empty());
    }
}
