use serde_json::json;

use super::*;
use crate::descheduler::framework::fit::NodeFit;
use crate::descheduler::framework::plugin::NodeInput;
use k8s_openapi::api::core::v1::Node;

fn node(name: &str, extra: Value) -> Arc<Node> {
    let mut v = json!({"metadata": {"name": name, "labels": {"zone": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
    json_patch::merge(&mut v, &extra);
    Arc::new(serde_json::from_value(v).unwrap())
}

fn pod(name: &str, extra: Value) -> Arc<PodView> {
    let mut v = json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": []}, "status": {"phase": "Running"}});
    json_patch::merge(&mut v, &extra);
    Arc::new(PodView::json(v))
}

fn names(u: &Upstream, inputs: &[NodeInput]) -> Vec<String> {
    let now = 1_767_225_600_000 + 3_600_000; // an hour after creation
    let nodes: Vec<&Arc<Node>> = inputs.iter().map(|i| &i.node).collect();
    let by_node: std::collections::HashMap<&str, Vec<Arc<PodView>>> = inputs
        .iter()
        .map(|i| {
            (
                i.node.metadata.name.as_deref().unwrap_or(""),
                i.pods.clone(),
            )
        })
        .collect();
    let fit = NodeFit::new(&nodes, &by_node);
    let env = Env {
        inputs,
        fit: &fit,
        now_ms: now,
    };
    per_pod::candidates(&u.plugin, &env)
        .into_iter()
        .map(|(p, _, _)| p.name.clone())
        .collect()
}

#[test]
fn each_plugin_names_its_candidates() {
    let restarts = json!({"status": {"containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 7}]}});
    let inputs = vec![
        NodeInput {
            node: node(
                "a",
                json!({"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
            ),
            metric: None,
            pods: vec![
                pod(
                    "failed",
                    json!({"status": {"phase": "Failed", "reason": "Evicted"}}),
                ),
                pod("restarts", restarts),
                pod(
                    "tolerant",
                    json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}),
                ),
                pod(
                    "pinned",
                    json!({"spec": {"tolerations": [{"operator": "Exists"}], "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}}}),
                ),
            ],
        },
        NodeInput {
            node: node("b", json!({})),
            metric: None,
            pods: vec![],
        },
    ];
    let up = |n: &str, a: Value| Upstream::new(n, &a).unwrap();
    assert_eq!(
        names(
            &up("RemoveFailedPods", json!({"reasons": ["Evicted"]})),
            &inputs
        ),
        ["failed"]
    );
    assert!(
        names(
            &up("RemoveFailedPods", json!({"reasons": ["OOMKilled"]})),
            &inputs
        )
        .is_empty()
    );
    assert!(
        names(
            &up("RemoveFailedPods", json!({"minPodLifetimeSeconds": 7200})),
            &inputs
        )
        .is_empty()
    );
    assert_eq!(
        names(
            &up(
                "RemovePodsHavingTooManyRestarts",
                json!({"podRestartThreshold": 5})
            ),
            &inputs
        ),
        ["restarts"]
    );
    assert_eq!(
        names(
            &up(
                "PodLifeTime",
                json!({"maxPodLifeTimeSeconds": 60, "states": ["Failed"]})
            ),
            &inputs
        ),
        ["failed"]
    );
    assert_eq!(
        names(&up("RemovePodsViolatingNodeTaints", json!({})), &inputs),
        ["failed", "restarts"]
    );
    assert!(
        names(
            &up(
                "RemovePodsViolatingNodeTaints",
                json!({"excludedTaints": ["k=v"]})
            ),
            &inputs
        )
        .is_empty()
    );
    let required = json!({"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]});
    assert_eq!(
        names(&up("RemovePodsViolatingNodeAffinity", required), &inputs),
        ["pinned"]
    );
    assert!(
        Upstream::new("RemovePodsViolatingNodeAffinity", &json!({})).is_err(),
        "nodeAffinityType needs to be set"
    );
    let e = Upstream::new("PodLifeTime", &json!({"podRestartThreshold": 1}))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("unknown field \"podRestartThreshold\""), "{e}");
    assert!(
        Upstream::new("PodLifeTime", &Value::Null).is_err(),
        "maxPodLifeTimeSeconds is required"
    );
}
