//! RemoveDuplicates (Balance): pods of one owner with the same images piled on one node are
//! spread out — each node keeps at most ⌈owner's pods / feasible nodes⌉ of them. Duplicates
//! are found per node, among the pods the evictor may take (upstream's listing filter).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{Act, Env, RemoveDuplicatesArgs, Scope};
use crate::descheduler::framework::fit::tolerates_node;
use crate::descheduler::framework::plugin::NodeInput;
use crate::descheduler::framework::podview::PodView;

/// namespace, owner kind, owner name, the sorted images joined by `#`.
type OwnerKey = (String, String, String, String);

struct Found {
    /// Pods of each owner key seen (the first of each node included).
    occurrences: BTreeMap<OwnerKey, usize>,
    /// Owner key → node → its duplicates there (the first pod of each group excluded).
    duplicates: BTreeMap<OwnerKey, BTreeMap<String, Vec<Arc<PodView>>>>,
}

/// A pod's owner keys, and its sorted owner/image keys (what makes two pods duplicates).
type Keys = (Vec<OwnerKey>, Vec<String>);

fn owner_keys(p: &PodView) -> Keys {
    let mut images: Vec<String> = p.images.to_vec();
    images.sort();
    let hash = images.join("#");
    let mut keys = Vec::new();
    let mut container_keys = Vec::new();
    for o in &p.owners {
        keys.push((
            p.namespace.clone(),
            o.kind.clone(),
            o.name.clone(),
            hash.clone(),
        ));
        for i in &images {
            container_keys.push(format!("{}/{}/{}/{i}", p.namespace, o.kind, o.name));
        }
    }
    container_keys.sort();
    (keys, container_keys)
}

/// Whether RemoveDuplicates looks at the pod at all: owned, of no excluded owner kind,
/// selected by the profile's namespaces and label selector.
fn listed(a: &RemoveDuplicatesArgs, p: &PodView) -> bool {
    let excluded = p
        .owners
        .iter()
        .any(|o| a.exclude_owner_kinds.contains(&o.kind));
    !p.owners.is_empty() && !excluded && a.selects(p)
}

fn find(a: &RemoveDuplicatesArgs, env: &Env, act: &mut dyn Act) -> Found {
    let mut f = Found {
        occurrences: BTreeMap::new(),
        duplicates: BTreeMap::new(),
    };
    for i in env.inputs {
        let node = i.node.metadata.name.clone().unwrap_or_default();
        // Each pod's sorted owner/image keys; a pod matching an earlier list is a duplicate.
        let mut seen: Vec<&Vec<String>> = Vec::new();
        let listed: Vec<(&Arc<PodView>, Keys)> = i
            .pods
            .iter()
            .filter(|p| listed(a, p))
            .map(|p| (p, owner_keys(p)))
            .collect();
        let mut piles: BTreeMap<&[String], usize> = BTreeMap::new();
        for (_, (_, container_keys)) in &listed {
            *piles.entry(container_keys).or_default() += 1;
        }
        for (p, (keys, container_keys)) in &listed {
            // The evictor's refusal is told (a skip) for pods piled with others of their
            // owner, the ones an operator expects to see spread.
            let piled = !container_keys.is_empty() && piles[container_keys.as_slice()] > 1;
            if !act.filter(p, piled) || !act.pre_evict(p, piled) {
                continue;
            }
            for k in keys {
                *f.occurrences.entry(k.clone()).or_default() += 1;
            }
            if container_keys.is_empty() {
                continue;
            }
            if seen.contains(&container_keys) {
                for k in keys {
                    let by_node = f.duplicates.entry(k.clone()).or_default();
                    by_node.entry(node.clone()).or_default().push((*p).clone());
                }
            } else {
                seen.push(container_keys);
            }
        }
    }
    f
}

/// The nodes where the owner's pods could land: those a distinct placement (tolerations,
/// node selector, required affinity) of its duplicates fits, counted only when it fits
/// more than one node.
fn target_nodes(by_node: &BTreeMap<String, Vec<Arc<PodView>>>, inputs: &[NodeInput]) -> usize {
    let mut distinct: Vec<&PodView> = Vec::new();
    for p in by_node.values().flatten() {
        let same = |d: &&PodView| {
            d.tolerations == p.tolerations
                && d.required_affinity == p.required_affinity
                && d.node_selector == p.node_selector
        };
        if !distinct.iter().any(same) {
            distinct.push(p);
        }
    }
    let mut targets = BTreeSet::new();
    for p in distinct {
        let matching: Vec<&str> = inputs
            .iter()
            .filter(|i| {
                let taints = i.node.spec.as_ref().and_then(|s| s.taints.clone());
                let labels = i.node.metadata.labels.clone().unwrap_or_default();
                let name = i.node.metadata.name.as_deref().unwrap_or("");
                tolerates_node(p, taints.unwrap_or_default()) && p.fits_node(&labels, name)
            })
            .filter_map(|i| i.node.metadata.name.as_deref())
            .collect();
        if matching.len() > 1 {
            targets.extend(matching);
        }
    }
    targets.len()
}

pub(super) fn run(a: &RemoveDuplicatesArgs, env: &Env, act: &mut dyn Act) {
    let found = find(a, env, act);
    for (key, by_node) in &found.duplicates {
        let targets = target_nodes(by_node, env.inputs);
        if targets < 2 {
            continue;
        }
        let total = found.occurrences.get(key).copied().unwrap_or(0);
        let upper = total.div_ceil(targets).max(1);
        let (ns, kind, name, _) = key;
        for (node, pods) in by_node {
            if pods.len() < upper {
                continue;
            }
            let why = format!(
                "{} pods of {kind} {ns}/{name} with the same images on node {node}; at most {upper} per node over {targets} feasible nodes",
                pods.len() + 1
            );
            for p in &pods[upper - 1..] {
                act.evict(p, &why);
            }
        }
    }
}

#[cfg(test)]
#[path = "duplicates_tests.rs"]
mod tests;
