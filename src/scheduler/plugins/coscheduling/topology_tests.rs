//! Koordinator's `network_topology_solver_test.go` and the placements of
//! `network_topology_workflow_test.go`, on trees built from its `FakeClusterNetworkTopology`.

use super::*;
use crate::scheduler::model::network_topology::Tree;
use std::cmp::Ordering;

const SPINE: &str = "network.topology.nvidia.com/spine";
const BLOCK: &str = "network.topology.nvidia.com/block";

fn spec() -> Vec<crate::api::scheduling::network_topology::NetworkTopologyLayer> {
    serde_json::from_value(serde_json::json!([
        {"labelKey": [SPINE], "topologyLayer": "SpineLayer"},
        {"labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
        {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"}]))
    .unwrap()
}

/// A tree of `(node, spine, block)`.
fn tree(nodes: &[(&str, &str, &str)]) -> Tree {
    let mut t = Tree::new(&spec()).unwrap();
    for (n, s, b) in nodes {
        let labels = [
            (SPINE.to_string(), s.to_string()),
            (BLOCK.to_string(), b.to_string()),
        ]
        .into();
        t.add_node(n, &labels);
    }
    t
}

fn at(t: &Tree, layer: &str, name: &str) -> usize {
    t.find(layer, name)
        .unwrap_or_else(|| panic!("{layer}/{name}"))
}

fn set(t: &mut Tree, layer: &str, name: &str, slot: i64, score: i64) {
    let i = at(t, layer, name);
    t.nodes[i].offer_slot = slot;
    t.nodes[i].score = score;
}

/// TestTopologyNodeLessFunc's tree: s1 (3): b1 (2), b2 (2); s2 (4): b3 (2), b4 (3).
fn less_tree() -> Tree {
    let mut t = tree(&[
        ("n1", "s1", "b1"),
        ("n2", "s1", "b2"),
        ("n3", "s2", "b3"),
        ("n4", "s2", "b4"),
    ]);
    t.nodes[0].offer_slot = 7;
    set(&mut t, "SpineLayer", "s1", 3, 0);
    set(&mut t, "SpineLayer", "s2", 4, 0);
    for (b, slot) in [("b1", 2), ("b2", 2), ("b3", 2), ("b4", 3)] {
        set(&mut t, "BlockLayer", b, slot, 100);
    }
    t
}

#[test]
fn topology_node_less_func() {
    let t = less_tree();
    let b = |n: &str| at(&t, "BlockLayer", n);
    let less = |a: &str, c: &str, lower: bool| order(&t, b(a), b(c), lower) == Ordering::Less;
    let cases = [
        (
            "different OfferSlot, lowerFirst=true, a < b",
            "b1",
            "b4",
            true,
            true,
        ),
        (
            "different OfferSlot, lowerFirst=true, a > b",
            "b4",
            "b1",
            true,
            false,
        ),
        (
            "different OfferSlot, lowerFirst=false, a < b",
            "b1",
            "b4",
            false,
            false,
        ),
        (
            "different OfferSlot, lowerFirst=false, a > b",
            "b4",
            "b1",
            false,
            true,
        ),
        (
            "same OfferSlot, different parent OfferSlot, lowerFirst=true",
            "b1",
            "b3",
            true,
            true,
        ),
        (
            "same OfferSlot, different parent OfferSlot, lowerFirst=false",
            "b1",
            "b3",
            false,
            false,
        ),
        (
            "same OfferSlot, same parent OfferSlot, fallback to name",
            "b1",
            "b2",
            true,
            true,
        ),
    ];
    for (name, a, c, lower, want) in cases {
        assert_eq!(less(a, c, lower), want, "{name}");
    }
}

#[test]
fn topology_node_less_func_score_fallback() {
    let mut t = tree(&[("n1", "s1", "b1"), ("n2", "s1", "b2")]);
    t.nodes[0].offer_slot = 4;
    set(&mut t, "SpineLayer", "s1", 2, 0);
    set(&mut t, "BlockLayer", "b1", 1, 200);
    set(&mut t, "BlockLayer", "b2", 1, 100);
    let (b1, b2) = (at(&t, "BlockLayer", "b1"), at(&t, "BlockLayer", "b2"));
    assert_eq!(order(&t, b1, b2, true), Ordering::Less, "higher Score wins");
    assert_eq!(order(&t, b2, b1, true), Ordering::Greater, "reversed");
}

#[test]
fn topology_node_less_func_nil_parent() {
    let mut t = tree(&[("a", "a", "a"), ("b", "b", "b")]);
    set(&mut t, "SpineLayer", "a", 2, 100);
    set(&mut t, "SpineLayer", "b", 2, 100);
    let (a, b) = (at(&t, "SpineLayer", "a"), at(&t, "SpineLayer", "b"));
    assert_eq!(order(&t, a, b, true), Ordering::Less);
}

/// s1: b1 (n1 5, n2 7), b2 (n3 6, n4 4).
fn slot_tree() -> Tree {
    let mut t = tree(&[
        ("n1", "s1", "b1"),
        ("n2", "s1", "b1"),
        ("n3", "s1", "b2"),
        ("n4", "s1", "b2"),
    ]);
    for (n, slot) in [("n1", 5), ("n2", 7), ("n3", 6), ("n4", 4)] {
        set(&mut t, "NodeTopologyLayer", n, slot, 0);
    }
    set(&mut t, "BlockLayer", "b1", 12, 0);
    set(&mut t, "BlockLayer", "b2", 10, 0);
    set(&mut t, "SpineLayer", "s1", 22, 0);
    t
}

/// `(layer, multiple)` pairs, or `(node, slots)`.
type Pairs<'a> = &'a [(&'a str, i64)];

fn multiples(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(l, m)| (l.to_string(), *m)).collect()
}

#[test]
fn distribute_offer_slot_with_pod_count_multiple() {
    let cases: [(&str, i64, Pairs, Pairs, i64); 4] = [
        (
            "no slot multiple constraint",
            15,
            &[],
            &[("n1", 5), ("n2", 7), ("n3", 3), ("n4", 0)],
            15,
        ),
        (
            "node layer slot multiple = 4",
            20,
            &[("NodeTopologyLayer", 4)],
            &[("n1", 4), ("n2", 4), ("n3", 4), ("n4", 4)],
            16,
        ),
        (
            "block layer slot multiple = 8",
            20,
            &[("BlockLayer", 8)],
            &[("n2", 7), ("n1", 1), ("n3", 6), ("n4", 2)],
            16,
        ),
        (
            "both node and block layer slot multiple",
            20,
            &[("NodeTopologyLayer", 2), ("BlockLayer", 8)],
            &[("n2", 6), ("n1", 2), ("n3", 6), ("n4", 2)],
            16,
        ),
    ];
    for (name, desired, m, want, total) in cases {
        let t = slot_tree();
        let mut distribution = BTreeMap::new();
        let s1 = at(&t, "SpineLayer", "s1");
        let (_, got) = distribute(&t, desired, s1, &mut distribution, &multiples(m));
        assert_eq!(got, total, "{name}: total slot mismatch");
        let want: BTreeMap<String, i64> = want.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        assert_eq!(distribution, want, "{name}: distribution mismatch");
    }
}

#[test]
fn get_layer_pod_count_multiple() {
    let rule = |layer: &str, strategy: &str, m: i64| {
        crate::api::scheduling::network_topology::GatherRule {
            layer: layer.into(),
            strategy: strategy.into(),
            pod_count_multiple: m,
        }
    };
    let spec = |rules| GatherSpec {
        gather_strategy: rules,
    };
    assert_eq!(pod_count_multiple(None), None, "nil spec");
    assert_eq!(
        pod_count_multiple(Some(&spec(vec![]))),
        None,
        "empty gather strategy"
    );
    let must = "MustGather";
    assert_eq!(
        pod_count_multiple(Some(&spec(vec![rule("SpineLayer", must, 0)]))),
        None,
        "no slot multiple specified"
    );
    assert_eq!(
        pod_count_multiple(Some(&spec(vec![rule("SpineLayer", must, 1)]))),
        None,
        "slot multiple = 1 should be ignored"
    );
    assert_eq!(
        pod_count_multiple(Some(&spec(vec![rule("SpineLayer", must, 0)]))),
        None,
        "slot multiple = 0 should be ignored"
    );
    assert_eq!(
        pod_count_multiple(Some(&spec(vec![rule("BlockLayer", "PreferGather", 8)]))),
        Some(multiples(&[("BlockLayer", 8)])),
        "single layer with slot multiple"
    );
    let all = spec(vec![
        rule("SpineLayer", must, 16),
        rule("BlockLayer", "PreferGather", 8),
        rule("NodeTopologyLayer", "PreferGather", 4),
    ]);
    assert_eq!(
        pod_count_multiple(Some(&all)),
        Some(multiples(&[
            ("SpineLayer", 16),
            ("BlockLayer", 8),
            ("NodeTopologyLayer", 4)
        ])),
        "multiple layers with slot multiple"
    );
}

#[test]
fn constrain_offer_slot_by_pod_count_multiple() {
    let cases: [(&str, Pairs, [i64; 7]); 4] = [
        // s1, b1, b2, n1, n2, n3, n4
        ("nil constraints", &[], [22, 12, 10, 5, 7, 6, 4]),
        (
            "node layer multiple = 4",
            &[("NodeTopologyLayer", 4)],
            [16, 8, 8, 4, 4, 4, 4],
        ),
        (
            "block layer multiple = 8",
            &[("BlockLayer", 8)],
            [16, 8, 8, 5, 7, 6, 4],
        ),
        (
            "both node and block layer",
            &[("NodeTopologyLayer", 2), ("BlockLayer", 8)],
            [16, 8, 8, 4, 6, 6, 4],
        ),
    ];
    for (name, m, want) in cases {
        let mut t = slot_tree();
        let s1 = at(&t, "SpineLayer", "s1");
        constrain_by_multiple(&mut t, s1, &multiples(m));
        let got = [
            ("SpineLayer", "s1"),
            ("BlockLayer", "b1"),
            ("BlockLayer", "b2"),
            ("NodeTopologyLayer", "n1"),
            ("NodeTopologyLayer", "n2"),
            ("NodeTopologyLayer", "n3"),
            ("NodeTopologyLayer", "n4"),
        ]
        .map(|(l, n)| t.nodes[at(&t, l, n)].offer_slot);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn distribute_offer_slot_pod_count_multiple_insufficient_slots() {
    let mut t = tree(&[("n1", "s1", "b1"), ("n2", "s1", "b1")]);
    set(&mut t, "NodeTopologyLayer", "n1", 5, 0);
    set(&mut t, "NodeTopologyLayer", "n2", 5, 0);
    set(&mut t, "BlockLayer", "b1", 10, 0);
    set(&mut t, "SpineLayer", "s1", 10, 0);
    let mut distribution = BTreeMap::new();
    let s1 = at(&t, "SpineLayer", "s1");
    let (_, got) = distribute(
        &t,
        10,
        s1,
        &mut distribution,
        &multiples(&[("NodeTopologyLayer", 4)]),
    );
    assert_eq!(
        got, 8,
        "should only allocate 8 slots due to PodCountMultiple constraint"
    );
    assert_eq!(distribution["n1"], 4, "n1 should have 4 slots");
    assert_eq!(distribution["n2"], 4, "n2 should have 4 slots");
}

/// `FakeClusterNetworkTopology`'s nodes as `TestPodGroupManager_NetworkTopology` lists
/// them: (node, spine, block).
pub(super) const FAKE_NODES: [(&str, &str, &str); 8] = [
    ("node-8", "s1", "b1"),
    ("node-1", "s1", "b1"),
    ("node-7", "s1", "b2"),
    ("node-2", "s1", "b2"),
    ("node-6", "s2", "b3"),
    ("node-3", "s2", "b3"),
    ("node-5", "s2", "b4"),
    ("node-4", "s2", "b4"),
];

/// The fake topology with node-1..8 as in `TestPodGroupManager_NetworkTopology`.
fn fake_cluster() -> Tree {
    tree(&FAKE_NODES)
}

fn pending(n: usize) -> Vec<(String, String)> {
    (1..=n)
        .map(|i| {
            (
                format!("default/pending-pod-{i}"),
                format!("pending-pod-{i}"),
            )
        })
        .collect()
}

fn one_slot_each() -> NodeFigures {
    NodeFigures {
        offer: (1..=8).map(|i| (format!("node-{i}"), 1)).collect(),
        ..Default::default()
    }
}

fn gather(rules: &[(&str, &str)]) -> GatherSpec {
    GatherSpec {
        gather_strategy: rules
            .iter()
            .map(
                |(l, s)| crate::api::scheduling::network_topology::GatherRule {
                    layer: l.to_string(),
                    strategy: s.to_string(),
                    pod_count_multiple: 0,
                },
            )
            .collect(),
    }
}

#[test]
fn network_topology_scheduled_prefer_gather() {
    let mut t = fake_cluster();
    let spec = gather(&[
        ("BlockLayer", "PreferGather"),
        ("SpineLayer", "PreferGather"),
    ]);
    let req = Requirements::of(&spec, &t, 4);
    let got = place(&mut t, &one_slot_each(), &req, &pending(4)).unwrap();
    let want: BTreeMap<String, String> = [
        ("default/pending-pod-1", "node-1"),
        ("default/pending-pod-2", "node-8"),
        ("default/pending-pod-3", "node-2"),
        ("default/pending-pod-4", "node-7"),
    ]
    .iter()
    .map(|(p, n)| (p.to_string(), n.to_string()))
    .collect();
    assert_eq!(got.pods, want);
    assert_eq!(got.domain, "SpineLayer/s1");
}

#[test]
fn network_topology_scheduled_must_gather() {
    let mut t = fake_cluster();
    let spec = gather(&[("BlockLayer", "MustGather"), ("SpineLayer", "PreferGather")]);
    let req = Requirements::of(&spec, &t, 2);
    assert_eq!(req.must_gather.as_deref(), Some("BlockLayer"));
    let got = place(&mut t, &one_slot_each(), &req, &pending(2)).unwrap();
    assert_eq!(got.pods["default/pending-pod-1"], "node-1");
    assert_eq!(got.pods["default/pending-pod-2"], "node-8");
    assert_eq!(got.domain, "BlockLayer/b1");
}

#[test]
fn must_gather_too_small_for_the_job_says_why() {
    let mut t = fake_cluster();
    let spec = gather(&[("BlockLayer", "MustGather")]);
    let req = Requirements::of(&spec, &t, 3);
    let err = place(&mut t, &one_slot_each(), &req, &pending(3)).unwrap_err();
    assert_eq!(
        err.message("0/8 nodes are available: 8 Insufficient cpu."),
        "no candidate topology nodes can accommodate job, desiredOfferSlot: 3, \
         topology topologyNode BlockLayer/b1: 2;topology topologyNode BlockLayer/b2: 2;\
         topology topologyNode BlockLayer/b3: 2;topology topologyNode BlockLayer/b4: 2, \
         0/8 nodes are available: 8 Insufficient cpu."
    );
}

#[test]
fn the_innermost_must_gather_layer_wins() {
    let t = fake_cluster();
    let spec = gather(&[("SpineLayer", "MustGather"), ("BlockLayer", "MustGather")]);
    assert_eq!(must_gather_layer(&spec, &t).as_deref(), Some("BlockLayer"));
    let spec = gather(&[("SpineLayer", "MustGather"), ("BlockLayer", "PreferGather")]);
    assert_eq!(must_gather_layer(&spec, &t).as_deref(), Some("SpineLayer"));
}

#[test]
fn existing_pods_with_the_selector_pull_the_job_to_their_domain() {
    let mut t = fake_cluster();
    let spec = gather(&[("SpineLayer", "PreferGather")]);
    let req = Requirements::of(&spec, &t, 2);
    let mut f = one_slot_each();
    f.existing.insert("node-5".into(), 3);
    let got = place(&mut t, &f, &req, &pending(2)).unwrap();
    assert_eq!(got.domain, "BlockLayer/b4", "where the others already are");
    let t = fake_cluster();
    let order = order_by_topology(
        &t,
        &[
            "node-1".into(),
            "node-3".into(),
            "node-4".into(),
            "elsewhere".into(),
        ],
        &[("node-5".to_string(), 1)].into(),
    );
    assert_eq!(order, ["node-4", "node-3", "node-1", "elsewhere"]);
}
