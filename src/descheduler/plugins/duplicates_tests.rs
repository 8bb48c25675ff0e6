//! sigs.k8s.io/descheduler's `TestFindDuplicatePods` and `TestRemoveDuplicatesUniformly`,
//! case for case with their descriptions.

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::descheduler::testkit::*;

fn test_node(name: &str, extra: Value) -> Node {
    node(name, 2000, 3000, 10, extra)
}

fn on(name: &str, node: &str, extra: Value) -> Pod {
    pod(name, 100, 0, node, extra)
}

/// `buildTestPodWithRSOwnerRefWithNamespaceForNode1`.
fn rs_in(name: &str, ns: &str, extra: Value) -> Pod {
    on(
        name,
        "n1",
        with(&[rs_owner(), json!({"metadata": {"namespace": ns}}), extra]),
    )
}

/// `buildTestPodWithImage`: a second container running `image`.
fn with_image(name: &str, image: &str) -> Pod {
    on(
        name,
        "n1",
        with(&[
            rs_owner(),
            json!({"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "100m"}}}, {"name": image, "image": image}]}}),
        ]),
    )
}

fn image(img: &str) -> Value {
    json!({"spec": {"containers": [{"name": "c", "image": img, "resources": {"requests": {"cpu": "100m"}}}]}})
}

fn count(pods: Vec<Pod>, nodes: Vec<Node>, exclude: &[&str], node_fit: bool) -> usize {
    let r = pass(
        "RemoveDuplicates",
        "balance",
        json!({"excludeOwnerKinds": exclude}),
        json!({"nodeFit": node_fit}),
        nodes,
        pods,
    );
    r.evictions.len()
}

fn two_nodes() -> Vec<Node> {
    vec![test_node("n1", json!({})), test_node("n2", json!({}))]
}

fn dev3() -> Vec<Pod> {
    ["p1", "p2", "p3"]
        .map(|n| rs_in(n, "dev", json!({})))
        .to_vec()
}

fn test3() -> Vec<Pod> {
    ["p8", "p9", "p10"]
        .map(|n| rs_in(n, "test", json!({})))
        .to_vec()
}

fn unevictable() -> Vec<Pod> {
    let hostpath = json!({"spec": {"volumes": [{"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {"sizeLimit": "10"}}]}});
    vec![
        on("p4", "n1", ds_owner()),
        on("p5", "n1", with(&[pod_owner(), hostpath])),
        on("p6", "n1", mirror()),
        on(
            "p7",
            "n1",
            json!({"metadata": {"namespace": "kube-system"}, "spec": {"priority": 2_000_000_000}}),
        ),
    ]
}

#[test]
fn find_duplicate_pods() {
    let taint =
        json!({"spec": {"taints": [{"key": "hardware", "value": "gpu", "effect": "NoSchedule"}]}});
    let west = json!({"spec": {"nodeSelector": {"datacenter": "west"}}});
    let cases: Vec<(&str, Vec<Pod>, Vec<Node>, &[&str], bool, usize)> = vec![
        (
            "Three pods in the `dev` Namespace, bound to same ReplicaSet. 1 should be evicted.",
            dev3(),
            two_nodes(),
            &[],
            false,
            1,
        ),
        (
            "Three pods in the `dev` Namespace, bound to same ReplicaSet, but ReplicaSet kind is excluded. 0 should be evicted.",
            dev3(),
            two_nodes(),
            &["ReplicaSet"],
            false,
            0,
        ),
        (
            "Three Pods in the `test` Namespace, bound to same ReplicaSet. 1 should be evicted.",
            test3(),
            two_nodes(),
            &[],
            false,
            1,
        ),
        (
            "Three Pods in the `dev` Namespace, three Pods in the `test` Namespace. Bound to ReplicaSet with same name. 4 should be evicted.",
            [dev3(), test3()].concat(),
            two_nodes(),
            &[],
            false,
            2,
        ),
        (
            "Pods are: part of DaemonSet, with local storage, mirror pod annotation, critical pod annotation - none should be evicted.",
            unevictable(),
            two_nodes(),
            &[],
            false,
            0,
        ),
        (
            "Test all Pods: 4 should be evicted.",
            [dev3(), unevictable(), test3()].concat(),
            two_nodes(),
            &[],
            false,
            2,
        ),
        (
            "Pods with the same owner but different images should not be evicted",
            vec![
                rs_in("p11", "different-images", image("foo")),
                rs_in("p12", "different-images", image("bar")),
            ],
            two_nodes(),
            &[],
            false,
            0,
        ),
        (
            "Pods with multiple containers should not match themselves",
            vec![with_image("p13", "foo")],
            two_nodes(),
            &[],
            false,
            0,
        ),
        (
            "Pods with matching ownerrefs and at not all matching image should not trigger an eviction",
            vec![
                rs_in("p11", "different-images", image("foo")),
                with_image("p13", "foo"),
            ],
            two_nodes(),
            &[],
            false,
            0,
        ),
        (
            "Three pods in the `dev` Namespace, bound to same ReplicaSet. Only node available has a taint, and nodeFit set to true. 0 should be evicted.",
            dev3(),
            vec![test_node("n1", json!({})), test_node("n3", taint)],
            &[],
            true,
            0,
        ),
        (
            "Three pods in the `node-fit` Namespace, bound to same ReplicaSet, all with a nodeSelector. Only node available has an incorrect node label, and nodeFit set to true. 0 should be evicted.",
            ["p15", "NOT1", "NOT2"]
                .map(|n| rs_in(n, "node-fit", west.clone()))
                .to_vec(),
            vec![
                test_node("n1", json!({})),
                test_node(
                    "n4",
                    json!({"metadata": {"labels": {"datacenter": "east"}}}),
                ),
            ],
            &[],
            true,
            0,
        ),
        (
            "Three pods in the `node-fit` Namespace, bound to same ReplicaSet. Only node available is not schedulable, and nodeFit set to true. 0 should be evicted.",
            dev3(),
            vec![
                test_node("n1", json!({})),
                test_node("n5", json!({"spec": {"unschedulable": true}})),
            ],
            &[],
            true,
            0,
        ),
        (
            "Three pods in the `node-fit` Namespace, bound to same ReplicaSet. Only node available does not have enough CPU, and nodeFit set to true. 0 should be evicted.",
            [
                dev3(),
                vec![pod(
                    "CPU-eater",
                    150,
                    150,
                    "n6",
                    json!({"metadata": {"namespace": "test"}}),
                )],
            ]
            .concat(),
            vec![
                test_node("n1", json!({})),
                node("n6", 200, 200, 10, json!({})),
            ],
            &[],
            true,
            0,
        ),
        (
            "Three pods in the `node-fit` Namespace, bound to same ReplicaSet. Only node available has enough CPU, and nodeFit set to true. 1 should be evicted.",
            [
                dev3(),
                vec![pod(
                    "CPU-saver",
                    100,
                    150,
                    "n6",
                    json!({"metadata": {"namespace": "test"}}),
                )],
            ]
            .concat(),
            vec![
                test_node("n1", json!({})),
                node("n6", 200, 200, 10, json!({})),
            ],
            &[],
            true,
            1,
        ),
    ];
    for (description, pods, nodes, exclude, node_fit, want) in cases {
        assert_eq!(count(pods, nodes, exclude, node_fit), want, "{description}");
    }
}

fn owners(names: &[&str]) -> Value {
    let refs: Vec<Value> = names
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "ReplicaSet", "name": n, "uid": ""}))
        .collect();
    json!({"metadata": {"ownerReferences": refs}})
}

/// (name, node) pairs, each pod built with `extra(i)`.
fn spread<A: AsRef<str>, B: AsRef<str>>(
    pods: &[(A, B)],
    extra: impl Fn(usize) -> Value,
) -> Vec<Pod> {
    pods.iter()
        .enumerate()
        .map(|(i, (n, node))| on(n.as_ref(), node.as_ref(), extra(i)))
        .collect()
}

const FIVE_THREE_ONE: [(&str, &str); 9] = [
    ("p1", "n1"),
    ("p2", "n1"),
    ("p3", "n1"),
    ("p4", "n1"),
    ("p5", "n1"),
    ("p6", "n2"),
    ("p7", "n2"),
    ("p8", "n2"),
    ("p9", "n3"),
];

/// The same layout on worker1..3 instead of n1..3.
fn workers(n: &[(&str, &str)]) -> Vec<(String, String)> {
    n.iter()
        .map(|(p, node)| (p.to_string(), format!("worker{}", &node[1..])))
        .collect()
}

#[test]
fn remove_duplicates_uniformly() {
    let nodes = |names: &[&str], extra: &dyn Fn(&str) -> Value| -> Vec<Node> {
        names.iter().map(|n| test_node(n, extra(n))).collect()
    };
    let plain = |_: &str| json!({});
    let three = nodes(&["n1", "n2", "n3"], &plain);
    let k = |i: usize| if i.is_multiple_of(2) { "k1" } else { "k2" };
    let tolerating = |i: usize| {
        with(&[
            rs_owner(),
            json!({"spec": {"tolerations": [{"key": k(i), "value": format!("v{}", &k(i)[1..]), "operator": "Equal", "effect": "NoSchedule"}]}}),
        ])
    };
    let not_master = |i: usize| {
        with(&[
            rs_owner(),
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"},
            {"key": k(i), "operator": "DoesNotExist"}]}]}}}}}),
        ])
    };
    let worker_selector = |i: usize| {
        with(&[
            rs_owner(),
            json!({"spec": {"nodeSelector": {"node-role.kubernetes.io/worker": k(i)}}}),
        ])
    };
    let master_taint = |n: &str| {
        if n.starts_with("master") {
            json!({"spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}})
        } else {
            json!({})
        }
    };
    let master_label = |n: &str| {
        if n.starts_with("master") {
            json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}})
        } else {
            json!({})
        }
    };
    let worker_label = |n: &str| {
        if n.starts_with("worker") {
            json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": "k2"}}})
        } else {
            json!({})
        }
    };
    let six = [
        "worker1", "worker2", "worker3", "master1", "master2", "master3",
    ];
    let second: Vec<(&str, &str)> = vec![
        ("p21", "n1"),
        ("p22", "n2"),
        ("p23", "n2"),
        ("p24", "n2"),
        ("p25", "n3"),
        ("p26", "n3"),
        ("p27", "n3"),
        ("p28", "n3"),
        ("p29", "n3"),
    ];
    let eleven: Vec<(String, &str)> = FIVE_THREE_ONE
        .iter()
        .map(|(p, n)| (format!("p1{}", &p[1..]), *n))
        .collect();
    let cases: Vec<(&str, Vec<Pod>, Vec<Node>, usize)> = vec![
        (
            "Evict pods uniformly",
            spread(&FIVE_THREE_ONE, |_| rs_owner()),
            three.clone(),
            2,
        ),
        (
            "Evict pods uniformly with one node left out",
            spread(&FIVE_THREE_ONE, |_| rs_owner()),
            nodes(&["n1", "n2"], &plain),
            1,
        ),
        (
            "Evict pods uniformly with two replica sets",
            spread(&eleven, |_| owners(&["replicaset-1", "replicaset-2"])),
            three.clone(),
            4,
        ),
        (
            "Evict pods uniformly with two owner references",
            [
                spread(&eleven, |_| rs_owner()),
                spread(&second, |_| owners(&["replicaset-2"])),
            ]
            .concat(),
            three.clone(),
            4,
        ),
        (
            "Evict pods with number of pods less than nodes",
            spread(&[("p1", "n1"), ("p2", "n1")], |_| rs_owner()),
            three.clone(),
            1,
        ),
        (
            "Evict pods with number of pods less than nodes, but ignore different pods with the same ownerref",
            vec![
                with_image("p1", "foo"),
                with_image("p2", "bar"),
                with_image("p3", "baz"),
                with_image("p4", "foo"),
            ],
            three.clone(),
            1,
        ),
        (
            "Evict pods with a single pod with three nodes",
            spread(&[("p1", "n1")], |_| rs_owner()),
            three.clone(),
            0,
        ),
        (
            "Evict pods uniformly respecting taints",
            spread(&workers(&FIVE_THREE_ONE), tolerating),
            nodes(&six, &master_taint),
            2,
        ),
        (
            "Evict pods uniformly respecting RequiredDuringSchedulingIgnoredDuringExecution node affinity",
            spread(&workers(&FIVE_THREE_ONE), not_master),
            nodes(&six, &master_label),
            2,
        ),
        (
            "Evict pods uniformly respecting node selector",
            spread(&workers(&FIVE_THREE_ONE), worker_selector),
            nodes(&six, &worker_label),
            2,
        ),
        (
            "Evict pods uniformly respecting node selector with zero target nodes",
            spread(&workers(&FIVE_THREE_ONE), worker_selector),
            nodes(&six, &plain),
            0,
        ),
    ];
    for (description, pods, nodes, want) in cases {
        assert_eq!(count(pods, nodes, &[], false), want, "{description}");
    }
}

#[test]
fn node_fit_looks_only_at_the_nodes_the_evictor_selector_names() {
    let nodes = |label: bool| {
        let l = if label {
            json!({"metadata": {"labels": {"pool": "spare"}}})
        } else {
            json!({})
        };
        vec![test_node("n1", json!({})), test_node("n2", l)]
    };
    let run = |sel: &str, label: bool| {
        let r = pass(
            "RemoveDuplicates",
            "balance",
            json!({}),
            json!({"nodeFit": true, "nodeSelector": sel}),
            nodes(label),
            dev3(),
        );
        r.evictions.len()
    };
    assert_eq!(run("pool=spare", true), 1, "n2 is selected and has room");
    assert_eq!(
        run("pool=spare", false),
        0,
        "no selected node but the pod's own"
    );
    assert_eq!(run("", false), 1, "unset: every ready node");
    let bad = crate::descheduler::migration::args::MigrationArgs::parse(
        &json!({"nodeSelector": "a in (b"}),
    );
    assert!(bad.unwrap_err().to_string().contains("nodeSelector"));
}

/// koord's own: replicas piled on one node that the evictor refuses are reported as
/// skipped with its reason (an operator asking why they stay sees it); a pod alone of its
/// owner on its node is not a candidate and is not reported.
#[test]
fn piled_replicas_the_evictor_refuses_are_reported() {
    let local = json!({"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}});
    let mut pods: Vec<Pod> = ["p1", "p2", "p3"]
        .map(|n| on(n, "n1", with(&[rs_owner(), local.clone()])))
        .to_vec();
    let other = json!({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ReplicaSet", "name": "other", "uid": ""}]}});
    pods.push(on("lone", "n2", with(&[other, local])));
    let nodes = vec![
        test_node("n1", json!({})),
        test_node("n2", json!({})),
        test_node("n3", json!({})),
    ];
    let r = pass(
        "RemoveDuplicates",
        "balance",
        json!({}),
        json!({}),
        nodes,
        pods,
    );
    assert!(r.evictions.is_empty());
    let mut skipped: Vec<(&str, &str)> = r
        .skipped
        .iter()
        .map(|s| (s.pod.as_str(), s.reason.as_str()))
        .collect();
    skipped.sort();
    let why = "pod has local storage and descheduler is not configured with evictLocalStoragePods";
    assert_eq!(
        skipped,
        vec![
            ("default/p1", why),
            ("default/p2", why),
            ("default/p3", why)
        ]
    );
}
