//! The DaemonSet controller (kube-controller-manager's `daemonset`): one pod on every node
//! the template's node selector and required affinity accept and whose NoSchedule and
//! NoExecute taints it tolerates (a DaemonSet pod tolerates the `node.kubernetes.io/*`
//! condition taints, as kube adds them), simulated nodes included. Each pod is pinned
//! with required node affinity on `metadata.name` and left to the scheduler, as kube does;
//! a changed template replaces pods one at a time (RollingUpdate, the
//! `controller-revision-hash` label) unless the strategy is OnDelete.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::replicaset::{active, owned_pod, ready};
use crate::api::placement::{node_matches, tolerates};

pub use super::revisions::LABEL_HASH as LABEL_REVISION;

#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Nodes that need a pod.
    pub create: Vec<String>,
    pub delete: Vec<String>,
    pub status: Option<Value>,
}

/// The node a DaemonSet pod is for: its binding, else its `metadata.name` affinity.
pub fn target_node(p: &Pod) -> Option<String> {
    let spec = p.spec.as_ref()?;
    if let Some(n) = &spec.node_name {
        return Some(n.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms.iter().find_map(|t| {
        t.match_fields.iter().flatten().find_map(|f| {
            (f.key == "metadata.name" && f.operator == "In")
                .then(|| f.values.as_ref()?.first().cloned())
                .flatten()
        })
    })
}

fn eligible(ds: &DaemonSet, node: &Node) -> bool {
    let Some(spec) = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref()) else {
        return false;
    };
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.metadata.name.as_deref().unwrap_or("");
    let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[]);
    node_matches(spec, labels, name)
        && taints.iter().all(|t| {
            t.effect == "PreferNoSchedule"
                || t.key.starts_with("node.kubernetes.io/")
                || tolerates(tolerations, t)
        })
}

pub fn revision_of(ds: &DaemonSet) -> String {
    let t = serde_json::to_value(ds.spec.as_ref().map(|s| &s.template)).unwrap_or_default();
    super::deployment::template_hash(&t)
}

pub fn plan(ds: &DaemonSet, nodes: &[&Node], owned: &[&Pod]) -> Plan {
    let mut out = Plan::default();
    let rev = revision_of(ds);
    let on_delete = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        == Some("OnDelete");
    let mut by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for p in owned.iter().copied().filter(|p| active(p)) {
        if let Some(n) = target_node(p) {
            by_node.entry(n).or_default().push(p);
        }
    }
    let (mut desired, mut current, mut misscheduled, mut readies, mut updated) = (0, 0, 0, 0, 0);
    let mut replacing = false;
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let pods = by_node.remove(&name).unwrap_or_default();
        let wanted = eligible(ds, node) && ds.metadata.deletion_timestamp.is_none();
        if wanted {
            desired += 1;
        }
        match (wanted, pods.as_slice()) {
            (true, []) => out.create.push(name),
            (true, [first, rest @ ..]) => {
                current += 1;
                readies += i32::from(ready(first));
                let fresh = |p: &Pod| {
                    p.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(LABEL_REVISION))
                        == Some(&rev)
                };
                if fresh(first) {
                    updated += 1;
                } else if !on_delete && !replacing {
                    // One at a time (maxUnavailable 1): the next pass brings the new one.
                    replacing = true;
                    out.delete
                        .push(first.metadata.name.clone().unwrap_or_default());
                }
                out.delete.extend(
                    rest.iter()
                        .map(|p| p.metadata.name.clone().unwrap_or_default()),
                );
            }
            (false, pods) => {
                misscheduled += i32::from(!pods.is_empty());
                out.delete.extend(
                    pods.iter()
                        .map(|p| p.metadata.name.clone().unwrap_or_default()),
                );
            }
        }
    }
    // Pods for nodes that no longer exist.
    for pods in by_node.values() {
        out.delete.extend(
            pods.iter()
                .map(|p| p.metadata.name.clone().unwrap_or_default()),
        );
    }
    let status = json!({
        "desiredNumberScheduled": desired, "currentNumberScheduled": current,
        "numberMisscheduled": misscheduled, "numberReady": readies, "numberAvailable": readies,
        "numberUnavailable": (desired - readies).max(0), "updatedNumberScheduled": updated,
        "observedGeneration": ds.metadata.generation.unwrap_or(0),
    });
    let cur = serde_json::to_value(ds.status.clone().unwrap_or_default()).unwrap_or_default();
    let same =
        status.as_object().into_iter().flatten().all(|(k, v)| {
            cur.get(k).and_then(Value::as_i64).unwrap_or(0) == v.as_i64().unwrap_or(0)
        });
    if !same {
        out.status = Some(status);
    }
    out
}

/// The DaemonSet's pod for `node`: pinned there by required node affinity.
pub fn pod_for(ds: &DaemonSet, node: &str) -> Option<Value> {
    let spec = ds.spec.as_ref()?;
    let mut pod = owned_pod(&spec.template, "apps/v1", "DaemonSet", &ds.metadata)?;
    pod["metadata"]["labels"][LABEL_REVISION] = revision_of(ds).into();
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    });
    Some(pod)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ds(selector: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({"metadata": {"name": "agent", "namespace": "d", "uid": "ds1", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}},
                    "spec": {"nodeSelector": selector, "containers": [{"name": "c", "image": "x"}]}}}}))
        .unwrap()
    }

    fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}),
        )
        .unwrap()
    }

    fn pod_on(d: &DaemonSet, node: &str, fresh: bool) -> Pod {
        let mut v = pod_for(d, node).unwrap();
        v["metadata"]["name"] = format!("agent-{node}").into();
        if !fresh {
            v["metadata"]["labels"][LABEL_REVISION] = "old".into();
        }
        v["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn one_pod_per_eligible_node() {
        let d = ds(json!({"role": "worker"}));
        let (a, b) = (
            node("a", json!({"role": "worker"}), json!([])),
            node("b", json!({}), json!([])),
        );
        let tainted = node(
            "t",
            json!({"role": "worker"}),
            json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        );
        let cond = node(
            "c",
            json!({"role": "worker"}),
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
        );
        let p = plan(&d, &[&a, &b, &tainted, &cond], &[]);
        assert_eq!(p.create, vec!["a", "c"]);
        assert_eq!(p.status.unwrap()["desiredNumberScheduled"], 2);
        let v = pod_for(&d, "a").unwrap();
        let pinned: Pod = serde_json::from_value(v).unwrap();
        assert_eq!(target_node(&pinned).as_deref(), Some("a"));
    }

    #[test]
    fn a_new_template_replaces_pods_one_at_a_time_and_strays_go() {
        let d = ds(json!({}));
        let (a, b) = (
            node("a", json!({}), json!([])),
            node("b", json!({}), json!([])),
        );
        let (old_a, old_b) = (pod_on(&d, "a", false), pod_on(&d, "b", false));
        let gone = pod_on(&d, "vanished", true);
        let p = plan(&d, &[&a, &b], &[&old_a, &old_b, &gone]);
        assert_eq!(p.delete, vec!["agent-a", "agent-vanished"]);
        assert!(p.create.is_empty());
        let fresh = pod_on(&d, "a", true);
        let p = plan(&d, &[&a, &b], &[&fresh, &old_b]);
        assert_eq!(p.delete, vec!["agent-b"]);
        assert_eq!(p.status.unwrap()["updatedNumberScheduled"], 1);
    }
}
