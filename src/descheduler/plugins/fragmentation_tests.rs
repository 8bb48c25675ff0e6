//! Koordinator's `TestFragmentationAware`, `TestScoreNodeImbalance` and
//! `TestScorePodRemovalGain`, case for case with their names. Its fake evictor lets every pod through, so the pods here have an owner
//! (DefaultEvictor's filter); its one-node cases get an empty spare node (a pass needs
//! two), and Go's zero-valued `NodeFit` is written out as `nodeFit: false`.

// The tables are Koordinator's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::descheduler::testkit::*;

fn node1() -> Node {
    node(
        "node1",
        4000,
        4000,
        10,
        json!({"metadata": {"labels": {"pool": "test"}}}),
    )
}

fn node2() -> Node {
    node("node2", 4000, 4000, 10, json!({}))
}

fn p(name: &str, cpu: i64, mem: i64, extra: Value) -> Pod {
    pod(name, cpu, mem, "node1", with(&[rs_owner(), extra]))
}

fn args(extra: Value) -> Value {
    with(&[
        json!({"resources": ["cpu", "memory"], "imbalanceThreshold": 0.1, "minImprovementThreshold": 0.01, "nodeFit": false}),
        extra,
    ])
}

#[test]
fn fragmentation_aware() {
    let labelled = json!({"metadata": {"labels": {"foo": "bar"}}});
    let system = json!({"metadata": {"namespace": "kube-system"}});
    let exclude = json!({"evictableNamespaces": {"exclude": ["kube-system"]}});
    let cases: Vec<(&str, Value, Vec<Node>, Vec<Pod>, Value, &[&str])> = vec![
        (
            "paused plugin does nothing",
            args(json!({"paused": true})),
            vec![node1(), node2()],
            vec![p("pod1", 3000, 1000, json!({}))],
            json!({}),
            &[],
        ),
        (
            "nodeSelector filters nodes",
            args(json!({"nodeSelector": {"matchLabels": {"pool": "test"}}})),
            vec![node1(), node2()],
            vec![
                p("pod1", 3000, 1000, json!({})),
                pod("pod2", 3000, 1000, "node2", rs_owner()),
            ],
            json!({}),
            &["pod1"],
        ),
        (
            "PodSelectors filter pods",
            args(
                json!({"podSelectors": [{"selector": {"matchLabels": {"foo": "bar"}}}, {"selector": null}]}),
            ),
            vec![node1(), node2()],
            vec![
                p("pod1", 2000, 500, labelled),
                p("pod2", 1000, 500, json!({})),
            ],
            json!({}),
            &["pod1"],
        ),
        (
            "node below imbalanceThreshold evicts nothing",
            args(json!({"imbalanceThreshold": 0.5})),
            vec![node1(), node2()],
            vec![p("pod1", 2000, 2000, json!({}))],
            json!({}),
            &[],
        ),
        (
            "node above threshold chooses best-gain pod",
            args(json!({})),
            vec![node1(), node2()],
            vec![
                p("pod1", 2500, 500, json!({})),
                p("pod2", 500, 500, json!({})),
            ],
            json!({}),
            &["pod1"],
        ),
        (
            "non-evictable pods are not candidates",
            args(exclude.clone()),
            vec![node1(), node2()],
            vec![
                p("pod1", 2500, 500, system.clone()),
                p("pod2", 2000, 200, json!({})),
            ],
            json!({}),
            &["pod2"],
        ),
        (
            "non-evictable pods still count in stdBefore",
            args(exclude),
            vec![node1(), node2()],
            vec![
                p("pod1", 2000, 100, system),
                p("pod2", 1000, 100, json!({})),
            ],
            json!({}),
            &["pod2"],
        ),
        (
            "minImprovementThreshold blocks weak candidate",
            args(json!({"minImprovementThreshold": 0.5})),
            vec![node1(), node2()],
            vec![p("pod1", 2500, 500, json!({}))],
            json!({}),
            &[],
        ),
        (
            "NodeFit skips pods that cannot fit elsewhere",
            args(json!({"nodeFit": true})),
            vec![node1(), node2()],
            vec![p("pod1", 5000, 500, json!({}))],
            json!({}),
            &[],
        ),
        // DefaultEvictor's PreEvictionFilter (nodeFit) refuses: the only other node is cordoned.
        (
            "PreEvictionFilter false prevents eviction",
            args(json!({})),
            vec![
                node1(),
                node(
                    "node2",
                    4000,
                    4000,
                    10,
                    json!({"spec": {"unschedulable": true}}),
                ),
            ],
            vec![p("pod1", 2500, 500, json!({}))],
            json!({"nodeFit": true}),
            &[],
        ),
        (
            "evictBestCandidate passes useful reason",
            args(json!({})),
            vec![node1(), node2()],
            vec![p("pod1", 2500, 500, json!({}))],
            json!({}),
            &["pod1"],
        ),
        (
            "DryRun prevents actual eviction",
            args(json!({"dryRun": true})),
            vec![node1(), node2()],
            vec![p("pod1", 2500, 500, json!({}))],
            json!({}),
            &[],
        ),
    ];
    for (name, a, nodes, pods, evictor, want) in cases {
        let r = pass("FragmentationAware", "balance", a, evictor, nodes, pods);
        assert_eq!(evicted(&r), want, "{name}");
        if name == "evictBestCandidate passes useful reason" {
            assert!(
                r.evictions[0]
                    .reason
                    .starts_with("fragmentation reduction: stdBefore=0.2500 stdAfter=0.0000"),
                "{}",
                r.evictions[0].reason
            );
        }
    }
}

#[test]
fn args_are_validated_as_koordinator() {
    let bad = [
        (json!({"resources": ["cpu", "cpu"]}), "duplicate"),
        (json!({"imbalanceThreshold": -1}), "imbalanceThreshold"),
        (
            json!({"minImprovementThreshold": -0.5}),
            "minImprovementThreshold",
        ),
        (
            json!({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}),
            "only one of Include/Exclude",
        ),
        (
            json!({"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}),
            "nodeSelector",
        ),
    ];
    for (a, want) in bad {
        let e = super::super::Upstream::new("FragmentationAware", &a)
            .err()
            .expect("refused");
        assert!(e.to_string().contains(want), "{a}: {e}");
    }
}

#[test]
fn score_node_imbalance() {
    use super::{FragmentationAware, FragmentationAwareArgs};
    use crate::descheduler::framework::plugin::NodeInput;
    use crate::descheduler::framework::podview::PodView;
    use std::sync::Arc;
    let plugin = |resources: Value| {
        let a: FragmentationAwareArgs =
            serde_json::from_value(json!({"resources": resources})).unwrap();
        FragmentationAware::new(a).unwrap()
    };
    let input = |cpu: i64, mem: i64, extra: Value, pods: Vec<Pod>| NodeInput {
        node: Arc::new(node("n", cpu, mem, 10, extra)),
        metric: None,
        pods: pods.iter().map(|p| Arc::new(PodView::from(p))).collect(),
    };
    let score = |pl: &FragmentationAware, i: &NodeInput| pl.imbalance_of(i, i.pods.iter());
    let cpu_mem = plugin(json!(["cpu", "memory"]));
    let p = |cpu: i64, mem: i64| pod("p1", cpu, mem, "n", json!({}));
    assert!(
        score(&cpu_mem, &input(1000, 1024, json!({}), vec![p(500, 512)])) < 0.01,
        "balanced CPU/memory node gives low stddev"
    );
    assert!(
        score(&cpu_mem, &input(1000, 1024, json!({}), vec![p(900, 100)])) > 0.1,
        "CPU-heavy node gives high stddev"
    );
    assert_eq!(
        score(&cpu_mem, &input(1000, 0, json!({}), vec![p(500, 512)])),
        0.0,
        "zero allocatable resource is skipped"
    );
    let gpu = plugin(json!(["example.com/gpu", "cpu"]));
    let gpu_node = json!({"status": {"allocatable": {"example.com/gpu": "2"}}});
    let gpu_pod = pod(
        "p1",
        -1,
        -1,
        "n",
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]}}),
    );
    assert_eq!(
        score(&gpu, &input(1000, 1024, gpu_node, vec![gpu_pod])),
        0.25,
        "custom resource works if configured"
    );
    // TestScorePodRemovalGain: removing the CPU-heavy pod helps; removing a balancing one hurts.
    let two = input(
        1000,
        1024,
        json!({}),
        vec![
            pod("cpu-heavy", 800, 100, "n", json!({})),
            pod("balanced", 100, 100, "n", json!({})),
        ],
    );
    let gain = |i: &NodeInput, k: usize| {
        score(&cpu_mem, i)
            - cpu_mem.imbalance_of(
                i,
                i.pods
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != k)
                    .map(|(_, p)| p),
            )
    };
    assert!(gain(&two, 0) > 0.0);
    let pair = input(
        1000,
        1024,
        json!({}),
        vec![
            pod("podA", 200, 800, "n", json!({})),
            pod("podB", 600, 100, "n", json!({})),
        ],
    );
    assert!(gain(&pair, 1) < 0.0);
}
