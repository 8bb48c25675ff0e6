//! InterPodAffinity: required terms and symmetry, preferred scoring, kube's
//! hardPodAffinityWeight cases.

use serde_json::{Value, json};

use crate::scheduler::framework::{ClusterState, CycleState, Plugin, PodInfo};
use crate::scheduler::plugins::interpod::InterPodAffinity;
use crate::scheduler::test_util::{cluster, node_json, pod};

fn placed(c: &mut ClusterState, name: &str, node: &str, labels: Value, affinity: Value) {
    let p = json!({"metadata": {"name": name, "namespace": "d", "labels": labels},
        "spec": {"nodeName": node, "affinity": affinity, "containers": [{"name": "c"}]}});
    c.upsert_pod(std::sync::Arc::new(serde_json::from_value(p).unwrap()));
}

fn incoming(affinity: Value) -> PodInfo {
    pod(
        json!({"metadata": {"name": "in", "namespace": "d", "labels": {"app": "web"}}, "spec": {"affinity": affinity, "containers": [{"name": "c"}]}}),
    )
}

fn zoned() -> ClusterState {
    let mut nodes = Vec::new();
    for (n, z) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        let mut v = node_json(n, "4", "8Gi");
        v["metadata"]["labels"]["zone"] = z.into();
        nodes.push(v);
    }
    cluster(nodes)
}

fn verdicts(c: &ClusterState, p: &PodInfo) -> Vec<String> {
    let plugin = InterPodAffinity {
        ignore_existing_preferred: false,
        hard_weight: 1,
    };
    let mut state = CycleState::default();
    let (s, _) = plugin.pre_filter(&mut state, p, c);
    c.nodes
        .iter()
        .map(|n| {
            if s.code == crate::scheduler::framework::Code::Skip {
                String::new()
            } else {
                plugin.filter(&state, p, n, c).message()
            }
        })
        .collect()
}

fn term(app: &str, key: &str) -> Value {
    json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key})
}

#[test]
fn required_affinity_anti_affinity_and_symmetry() {
    let mut c = zoned();
    placed(&mut c, "db", "a1", json!({"app": "db"}), json!(null));
    let wants_db = incoming(
        json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("db", "zone")]}}),
    );
    assert_eq!(
        verdicts(&c, &wants_db),
        ["", "", "node(s) didn't match pod affinity rules"]
    );
    let avoids_db = incoming(
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("db", "kubernetes.io/hostname")]}}),
    );
    assert_eq!(
        verdicts(&c, &avoids_db),
        ["node(s) didn't match pod anti-affinity rules", "", ""]
    );
    // The first pod of a group may go anywhere its own terms select it.
    let first = incoming(
        json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web", "zone")]}}),
    );
    assert_eq!(verdicts(&c, &first), ["", "", ""]);
    // An existing pod's anti-affinity keeps the incoming pod out of its zone.
    placed(
        &mut c,
        "loner",
        "b1",
        json!({"app": "loner"}),
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web", "zone")]}}),
    );
    let plain = incoming(json!(null));
    assert_eq!(
        verdicts(&c, &plain),
        [
            "",
            "",
            "node(s) didn't satisfy existing pods anti-affinity rules"
        ]
    );
}

#[test]
fn preferred_terms_score_min_max() {
    let mut c = zoned();
    placed(&mut c, "cache", "a1", json!({"app": "cache"}), json!(null));
    let p = incoming(
        json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term("cache", "zone")}]}}),
    );
    let plugin = InterPodAffinity {
        ignore_existing_preferred: false,
        hard_weight: 1,
    };
    let mut state = CycleState::default();
    let nodes: Vec<usize> = (0..c.nodes.len()).collect();
    assert!(plugin.pre_score(&mut state, &p, &nodes, &c).is_success());
    let mut scores: Vec<i64> = c
        .nodes
        .iter()
        .map(|n| plugin.score(&state, &p, n, &c).unwrap())
        .collect();
    assert_eq!(scores, [10, 10, 0]);
    plugin.normalize(&state, &p, &mut scores);
    assert_eq!(scores, [100, 100, 0]);
}

/// kube's TestPreferredAffinityWithHardPodAffinitySymmetricWeight: an existing pod's
/// required affinity to the incoming pod scores its domains by `hardPodAffinityWeight`
/// ("with default weight"), and not at all with weight 0 ("with zero weight").
#[test]
fn hard_pod_affinity_symmetric_weight() {
    let mut c = zoned();
    placed(
        &mut c,
        "wants-web",
        "a1",
        json!({"app": "cache"}),
        json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web", "zone")]}}),
    );
    let p = incoming(json!(null));
    for (weight, raw, normalized) in [(1, [1, 1, 0], [100, 100, 0]), (0, [0; 3], [0; 3])] {
        let plugin = InterPodAffinity {
            ignore_existing_preferred: false,
            hard_weight: weight,
        };
        let mut state = CycleState::default();
        let nodes: Vec<usize> = (0..c.nodes.len()).collect();
        let pre = plugin.pre_score(&mut state, &p, &nodes, &c);
        let mut scores: Vec<i64> = c
            .nodes
            .iter()
            .map(|n| match pre.is_success() {
                true => plugin.score(&state, &p, n, &c).unwrap(),
                false => 0,
            })
            .collect();
        assert_eq!(scores, raw, "weight {weight}");
        plugin.normalize(&state, &p, &mut scores);
        assert_eq!(scores, normalized, "weight {weight}");
    }
    let bad = serde_json::json!({"hardPodAffinityWeight": 101});
    let err = crate::scheduler::plugins::build("InterPodAffinity", Some(&bad))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not in valid range [0-100]"), "{err}");
}
