//! `/mutate-pod`'s MultiQuotaTree node affinity (`multi_quota_tree_affinity.go`, gate
//! `MultiQuotaTree`): a new pod whose quota (its quota label, else its namespace's) lies in
//! a tree made by an ElasticQuotaProfile is required onto that profile's nodes — the
//! profile's `nodeSelector`, as node selector requirements added to every required term
//! (or as the only term).

use serde_json::{Value, json};

use super::super::Handlers;
use crate::api::extension::keys::{LABEL_QUOTA_NAME, LABEL_QUOTA_TREE_ID};

/// The requirements of the profile owning the pod's quota tree, if any.
fn requirements(h: &Handlers, pod: &Value, ns: &str) -> Option<Vec<Value>> {
    let label = pod
        .pointer(&format!(
            "/metadata/labels/{}",
            LABEL_QUOTA_NAME.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let name = label.unwrap_or(ns);
    let topo = h.quota_topology();
    // Koordinator's getQuotaInfo: by name, else the quota bound to the namespace.
    let info = topo.get(name).or_else(|| topo.bound_to_namespace(ns))?;
    if info.tree_id.is_empty() {
        return None;
    }
    let mut profiles = h.lookup.quota_profiles();
    profiles.sort_by(|a, b| {
        let key = |p: &crate::api::quota::ElasticQuotaProfile| {
            (p.metadata.namespace.clone(), p.metadata.name.clone())
        };
        key(a).cmp(&key(b))
    });
    let profile = profiles.into_iter().find(|p| {
        let labels = p.metadata.labels.as_ref();
        labels.and_then(|l| l.get(LABEL_QUOTA_TREE_ID)) == Some(&info.tree_id)
    })?;
    let sel = profile.spec.node_selector.as_ref()?;
    let mut out: Vec<Value> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| json!({"key": k, "operator": "In", "values": [v]}))
        .collect();
    for e in sel.match_expressions.iter().flatten() {
        out.push(json!({"key": e.key, "operator": e.operator, "values": e.values}));
    }
    Some(out)
}

/// Adds the tree's node requirements to a pod being created; true when it did.
pub fn add(h: &Handlers, pod: &mut Value, ns: &str) -> bool {
    let Some(reqs) = requirements(h, pod, ns) else {
        return false;
    };
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return false;
    };
    let required = spec
        .entry("affinity")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(|a| a.entry("nodeAffinity").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .map(|n| {
            n.entry("requiredDuringSchedulingIgnoredDuringExecution")
                .or_insert_with(|| json!({}))
        })
        .and_then(Value::as_object_mut);
    let Some(required) = required else {
        return false;
    };
    let terms = required
        .entry("nodeSelectorTerms")
        .or_insert_with(|| json!([]));
    let Some(terms) = terms.as_array_mut() else {
        return false;
    };
    if terms.is_empty() {
        terms.push(json!({"matchExpressions": reqs}));
        return true;
    }
    for term in terms.iter_mut() {
        let Some(t) = term.as_object_mut() else {
            continue;
        };
        let exprs = t.entry("matchExpressions").or_insert_with(|| json!([]));
        if let Some(list) = exprs.as_array_mut() {
            list.extend(reqs.iter().cloned());
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use crate::api::extension::keys::*;
    use crate::manager::webhook::lookup::Fixed;
    use crate::manager::webhook::pod_mutate::handle;
    use crate::manager::webhook::test_util::{handlers_with, patched, request};

    fn quota(
        ns: &str,
        name: &str,
        labels: Value,
        annotations: Value,
    ) -> Arc<crate::api::quota::ElasticQuota> {
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota", "metadata": {"namespace": ns, "name": name,
                "labels": labels, "annotations": annotations}, "spec": {}}))
            .unwrap(),
        )
    }

    fn profile(
        name: &str,
        tree: &str,
        quota: &str,
        pool: &str,
    ) -> Arc<crate::api::quota::ElasticQuotaProfile> {
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "quota.koordinator.sh/v1alpha1",
                "kind": "ElasticQuotaProfile", "metadata": {"namespace": "kube-system", "name": name,
                "labels": {LABEL_QUOTA_TREE_ID: tree}},
                "spec": {"quotaName": quota, "nodeSelector": {"matchLabels": {"node-pool": pool}}}}))
            .unwrap(),
        )
    }

    /// Koordinator's `TestAddNodeAffinityForMultiQuotaTree` fixtures.
    fn fixed() -> Fixed {
        let tree = |t: &str, parent: Option<&str>, is_parent: bool| {
            let mut l = json!({LABEL_QUOTA_TREE_ID: t});
            if let Some(p) = parent {
                l[LABEL_QUOTA_PARENT] = json!(p);
            }
            if is_parent {
                l[LABEL_QUOTA_IS_PARENT] = json!("true");
            }
            l
        };
        Fixed {
            quotas: vec![
                quota("kube-system", "other-quota", json!({}), json!({})),
                quota(
                    "kube-system",
                    "root-quota-a",
                    tree("tree1", None, true),
                    json!({}),
                ),
                quota(
                    "kube-system",
                    "root-quota-a-child1",
                    tree("tree1", Some("root-quota-a"), false),
                    json!({}),
                ),
                quota(
                    "namespace1",
                    "namespace1",
                    tree("tree1", Some("root-quota-a"), false),
                    json!({}),
                ),
                quota(
                    "kube-system",
                    "root-quota-b",
                    tree("tree2", None, true),
                    json!({ANNOTATION_QUOTA_NAMESPACES: "[\"namespace2\"]"}),
                ),
                quota(
                    "kube-system",
                    "root-quota-b-child1",
                    tree("tree2", Some("root-quota-b"), false),
                    json!({}),
                ),
            ],
            quota_profiles: vec![
                profile("profileA", "tree1", "root-quota-a", "nodePoolA"),
                profile("profileB", "tree2", "root-quota-b", "nodePoolB"),
            ],
            ..Fixed::default()
        }
    }

    fn mutate(pod: Value) -> Value {
        let gates = crate::manager::features::defaults()
            .with(crate::manager::features::MULTI_QUOTA_TREE, true);
        let h = handlers_with(fixed(), gates, 0);
        let ns = pod["metadata"]["namespace"].as_str().unwrap().to_string();
        let v = handle(&h, &request("Pod", "CREATE", &ns, Some(pod.clone()), None));
        patched(&pod, &v)
    }

    fn pod(ns: &str, quota: Option<&str>, affinity: Option<Value>) -> Value {
        let mut p = json!({"metadata": {"namespace": ns, "name": "test-pod-1"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}});
        if let Some(q) = quota {
            p["metadata"]["labels"] = json!({LABEL_QUOTA_NAME: q});
        }
        if let Some(a) = affinity {
            p["spec"]["affinity"] = a;
        }
        p
    }

    fn required(exprs: Value) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}})
    }

    fn pool(p: &str) -> Value {
        json!({"key": "node-pool", "operator": "In", "values": [p]})
    }

    #[test]
    fn koordinators_multi_quota_tree_cases() {
        let zone = json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["cn-hangzhou-a"]});
        let cases = [
            ("no quota label", pod("default", None, None), None),
            (
                "no quota profile",
                pod("default", Some("other-quota"), None),
                None,
            ),
            (
                "add node affinity",
                pod("default", Some("root-quota-a-child1"), None),
                Some(required(json!([pool("nodePoolA")]))),
            ),
            (
                "append node affinity",
                pod(
                    "default",
                    Some("root-quota-a-child1"),
                    Some(required(json!([zone.clone()]))),
                ),
                Some(required(json!([zone, pool("nodePoolA")]))),
            ),
            (
                "multi quotas",
                pod("default", Some("root-quota-b-child1"), None),
                Some(required(json!([pool("nodePoolB")]))),
            ),
            (
                "default quota",
                pod("namespace1", None, None),
                Some(required(json!([pool("nodePoolA")]))),
            ),
            (
                "default quota 2",
                pod("namespace2", None, None),
                Some(required(json!([pool("nodePoolB")]))),
            ),
        ];
        for (name, input, want) in cases {
            let out = mutate(input);
            assert_eq!(out["spec"].get("affinity").cloned(), want, "{name}");
        }
    }

    #[test]
    fn only_new_pods_and_only_with_the_gate() {
        let p = pod("default", Some("root-quota-a-child1"), None);
        let h = handlers_with(fixed(), crate::manager::features::defaults(), 0);
        let v = handle(
            &h,
            &request("Pod", "CREATE", "default", Some(p.clone()), None),
        );
        assert!(
            patched(&p, &v)["spec"].get("affinity").is_none(),
            "gate off"
        );
        let gates = crate::manager::features::defaults()
            .with(crate::manager::features::MULTI_QUOTA_TREE, true);
        let h = handlers_with(fixed(), gates, 0);
        let v = handle(
            &h,
            &request("Pod", "UPDATE", "default", Some(p.clone()), Some(p.clone())),
        );
        assert!(
            patched(&p, &v)["spec"].get("affinity").is_none(),
            "updates are left alone"
        );
    }
}
