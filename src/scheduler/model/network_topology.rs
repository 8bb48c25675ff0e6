//! The cluster's network as a tree (Koordinator's `frameworkext/networktopology`): the
//! root, then one level per layer of the ClusterNetworkTopology from the outermost (a
//! spine) to `NodeTopologyLayer`, each domain named by the first of its layer's label
//! keys a node carries. A node missing a layer's label is left out, except for the layer
//! right above the nodes, which then takes the node's name. Each domain also carries the
//! figures a gang's placement computes (offer slots, score, existing pods).

use std::collections::{BTreeMap, HashMap};

use crate::api::scheduling::network_topology::{
    CLUSTER_LAYER, ClusterNetworkTopology, ClusterNetworkTopologyStatus, NODE_LAYER,
    NetworkTopologyDetailStatus, NetworkTopologyLayer, TopologyInfo,
};

/// One domain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TreeNode {
    pub layer: String,
    pub name: String,
    pub parent: Option<usize>,
    /// Children by name.
    pub children: BTreeMap<String, usize>,
    /// How many of a job's pods fit in this domain.
    pub offer_slot: i64,
    pub score: i64,
    /// Pods with the same network-topology selector already here.
    pub existing: i64,
}

/// The tree, its domains in one arena (`0` is the root).
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    pub nodes: Vec<TreeNode>,
    /// Layers from the outermost down to `NodeTopologyLayer`, with their label keys.
    layers: Vec<(String, Vec<String>)>,
    /// Each layer's depth (the root's is 0).
    depth: HashMap<String, usize>,
    index: HashMap<(String, String), usize>,
    /// Which build this is (the live manager counts its rebuilds).
    pub generation: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("topology layer {0:?} not found in spec")]
    LayerNotFound(String),
}

impl Tree {
    /// An empty tree of `spec`'s layers, ordered parent to child from the node layer up.
    pub fn new(spec: &[NetworkTopologyLayer]) -> Result<Tree, TreeError> {
        let by_layer: HashMap<&str, &NetworkTopologyLayer> = spec
            .iter()
            .map(|l| (l.topology_layer.as_str(), l))
            .collect();
        let mut layers = Vec::with_capacity(spec.len());
        let mut current = NODE_LAYER.to_string();
        for _ in 0..spec.len() {
            let l = by_layer
                .get(current.as_str())
                .ok_or_else(|| TreeError::LayerNotFound(current.clone()))?;
            layers.push((current.clone(), l.label_key.clone().unwrap_or_default()));
            current = l.parent_topology_layer.clone().unwrap_or_default();
        }
        layers.reverse();
        let mut depth: HashMap<String, usize> = layers
            .iter()
            .enumerate()
            .map(|(i, (l, _))| (l.clone(), i + 1))
            .collect();
        depth.insert(CLUSTER_LAYER.to_string(), 0);
        let root = TreeNode {
            layer: CLUSTER_LAYER.into(),
            ..Default::default()
        };
        let mut index = HashMap::new();
        index.insert((CLUSTER_LAYER.to_string(), String::new()), 0);
        Ok(Tree {
            nodes: vec![root],
            layers,
            depth,
            index,
            generation: 0,
        })
    }

    /// Adds a node under its domains; false when it lacks a layer's label.
    pub fn add_node(&mut self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        let Some(path) = self.path_of(name, labels) else {
            return false;
        };
        let mut parent = 0;
        for (layer, domain) in path {
            let key = (layer.clone(), domain.clone());
            parent = match self.index.get(&key) {
                Some(i) => *i,
                None => {
                    let i = self.nodes.len();
                    self.nodes.push(TreeNode {
                        layer,
                        name: domain.clone(),
                        parent: Some(parent),
                        ..Default::default()
                    });
                    self.nodes[parent].children.insert(domain, i);
                    self.index.insert(key, i);
                    i
                }
            };
        }
        true
    }

    /// (layer, domain) from the outermost layer down to the node itself.
    fn path_of(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Option<Vec<(String, String)>> {
        let last = self.layers.len();
        let mut out = Vec::with_capacity(last);
        for (i, (layer, keys)) in self.layers.iter().enumerate() {
            let domain = if layer == NODE_LAYER {
                Some(name.to_string())
            } else {
                keys.iter()
                    .filter_map(|k| labels.get(k))
                    .find(|v| !v.is_empty())
                    .cloned()
            };
            let domain = match domain {
                Some(d) => d,
                // The layer right above the nodes falls back to the node's name.
                None if i + 2 == last => name.to_string(),
                None => return None,
            };
            out.push((layer.clone(), domain));
        }
        Some(out)
    }

    /// Whether layer `a` is above layer `b`.
    pub fn is_ancestor(&self, a: &str, b: &str) -> bool {
        let d = |l: &str| self.depth.get(l).copied().unwrap_or(0);
        d(a) < d(b)
    }

    /// The domain `name` of `layer`.
    pub fn find(&self, layer: &str, name: &str) -> Option<usize> {
        self.index
            .get(&(layer.to_string(), name.to_string()))
            .copied()
    }

    /// The domain of node `name` in the node layer.
    pub fn leaf(&self, name: &str) -> Option<usize> {
        self.index
            .get(&(NODE_LAYER.to_string(), name.to_string()))
            .copied()
    }

    /// `idx` and its ancestors, nearest first.
    pub fn up(&self, idx: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(idx), move |i| self.nodes[*i].parent)
    }

    /// Every domain of `layer`.
    pub fn domains_of<'a>(&'a self, layer: &'a str) -> impl Iterator<Item = usize> + 'a {
        (0..self.nodes.len()).filter(move |i| self.nodes[*i].layer == layer)
    }

    /// The status the scheduler writes on the ClusterNetworkTopology: every domain above
    /// the nodes, parent before children, children in name order, with its node count.
    pub fn status(&self) -> ClusterNetworkTopologyStatus {
        let mut out = Vec::new();
        self.status_of(0, &mut out);
        ClusterNetworkTopologyStatus {
            detail_status: Some(out),
        }
    }

    fn status_of(&self, idx: usize, out: &mut Vec<NetworkTopologyDetailStatus>) -> i32 {
        let n = &self.nodes[idx];
        if n.layer == NODE_LAYER {
            return 1;
        }
        let info = |t: &TreeNode| TopologyInfo {
            topology_layer: t.layer.clone(),
            topology_name: t.name.clone(),
        };
        let child_layer = n
            .children
            .values()
            .next()
            .map(|c| self.nodes[*c].layer.clone());
        let names: Vec<String> = n.children.keys().cloned().collect();
        let at = out.len();
        out.push(NetworkTopologyDetailStatus {
            topology_info: info(n),
            parent_topology_info: n.parent.map(|p| info(&self.nodes[p])),
            child_topology_names: (!names.is_empty() && child_layer.as_deref() != Some(NODE_LAYER))
                .then_some(names),
            child_topology_layer: child_layer,
            node_num: 0,
        });
        let total = n.children.values().map(|c| self.status_of(*c, out)).sum();
        out[at].node_num = total;
        total
    }
}

/// The tree of `cnt` (the ClusterNetworkTopology `default`) over `nodes` (name, labels).
pub fn build<'a>(
    cnt: &ClusterNetworkTopology,
    nodes: impl Iterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
) -> Result<Tree, TreeError> {
    let mut tree = Tree::new(&cnt.spec.network_topology_spec)?;
    for (name, labels) in nodes {
        tree.add_node(name, labels);
    }
    Ok(tree)
}

#[cfg(test)]
#[path = "network_topology_tests.rs"]
mod tests;
