//! The DaemonSet controller (kube-controller-manager's `daemonset`): one pod on every node
//! the template's node selector and required affinity accept and whose NoSchedule and
//! NoExecute taints it tolerates (a DaemonSet pod tolerates the `node.kubernetes.io/*`
//! condition taints, as kube adds them), simulated nodes included. Each pod is pinned
//! with required node affinity on `metadata.name` and left to the scheduler, as kube does;
//! a changed template (the `controller-revision-hash` label) rolls out within
//! `maxUnavailable`, or `maxSurge` pods beside the old ones (RollingUpdate), or waits for
//! deletions (OnDelete). Available means ready for `minReadySeconds`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::replicaset::{active, available, owned_pod, ready};
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

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// A wanted node's pods by revision: the newest of each kind kept, extras to delete.
struct OnNode<'a> {
    node: String,
    new: Option<&'a Pod>,
    old: Option<&'a Pod>,
}

impl OnNode<'_> {
    fn available(&self, min_ready: i32, now_s: i64) -> bool {
        [self.new, self.old]
            .into_iter()
            .flatten()
            .any(|p| available(p, min_ready, now_s))
    }
}

pub fn plan(ds: &DaemonSet, nodes: &[&Node], owned: &[&Pod]) -> Plan {
    let mut out = Plan::default();
    let rev = revision_of(ds);
    let spec = ds.spec.as_ref();
    let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let now_s = k8s_openapi::jiff::Timestamp::now().as_second();
    let mut by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for p in owned.iter().copied().filter(|p| active(p)) {
        if let Some(n) = target_node(p) {
            by_node.entry(n).or_default().push(p);
        }
    }
    let (mut misscheduled, mut on_nodes) = (0, Vec::new());
    for n in nodes {
        let node = node_name(n);
        let pods = by_node.remove(&node).unwrap_or_default();
        let wanted = eligible(ds, n) && ds.metadata.deletion_timestamp.is_none();
        if !wanted {
            misscheduled += i32::from(!pods.is_empty());
            out.delete.extend(pods.iter().map(|p| name(p)));
            continue;
        }
        let fresh = |p: &&Pod| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_REVISION))
                == Some(&rev)
        };
        let (new, old): (Vec<&Pod>, Vec<&Pod>) = pods.into_iter().partition(fresh);
        out.delete.extend(
            new.iter()
                .skip(1)
                .chain(old.iter().skip(1))
                .map(|p| name(p)),
        );
        if new.is_empty() && old.is_empty() {
            out.create.push(node.clone());
        }
        on_nodes.push(OnNode {
            node,
            new: new.first().copied(),
            old: old.first().copied(),
        });
    }
    // Pods for nodes that no longer exist.
    out.delete
        .extend(by_node.values().flatten().map(|p| name(p)));
    let on_delete = spec
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        == Some("OnDelete");
    if !on_delete {
        rolling_update(ds, &on_nodes, min_ready, now_s, &mut out);
    }
    let desired = on_nodes.len() as i32;
    let count = |f: &dyn Fn(&OnNode) -> bool| on_nodes.iter().filter(|n| f(n)).count() as i32;
    let current = count(&|n| n.new.is_some() || n.old.is_some());
    let readies = count(&|n| [n.new, n.old].into_iter().flatten().any(ready));
    let availables = count(&|n| n.available(min_ready, now_s));
    let updated = count(&|n| n.new.is_some());
    let status = json!({
        "desiredNumberScheduled": desired, "currentNumberScheduled": current,
        "numberMisscheduled": misscheduled, "numberReady": readies, "numberAvailable": availables,
        "numberUnavailable": (desired - availables).max(0), "updatedNumberScheduled": updated,
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

fn node_name(n: &Node) -> String {
    n.metadata.name.clone().unwrap_or_default()
}

/// kube's DaemonSet RollingUpdate. Without surge, old pods are deleted — unavailable ones
/// at once, available ones while fewer than `maxUnavailable` nodes lack an available pod;
/// the next pass creates the new ones. With `maxSurge`, a new pod starts beside the old
/// one on up to `maxSurge` nodes at a time, and the old one goes once the new is
/// available.
fn rolling_update(ds: &DaemonSet, on_nodes: &[OnNode], min_ready: i32, now_s: i64, out: &mut Plan) {
    let desired = on_nodes.len() as i32;
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref());
    let int = |v: Option<&IntOrString>, default: i32| {
        v.map_or(default, |v| {
            super::deployment::resolve(Some(v), desired, true)
        })
    };
    let max_surge = int(ru.and_then(|r| r.max_surge.as_ref()), 0).max(0);
    let max_unavailable = int(ru.and_then(|r| r.max_unavailable.as_ref()), 1).max(0);
    let is_available = |p: &Pod| available(p, min_ready, now_s);
    // Nodes with only an old pod, and that pod.
    let stale: Vec<(&OnNode, &Pod)> = on_nodes
        .iter()
        .filter(|n| n.new.is_none())
        .filter_map(|n| Some((n, n.old?)))
        .collect();
    if max_surge == 0 {
        let mut budget = max_unavailable
            - on_nodes
                .iter()
                .filter(|n| !n.available(min_ready, now_s))
                .count() as i32;
        for (_, old) in stale {
            if !is_available(old) {
                out.delete.push(name(old));
            } else if budget > 0 {
                budget -= 1;
                out.delete.push(name(old));
            }
        }
        return;
    }
    for n in on_nodes {
        if let (Some(new), Some(old)) = (n.new, n.old)
            && is_available(new)
        {
            out.delete.push(name(old));
        }
    }
    let mut room = max_surge
        - on_nodes
            .iter()
            .filter(|n| n.old.is_some() && n.new.is_some_and(|p| !is_available(p)))
            .count() as i32;
    for (n, old) in stale {
        if !is_available(old) {
            out.delete.push(name(old));
        } else if room > 0 {
            room -= 1;
            out.create.push(n.node.clone());
        }
    }
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
        assert_eq!(p.delete, vec!["agent-vanished", "agent-a"]);
        assert!(p.create.is_empty());
        let fresh = pod_on(&d, "a", true);
        let p = plan(&d, &[&a, &b], &[&fresh, &old_b]);
        assert_eq!(p.delete, vec!["agent-b"]);
        assert_eq!(p.status.unwrap()["updatedNumberScheduled"], 1);
        // The new pod on a is not ready yet: b waits (maxUnavailable 1 is used up).
        let mut starting = pod_on(&d, "a", true);
        starting.status = None;
        let p = plan(&d, &[&a, &b], &[&starting, &old_b]);
        assert!(p.delete.is_empty(), "{:?}", p.delete);
    }

    #[test]
    fn max_surge_starts_the_new_pod_beside_the_old_one() {
        let mut d = ds(json!({}));
        d.spec.as_mut().unwrap().update_strategy = serde_json::from_value(
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        )
        .unwrap();
        let (a, b) = (
            node("a", json!({}), json!([])),
            node("b", json!({}), json!([])),
        );
        let (old_a, old_b) = (pod_on(&d, "a", false), pod_on(&d, "b", false));
        let p = plan(&d, &[&a, &b], &[&old_a, &old_b]);
        assert_eq!(p.create, ["a"], "one node at a time");
        assert!(p.delete.is_empty());
        // The new pod on a is available: the old one there goes, and b surges.
        let mut new_a = pod_on(&d, "a", true);
        new_a.metadata.name = Some("agent-a-new".into());
        let p = plan(&d, &[&a, &b], &[&old_a, &new_a, &old_b]);
        assert_eq!(p.delete, ["agent-a"]);
        assert_eq!(p.create, ["b"]);
    }

    #[test]
    fn available_waits_for_min_ready_seconds() {
        let mut d = ds(json!({}));
        d.spec.as_mut().unwrap().min_ready_seconds = Some(3600);
        let a = node("a", json!({}), json!([]));
        let mut p_a = pod_on(&d, "a", true);
        p_a.status = serde_json::from_value(json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}))
        .unwrap();
        assert_eq!(
            plan(&d, &[&a], &[&p_a]).status.unwrap()["numberAvailable"],
            1
        );
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        p_a.status = serde_json::from_value(json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}))
        .unwrap();
        let s = plan(&d, &[&a], &[&p_a]).status.unwrap();
        assert_eq!(
            (s["numberReady"].clone(), s["numberAvailable"].clone()),
            (json!(1), json!(0))
        );
    }
}
