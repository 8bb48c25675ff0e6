//! Network-topology-aware placement of a whole gang group (Koordinator's
//! `coscheduling/core/network_topology_solver.go`): each node's offer slot (how many of
//! the group's pending pods fit on it, one after another) is summed up the tree; the
//! candidates are the deepest domains — inside the innermost `MustGather` layer's domains
//! — that offer enough slots; the best of them (most pods already there with the same
//! selector, then the fewest slots to spare, then score, then name) is filled, larger
//! children first, and the pods are dealt out in name order. A layer's
//! `podCountMultiple` rounds its domains' slots down to a multiple.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::super::super::framework::fit_error::nodes_available;
use super::super::super::framework::gangs::JobPlan;
use super::super::super::framework::runtime::Framework;
use super::super::super::framework::{ClusterState, PodInfo};
use crate::api::scheduling::network_topology::{ANN_INDEX, ANN_SELECTOR, GatherSpec, NODE_LAYER};
use crate::scheduler::model::network_topology::Tree;

/// Koordinator's `MessageNoCandidateTopologyNodes`.
pub const NO_CANDIDATES: &str = "no candidate topology nodes can accommodate job";
/// Koordinator's `ErrNoClusterNetworkTopology`.
pub const NO_TOPOLOGY: &str = "no cluster network topology";
/// Koordinator's `ErrorNoPlannedNodes`: a member the group's placement does not cover.
pub const NO_PLANNED_NODE: &str = "no planned pods";
/// Where PreScore leaves a selector pod's node order.
pub const SELECTOR_ORDER: &str = "Coscheduling/network-topology-order";
/// Node → its place in the topology order (0 nearest).
pub type SelectorOrder = HashMap<String, i64>;

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
            format!(
                "topology topologyNode {}/{}: {}",
                n.layer, n.name, n.offer_slot
            )
        })
        .collect();
    domains.sort();
    Err(NoCandidates {
        desired: req.desired,
        domains,
        multiples: req
            .multiple
            .iter()
            .map(|(l, m)| format!("{l}={m}"))
            .collect(),
    })
}

/// `evaluateTopologyNode`: every node's figures added to it and its ancestors.
fn evaluate(tree: &mut Tree, f: &NodeFigures) {
    for (node, slots) in &f.offer {
        let Some(leaf) = tree.leaf(node) else {
            continue;
        };
        let score = f.score.get(node).copied().unwrap_or(0);
        let path: Vec<usize> = tree.up(leaf).collect();
        for i in path {
            tree.nodes[i].offer_slot += slots;
            tree.nodes[i].score += score;
        }
    }
    for (node, n) in &f.existing {
        let Some(leaf) = tree.leaf(node) else {
            continue;
        };
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

/// The network-topology selector of `pod`, if any.
fn selector_of(pod: &k8s_openapi::api::core::v1::Pod) -> Option<&str> {
    let a = pod.metadata.annotations.as_ref()?;
    a.get(ANN_SELECTOR)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// Per node, the pods there with `selector`.
fn existing_with(cluster: &ClusterState, selector: Option<&str>) -> HashMap<String, i64> {
    let Some(selector) = selector else {
        return HashMap::new();
    };
    cluster
        .nodes
        .iter()
        .map(|n| {
            let count = n
                .pods
                .iter()
                .filter(|p| selector_of(&p.pod) == Some(selector))
                .count();
            (n.name.clone(), count as i64)
        })
        .collect()
}

/// PreScore for a pod with a network-topology selector: the feasible nodes in topology
/// order (`sortNodesByTopology`); None for any other pod or without a topology.
pub fn selector_order(
    pod: &PodInfo,
    feasible: &[usize],
    cluster: &ClusterState,
) -> Option<SelectorOrder> {
    let selector = selector_of(&pod.pod)?;
    let tree = cluster.network_topology.as_ref()?;
    let names: Vec<String> = feasible
        .iter()
        .map(|i| cluster.nodes[*i].name.clone())
        .collect();
    let existing = existing_with(cluster, Some(selector));
    let ordered = order_by_topology(tree, &names, &existing);
    Some(
        ordered
            .into_iter()
            .enumerate()
            .map(|(i, n)| (n, i as i64))
            .collect(),
    )
}

/// `SortPodsByIndex`: members with a network-topology index first, by it, then by name.
pub fn by_index(pods: &mut [Arc<PodInfo>]) {
    let index = |p: &PodInfo| {
        let a = p.pod.metadata.annotations.as_ref()?;
        a.get(ANN_INDEX)?.parse::<i64>().ok().filter(|i| *i >= 0)
    };
    pods.sort_by(|a, b| match (index(a), index(b)) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        _ => a.name.cmp(&b.name),
    });
}

/// The network-topology spec of `pod`'s gang, when placement heeds it.
fn spec_of(pod: &PodInfo, cluster: &ClusterState) -> Option<GatherSpec> {
    let g = &cluster.gangs;
    if !g
        .settings
        .as_ref()
        .is_some_and(|s| s.aware_network_topology)
    {
        return None;
    }
    g.spec(g.gang_id(&pod.key)?)?.network_topology.clone()
}

/// The spec and tree a preempting gang is planned in (none: placed member by member).
pub fn topology_of(pod: &PodInfo, cluster: &ClusterState) -> Option<(GatherSpec, Arc<Tree>)> {
    Some((spec_of(pod, cluster)?, cluster.network_topology.clone()?))
}

/// Before the first member's cycle of a gang group with a network-topology spec (and
/// `awareNetworkTopology`), the whole group's placement (Koordinator's FindOneNode): kept
/// in the gang cache for the group's round; what it found, for the attempt's details.
pub fn plan_job(fw: &Framework, pod: &PodInfo, cluster: &mut ClusterState) -> Option<Value> {
    let spec = spec_of(pod, cluster)?;
    let g = &cluster.gangs;
    let id = g.gang_id(&pod.key)?.to_string();
    if g.plan_of(&pod.key).is_some() || g.check(&pod.key, &pod.pod).is_err() {
        return None;
    }
    let group = g.group_id(&id);
    let result = match cluster.network_topology.clone() {
        None => Err(NO_TOPOLOGY.to_string()),
        Some(tree) => {
            let mut pending = g.pending_members(&id, &cluster.assumed);
            by_index(&mut pending);
            let offer = fw.offer_slots(&pending, cluster);
            let figures = NodeFigures {
                offer: offer.slots.clone(),
                score: HashMap::new(),
                existing: existing_with(cluster, pending.first().and_then(|p| selector_of(&p.pod))),
            };
            let req = Requirements::of(&spec, &tree, pending.len());
            let pods: Vec<(String, String)> = pending
                .iter()
                .map(|p| (p.key.clone(), p.name.clone()))
                .collect();
            let mut t = (*tree).clone();
            place(&mut t, &figures, &req, &pods)
                .map(|p| (p.pods, p.domain))
                .map_err(|e| {
                    let reasons = offer.rejected.values().map(String::as_str);
                    e.message(&nodes_available(cluster.nodes.len(), reasons))
                })
        }
    };
    let details = match &result {
        Ok((pods, domain)) => json!({"domain": domain, "pods": pods}),
        Err(why) => json!({"error": why}),
    };
    let plan = JobPlan {
        trigger: pod.key.clone(),
        result,
    };
    cluster.gangs.set_plan(&group, plan);
    Some(details)
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "topology_cycle_tests.rs"]
mod cycle_tests;

#[cfg(test)]
#[path = "batch_tests.rs"]
mod batch_tests;
