//! Offer slots (Koordinator's `calculateNodeOfferSlot`): on each node, how many of a
//! job's pods fit one after another — each pod's own PreFilter and the profile's Filters,
//! the pods before it assumed on the node, the pods nominated there counted except the
//! job's own — and, where one does not fit, why.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::runtime::{Framework, filters_except};
use super::{ClusterState, NodeInfo, PodInfo, Status};

#[derive(Debug, Default, Clone)]
pub struct OfferSlots {
    pub slots: HashMap<String, i64>,
    /// Node → the first rejection there.
    pub rejected: BTreeMap<String, String>,
}

impl Framework {
    /// `pods` in order on every node of `cluster`.
    pub fn offer_slots(&self, pods: &[Arc<PodInfo>], cluster: &ClusterState) -> OfferSlots {
        let job: HashSet<String> = pods.iter().map(|p| p.key.clone()).collect();
        let states: Vec<_> = pods.iter().map(|p| self.own_state(p, cluster)).collect();
        let mut out = OfferSlots::default();
        for node in &cluster.nodes {
            let mut with: Option<NodeInfo> = None;
            let mut slots = 0;
            for (i, p) in pods.iter().enumerate() {
                let on = with.as_ref().unwrap_or(node);
                let fit = match &states[i] {
                    Err(s) => Err(s.clone()),
                    Ok((_, Some(allowed))) if !allowed.contains(&node.name) => Err(
                        Status::unschedulable("node(s) didn't satisfy plugin(s) PreFilter result"),
                    ),
                    Ok((state, _)) => {
                        let filters = self.active_filters(state);
                        filters_except(&filters, state, p, on, cluster, &job)
                    }
                };
                if let Err(s) = fit {
                    out.rejected.insert(node.name.clone(), s.message());
                    break;
                }
                slots += 1;
                if i + 1 < pods.len() {
                    let mut assumed = (**p).clone();
                    assumed.node_name = Some(node.name.clone());
                    with.get_or_insert_with(|| node.clone())
                        .add_pod(Arc::new(assumed));
                }
            }
            out.slots.insert(node.name.clone(), slots);
        }
        out
    }
}
