//! Koordinator's `frameworkext/networktopology` tests (`tree_manager_test.go`), with its
//! `FakeClusterNetworkTopology`.

use super::*;
use crate::api::scheduling::network_topology::ClusterNetworkTopologySpec;

pub(crate) const SPINE: &str = "network.topology.nvidia.com/spine";
pub(crate) const BLOCK: &str = "network.topology.nvidia.com/block";

/// Koordinator's `FakeClusterNetworkTopology`: spine, block, node.
pub(crate) fn fake_spec() -> ClusterNetworkTopologySpec {
    serde_json::from_value(serde_json::json!({"networkTopologySpec": [
        {"labelKey": [SPINE], "topologyLayer": "SpineLayer"},
        {"labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
        {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"}]}))
    .unwrap()
}

pub(crate) fn labels(spine: &str, block: &str) -> BTreeMap<String, String> {
    [
        (SPINE.to_string(), spine.to_string()),
        (BLOCK.to_string(), block.to_string()),
    ]
    .into()
}

/// node-1..8: two per block, two blocks per spine.
pub(crate) fn eight_nodes() -> Vec<(String, BTreeMap<String, String>)> {
    let place = [
        ("s1", "b1"),
        ("s1", "b1"),
        ("s1", "b2"),
        ("s1", "b2"),
        ("s2", "b3"),
        ("s2", "b3"),
        ("s2", "b4"),
        ("s2", "b4"),
    ];
    place
        .iter()
        .enumerate()
        .map(|(i, (s, b))| (format!("node-{}", i + 1), labels(s, b)))
        .collect()
}

fn tree_of(nodes: &[(String, BTreeMap<String, String>)]) -> Tree {
    let mut t = Tree::new(&fake_spec().network_topology_spec).unwrap();
    for (n, l) in nodes {
        t.add_node(n, l);
    }
    t
}

/// `Test_treeManager_Run`, "normal flow": the status written is the fake's.
#[test]
fn tree_manager_run_normal_flow() {
    let status = tree_of(&eight_nodes()).status();
    let want: ClusterNetworkTopologyStatus =
        serde_json::from_value(serde_json::json!({"detailStatus": [
        {"childTopologyLayer": "SpineLayer", "childTopologyNames": ["s1", "s2"], "nodeNum": 8,
            "topologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""}},
        {"childTopologyLayer": "BlockLayer", "childTopologyNames": ["b1", "b2"], "nodeNum": 4,
            "parentTopologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""},
            "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"}},
        {"childTopologyLayer": "NodeTopologyLayer", "nodeNum": 2,
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b1"}},
        {"childTopologyLayer": "NodeTopologyLayer", "nodeNum": 2,
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b2"}},
        {"childTopologyLayer": "BlockLayer", "childTopologyNames": ["b3", "b4"], "nodeNum": 4,
            "parentTopologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""},
            "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"}},
        {"childTopologyLayer": "NodeTopologyLayer", "nodeNum": 2,
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b3"}},
        {"childTopologyLayer": "NodeTopologyLayer", "nodeNum": 2,
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b4"}}]}))
        .unwrap();
    assert_eq!(status, want);
}

/// `Test_treeManager_GetSnapshot`, "normal flow": the tree's shape.
#[test]
fn tree_manager_get_snapshot_normal_flow() {
    let t = tree_of(&eight_nodes());
    let root = &t.nodes[0];
    assert_eq!(root.layer, "ClusterTopologyLayer");
    assert_eq!(root.children.keys().collect::<Vec<_>>(), ["s1", "s2"]);
    let s1 = &t.nodes[root.children["s1"]];
    assert_eq!(s1.layer, "SpineLayer");
    assert_eq!(s1.children.keys().collect::<Vec<_>>(), ["b1", "b2"]);
    let b2 = &t.nodes[s1.children["b2"]];
    assert_eq!(b2.children.keys().collect::<Vec<_>>(), ["node-3", "node-4"]);
    let n3 = t.leaf("node-3").unwrap();
    let path: Vec<&str> = t.up(n3).map(|i| t.nodes[i].name.as_str()).collect();
    assert_eq!(path, ["node-3", "b2", "s1", ""]);
    assert!(t.is_ancestor("SpineLayer", "BlockLayer"));
    assert!(!t.is_ancestor("NodeTopologyLayer", "BlockLayer"));
}

#[test]
fn a_node_without_an_outer_layer_is_left_out_and_the_last_falls_back_to_its_name() {
    let mut t = Tree::new(&fake_spec().network_topology_spec).unwrap();
    let only_spine: BTreeMap<String, String> = [(SPINE.to_string(), "s1".to_string())].into();
    assert!(
        t.add_node("lonely", &only_spine),
        "block falls back to the node's name"
    );
    let b = t.nodes[t.leaf("lonely").unwrap()].parent.unwrap();
    assert_eq!(t.nodes[b].name, "lonely");
    assert!(
        !t.add_node("nowhere", &BTreeMap::new()),
        "no spine: left out"
    );
    assert_eq!(t.leaf("nowhere"), None);
}

#[test]
fn a_spec_without_the_node_layer_is_refused() {
    let spec: ClusterNetworkTopologySpec = serde_json::from_value(serde_json::json!(
        {"networkTopologySpec": [{"labelKey": [SPINE], "topologyLayer": "SpineLayer"}]}))
    .unwrap();
    let err = Tree::new(&spec.network_topology_spec).unwrap_err();
    assert_eq!(
        err.to_string(),
        "topology layer \"NodeTopologyLayer\" not found in spec"
    );
}
