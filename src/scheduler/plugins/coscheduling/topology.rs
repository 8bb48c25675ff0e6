//! Network-topology-aware placement of a whole gang group (Koordinator's
//! `coscheduling/core/network_topology_solver.go`): each node's offer slot (how many of
//! the group's pending pods fit on it, one after another) is summed up the tree; the
//! candidates are the deepest domains — inside the innermost `MustGather` layer's domains
//! — that offer enough slots; the best of them (most pods already there with the same
//! selector, then the fewest slots to spare, then score, then name) is filled, larger
//! children first, and the pods are dealt out in name order. A layer's
//! `podCountMultiple` rounds its domains' slots down to a multiple.

use std::collections::{BTreeMap, HashMap};

use crate::api::scheduling::network_topology::{GatherSpec, NODE_LAYER};
use crate::scheduler::model::network_topology::Tree;

/// Koordinator's `MessageNoCandidateTopologyNodes`.
pub const NO_CANDIDATES: &str = "no candidate topology nodes can accommodate job";
/// Koordinator's `ErrNoClusterNetworkTopology`.
pub const NO_TOPOLOGY: &str = "no cluster network topology";

/// What the job asks of the network (`JobTopologyRequirements`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requirements {
    pub must_gather: Option<String>,
    pub desired: i64,
    pub multiple: BTreeMap<String, i64>,
}

impl Requirements {
    pub fn of(spec: &GatherSpec, tree: &Tree, desired: usize) -> Requirements {
        Requirements {
            must_gather: must_gather_layer(spec, tree),
            desired: desired as i64,
            multiple: pod_count_multiple(Some(spec)).unwrap_or_default(),
        }
    }
}

/// `GetMustGatherLayer`: the innermost layer with a `MustGather` rule.
pub fn must_gather_layer(spec: &GatherSpec, tree: &Tree) -> Option<String> {
    let mut rules: Vec<_> = spec.gather_strategy.iter().collect();
    rules.sort_by(|a, b| {
        let inner = |x: &str, y: &str| tree.is_ancestor(y, x);
        match (inner(&a.layer, &b.layer), inner(&b.layer, &a.layer)) {
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            _ => std::cmp::Ordering::Equal,
        }
    });
    rules
        .into_iter()
        .find(|r| r.strategy == "MustGather")
        .map(|r| r.layer.clone())
}

/// `GetLayerPodCountMultiple`: the layers with a multiple above 1.
pub fn pod_count_multiple(spec: Option<&GatherSpec>) -> Option<BTreeMap<String, i64>> {
    let out: BTreeMap<String, i64> = spec?
        .gather_strategy
        .iter()
        .filter(|r| r.pod_count_multiple > 1)
        .map(|r| (r.layer.clone(), r.pod_count_multiple))
        .collect();
    (!out.is_empty()).then_some(out)
}

/// Per node: offer slots, scores and pods already there with the job's selector.
#[derive(Debug, Clone, Default)]
pub struct NodeFigures {
    pub offer: HashMap<String, i64>,
    pub score: HashMap<String, i64>,
    pub existing: HashMap<String, i64>,
}

/// Why no domain can take the job: the must-gather domains with their slots, and the
/// multiples in force, for Koordinator's message.
#[derive(Debug, Clone, PartialEq)]
pub struct NoCandidates {
    pub desired: i64,
    pub domains: Vec<String>,
    pub multiples: Vec<String>,
}

impl NoCandidates {
    /// Koordinator's message; `fit` is the FitError of the nodes' statuses.
    pub fn message(&self, fit: &str) -> String {
        let mut m = format!(
            "{NO_CANDIDATES}, desiredOfferSlot: {}, {}, {fit}",
            self.desired,
            self.domains.join(";")
        );
        if !self.multiples.is_empty() {
            m.push_str(&format!(
                "; podCountMultiple constraints: {}",
                self.multiples.join(", ")
            ));
        }
        m
    }
}

/// A placement: pod → node, and the domain it fills.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub pods: BTreeMap<String, String>,
    /// `layer/name` of the domain chosen.
    pub domain: String,
}

/// `PlacePods`: `pods` (keys) onto nodes of `tree`, which is filled with `figures`.
pub fn place(
    tree: &mut Tree,
    figures: &NodeFigures,
    req: &Requirements,
    pods: &[(String, String)],
) -> Result<Placement, NoCandidates> {
    evaluate(tree, figures);
    constrain_by_multiple(tree, 0, &req.multiple);
    let gathered = must_gather_domains(tree, req.must_gather.as_deref());
    let mut candidates = offer_satisfied(tree, &gathered, req.desired);
    candidates.sort_by(|a, b| order(tree, *a, *b, true));
    for c in candidates {
        let mut distribution = BTreeMap::new();
        let (ordered, got) = distribute(tree, req.desired, c, &mut distribution, &req.multiple);
        if got >= req.desired {
            let node = &tree.nodes[c];
            return Ok(Placement {
                pods: deal(pods, &ordered, &distribution),
                domain: format!("{}/{}", node.layer, node.name),
            });
        }
    }
    let mut domains: Vec<String> = gathered
        .iter()
        .map(|i| {
            let n = &tree.nodes[*i];
            format!("topology topologyNode {}/{}: {}", n.layer, n.name, n.offer_slot)
        })
        .collect();
    domains.sort();
    Err(NoCandidates {
        desired: req.desired,
        domains,
        multiples: req.multiple.iter().map(|(l, m)| format!("{l}={m}")).collect(),
    })
}

/// `evaluateTopologyNode`: every node's figures added to it and its ancestors.
fn evaluate(tree: &mut Tree, f: &NodeFigures) {
    for (node, slots) in &f.offer {
        let Some(leaf) = tree.leaf(node) else { continue };
        let score = f.score.get(node).copied().unwrap_or(0);
        let path: Vec<usize> = tree.up(leaf).collect();
        for i in path {
            tree.nodes[i].offer_slot += slots;
            tree.nodes[i].score += score;
        }
    }
    for (node, n) in &f.existing {
        let Some(leaf) = tree.leaf(node) else { continue };
        let path: Vec<usize> = tree.up(leaf).collect();
        for i in path {
            tree.nodes[i].existing += n;
        }
    }
}

/// `constrainOfferSlotByPodCountMultiple`: bottom up, each domain's slots are its
/// children's (rounded) sum, rounded down to its layer's multiple.
pub fn constrain_by_multiple(tree: &mut Tree, idx: usize, multiple: &BTreeMap<String, i64>) {
    if multiple.is_empty() {
        return;
    }
    let round = |slots: i64, layer: &str| match multiple.get(layer) {
        Some(m) if *m > 1 => slots / m * m,
        _ => slots,
    };
    if tree.nodes[idx].layer != NODE_LAYER {
        let children: Vec<usize> = tree.nodes[idx].children.values().copied().collect();
        let mut sum = 0;
        for c in children {
            constrain_by_multiple(tree, c, multiple);
            sum += tree.nodes[c].offer_slot;
        }
        tree.nodes[idx].offer_slot = sum;
    }
    let layer = tree.nodes[idx].layer.clone();
    tree.nodes[idx].offer_slot = round(tree.nodes[idx].offer_slot, &layer);
}

/// `searchMustGatherSatisfiedNodes`: the shallowest domains of the must-gather layer (the
/// root when there is none).
fn must_gather_domains(tree: &Tree, layer: Option<&str>) -> Vec<usize> {
    let Some(layer) = layer else { return vec![0] };
    let mut level = vec![0];
    while !level.is_empty() {
        let found: Vec<usize> = level
            .iter()
            .copied()
            .filter(|i| tree.nodes[*i].layer == layer)
            .collect();
        if !found.is_empty() {
            return found;
        }
        level = level
            .iter()
            .flat_map(|i| tree.nodes[*i].children.values().copied())
            .collect();
    }
    Vec::new()
}

/// `searchOfferSlotSatisfiedNodes`: walking down from `roots` through domains with enough
/// slots, the deepest level that still has some.
fn offer_satisfied(tree: &Tree, roots: &[usize], desired: i64) -> Vec<usize> {
    let mut candidates = Vec::new();
    let mut level = roots.to_vec();
    while !level.is_empty() {
        let fit: Vec<usize> = level
            .into_iter()
            .filter(|i| tree.nodes[*i].offer_slot >= desired)
            .collect();
        level = fit
            .iter()
            .flat_map(|i| tree.nodes[*i].children.values().copied())
            .collect();
        if !fit.is_empty() {
            candidates = fit;
        }
    }
    candidates
}

/// `topologyNodeLessFunc` as an ordering: more existing pods up the chains first, then
/// fewer (or, with `lower` false, more) offer slots, then the higher score, then name.
pub fn order(tree: &Tree, a: usize, b: usize, lower: bool) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let pairs = || tree.up(a).zip(tree.up(b));
    for (x, y) in pairs() {
        let (x, y) = (&tree.nodes[x], &tree.nodes[y]);
        if x.existing != y.existing {
            return y.existing.cmp(&x.existing);
        }
    }
    for (x, y) in pairs() {
        let (x, y) = (&tree.nodes[x], &tree.nodes[y]);
        if x.offer_slot != y.offer_slot {
            let fewer = x.offer_slot.cmp(&y.offer_slot);
            return if lower { fewer } else { fewer.reverse() };
        }
    }
    let (x, y) = (&tree.nodes[a], &tree.nodes[b]);
    match y.score.cmp(&x.score) {
        Ordering::Equal => x.name.cmp(&y.name),
        o => o,
    }
}

/// `distributeOfferSlot`: up to `desired` slots from `idx`, its children with more slots
/// first; the nodes in filling order and the slots given.
pub fn distribute(
    tree: &Tree,
    desired: i64,
    idx: usize,
    distribution: &mut BTreeMap<String, i64>,
    multiple: &BTreeMap<String, i64>,
) -> (Vec<String>, i64) {
    let n = &tree.nodes[idx];
    let mut max = n.offer_slot.min(desired);
    if let Some(m) = multiple.get(&n.layer).filter(|m| **m > 1) {
        max = max / m * m;
    }
    if n.layer == NODE_LAYER {
        distribution.insert(n.name.clone(), max);
        return (vec![n.name.clone()], max);
    }
    let mut children: Vec<usize> = n.children.values().copied().collect();
    children.sort_by(|a, b| order(tree, *a, *b, false));
    let (mut nodes, mut given) = (Vec::new(), 0);
    for c in children {
        let (more, got) = distribute(tree, max - given, c, distribution, multiple);
        nodes.extend(more);
        given += got;
    }
    (nodes, given)
}

/// `distributePods`: pods in name order onto the nodes in filling order, each node taking
/// its share.
fn deal(
    pods: &[(String, String)],
    nodes: &[String],
    distribution: &BTreeMap<String, i64>,
) -> BTreeMap<String, String> {
    let mut pods: Vec<&(String, String)> = pods.iter().collect();
    pods.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let mut left: Vec<(String, i64)> = nodes
        .iter()
        .map(|n| (n.clone(), distribution.get(n).copied().unwrap_or(0)))
        .collect();
    let mut at = 0;
    let mut out = BTreeMap::new();
    for (key, _) in pods {
        while at < left.len() && left[at].1 <= 0 {
            at += 1;
        }
        let Some((node, slots)) = left.get_mut(at) else {
            break;
        };
        *slots -= 1;
        out.insert(key.clone(), node.clone());
    }
    out
}

/// `sortNodesByTopology` for a pod with a network-topology selector: `candidates` ordered
/// nearest to the pods already there with the same selector (nodes outside the tree last).
pub fn order_by_topology(
    tree: &Tree,
    candidates: &[String],
    existing: &HashMap<String, i64>,
) -> Vec<String> {
    let mut tree = tree.clone();
    let figures = NodeFigures {
        offer: candidates.iter().map(|n| (n.clone(), 1)).collect(),
        score: HashMap::new(),
        existing: existing.clone(),
    };
    evaluate(&mut tree, &figures);
    let mut out = candidates.to_vec();
    out.sort_by(|a, b| match (tree.leaf(a), tree.leaf(b)) {
        // No scores here: ties go by name, as in Koordinator's sort.
        (Some(x), Some(y)) => order(&tree, x, y, true),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    });
    out
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
