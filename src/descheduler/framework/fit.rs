//! Upstream's node fit (`pkg/descheduler/node.NodeFit`): could a pod run on a node of this
//! pass — schedulable, its node selector and required affinity, the NoSchedule/NoExecute
//! taints, its required pod anti-affinity against the node's pods, and room for its
//! requests next to every pod bound there. DefaultEvictor's `nodeFit` and several plugins
//! ask it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PodAffinityTerm, Taint};

use super::podview::PodView;
use crate::api::placement::tolerates;
use crate::api::pod::{Amounts, add, amounts};
use crate::api::selector::{Selector, label_selector_matches};

/// One node as the fit check reads it.
pub struct Slot<'a> {
    pub node: &'a Arc<Node>,
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    allocatable: Amounts,
    /// Σ requests of the pods bound here, with `pods` their count.
    requested: Amounts,
    pods: &'a [Arc<PodView>],
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

impl<'a> Slot<'a> {
    fn new(node: &'a Arc<Node>, pods: &'a [Arc<PodView>]) -> Slot<'a> {
        let mut requested = Amounts::new();
        for p in pods {
            add(&mut requested, &p.requests());
        }
        requested.insert("pods".into(), pods.len() as i64);
        Slot {
            name: node.metadata.name.as_deref().unwrap_or(""),
            labels: node.metadata.labels.as_ref().unwrap_or(&NO_LABELS),
            allocatable: amounts(node.status.as_ref().and_then(|s| s.allocatable.as_ref())),
            requested,
            pods,
            node,
        }
    }

    fn unschedulable(&self) -> bool {
        self.node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
    }

    fn taints(&self) -> impl Iterator<Item = &Taint> {
        self.node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
    }

    /// The requests the node has left for each of the pod's resources and `pods`.
    fn room_for(&self, pod: &PodView) -> Result<(), String> {
        let req = pod.requests();
        let free = |r: &str| {
            self.allocatable.get(r).copied().unwrap_or(0)
                - self.requested.get(r).copied().unwrap_or(0)
        };
        if let Some((r, _)) = req.iter().find(|(r, v)| **v > free(r)) {
            return Err(format!("insufficient {r}"));
        }
        if free("pods") <= 0 {
            return Err("insufficient pods".into());
        }
        Ok(())
    }
}

/// A pod's NoSchedule and NoExecute taints are all tolerated.
pub fn tolerates_node(p: &PodView, taints: impl IntoIterator<Item = Taint>) -> bool {
    taints
        .into_iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| tolerates(&p.tolerations, &t))
}

/// The namespaces a pod affinity term reaches (`namespaces`, else the pod's own).
pub fn term_namespaces<'a>(pod: &'a PodView, t: &'a PodAffinityTerm) -> Vec<&'a str> {
    match t.namespaces.as_deref() {
        Some(ns) if !ns.is_empty() => ns.iter().map(String::as_str).collect(),
        _ => vec![pod.namespace.as_str()],
    }
}

/// `other` is a different pod that `pod`'s anti-affinity term selects.
pub fn term_selects(pod: &PodView, t: &PodAffinityTerm, other: &PodView) -> bool {
    other.name != pod.name
        && term_namespaces(pod, t).contains(&other.namespace.as_str())
        && label_selector_matches(t.label_selector.as_ref(), other.labels_map().as_ref())
}

/// The pass's nodes for the fit check, summed up on first use: most passes (LowNodeLoad
/// alone) never ask, and summing 10,000 pods' requests cost ~15 ms per pass.
pub struct NodeFit<'a> {
    nodes: &'a [&'a Arc<Node>],
    by_node: &'a HashMap<&'a str, Vec<Arc<PodView>>>,
    slots: std::cell::OnceCell<Vec<Slot<'a>>>,
}

impl<'a> NodeFit<'a> {
    /// The pass's nodes with the pods bound to each.
    pub fn new(
        nodes: &'a [&'a Arc<Node>],
        by_node: &'a HashMap<&'a str, Vec<Arc<PodView>>>,
    ) -> NodeFit<'a> {
        NodeFit {
            nodes,
            by_node,
            slots: std::cell::OnceCell::new(),
        }
    }

    pub fn slots(&self) -> &[Slot<'a>] {
        self.slots.get_or_init(|| {
            self.nodes
                .iter()
                .map(|n| {
                    let name = n.metadata.name.as_deref().unwrap_or("");
                    let pods = self.by_node.get(name).map(Vec::as_slice).unwrap_or(&[]);
                    Slot::new(n, pods)
                })
                .collect()
        })
    }

    pub fn slot(&self, name: &str) -> Option<&Slot<'a>> {
        self.slots().iter().find(|s| s.name == name)
    }

    /// Why `pod` cannot run on `s`, upstream's wording.
    pub fn check(&self, pod: &PodView, s: &Slot) -> Result<(), String> {
        if s.unschedulable() {
            return Err("node is not schedulable".into());
        }
        if !pod.fits_node(s.labels, s.name) {
            return Err("pod node selector does not match the node label".into());
        }
        if !tolerates_node(pod, s.taints().cloned()) {
            return Err("pod does not tolerate taints on the node".into());
        }
        let repelled = pod.anti_affinity.iter().any(|t| {
            s.labels.contains_key(&t.topology_key) && s.pods.iter().any(|o| term_selects(pod, t, o))
        });
        if repelled {
            return Err("pod matches inter-pod anti-affinity rule of other pod on node".into());
        }
        if pod.node_name.as_deref() != Some(s.name) {
            s.room_for(pod)?;
        }
        Ok(())
    }

    /// The pod fits one of `among` (all the pass's nodes when `None`) other than its own.
    pub fn fits_any_other(&self, pod: &PodView, among: Option<&[&str]>) -> bool {
        self.fits_any_other_where(pod, &|s| among.is_none_or(|a| a.contains(&s.name)))
    }

    /// The pod fits a node other than its own with labels `selector` matches.
    pub fn fits_any_other_selected(&self, pod: &PodView, selector: Option<&Selector>) -> bool {
        self.fits_any_other_where(pod, &|s| selector.is_none_or(|sel| sel.matches(s.labels)))
    }

    fn fits_any_other_where(&self, pod: &PodView, pick: &dyn Fn(&Slot) -> bool) -> bool {
        self.slots()
            .iter()
            .filter(|s| pick(s))
            .filter(|s| pod.node_name.as_deref() != Some(s.name))
            .any(|s| self.check(pod, s).is_ok())
    }
}
