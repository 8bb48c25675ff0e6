//! InterPodAffinity: required affinity / anti-affinity of the incoming pod, existing pods'
//! required anti-affinity (symmetry), and preferred terms of both sides for scoring,
//! min-max normalized (kube-scheduler semantics). PreFilter collects the topology domains
//! once per cycle, so Filter and Score are lookups.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{PodAffinityTerm, WeightedPodAffinityTerm};

use super::super::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Point, Status,
};
use crate::api::selector::label_selector_matches;

const KEY: &str = "InterPodAffinity";

/// A topology domain: (topology key, value).
type Domain = (String, String);

fn affinity_terms(
    p: &PodInfo,
) -> (
    &[PodAffinityTerm],
    &[PodAffinityTerm],
    &[WeightedPodAffinityTerm],
    &[WeightedPodAffinityTerm],
) {
    let a = p.spec().and_then(|s| s.affinity.as_ref());
    let pa = a.and_then(|a| a.pod_affinity.as_ref());
    let anti = a.and_then(|a| a.pod_anti_affinity.as_ref());
    (
        pa.and_then(|x| {
            x.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or(&[]),
        anti.and_then(|x| {
            x.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or(&[]),
        pa.and_then(|x| {
            x.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or(&[]),
        anti.and_then(|x| {
            x.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or(&[]),
    )
}

/// Whether `term` (written by a pod in `owner_ns`) selects `candidate`. A non-empty
/// namespaceSelector needs namespace labels the scheduler does not keep: it selects only
/// the namespaces listed explicitly.
fn selects(term: &PodAffinityTerm, owner_ns: &str, candidate: &PodInfo) -> bool {
    let ns_ok = match (&term.namespaces, &term.namespace_selector) {
        (Some(list), _) if !list.is_empty() => list.contains(&candidate.namespace),
        (_, Some(sel))
            if sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && sel.match_expressions.as_ref().is_none_or(|m| m.is_empty()) =>
        {
            true
        }
        (_, Some(_)) => false,
        _ => candidate.namespace == owner_ns,
    };
    ns_ok
        && term.label_selector.as_ref().is_some_and(|_| {
            label_selector_matches(term.label_selector.as_ref(), Some(&candidate.labels))
        })
}

fn domain(node: &NodeInfo, key: &str) -> Option<Domain> {
    node.labels.get(key).map(|v| (key.to_string(), v.clone()))
}

/// Per-cycle facts.
#[derive(Default)]
struct Facts {
    /// Per incoming required affinity term: domains holding a matching pod.
    affinity: Vec<HashSet<Domain>>,
    /// Any pod in the cluster matches an affinity term (else the pod may start the group).
    any_affinity_match: bool,
    /// Per incoming required anti-affinity term: domains holding a matching pod.
    anti: Vec<HashSet<Domain>>,
    /// Domains where an existing pod's required anti-affinity selects the incoming pod.
    existing_anti: HashSet<Domain>,
    /// Preferred score per domain.
    score: HashMap<Domain, i64>,
}

pub struct InterPodAffinity {
    pub ignore_existing_preferred: bool,
    /// `hardPodAffinityWeight`: what an existing pod's required affinity to the incoming
    /// pod adds to its domains' score (kube's default 1; 0 counts none).
    pub hard_weight: i64,
}

impl InterPodAffinity {
    fn facts(&self, pod: &PodInfo, cluster: &ClusterState) -> Facts {
        let (req_aff, req_anti, pref_aff, pref_anti) = affinity_terms(pod);
        let mut f = Facts {
            affinity: vec![HashSet::new(); req_aff.len()],
            anti: vec![HashSet::new(); req_anti.len()],
            ..Default::default()
        };
        if !pod.has_pod_affinity && cluster.pods_with_affinity == 0 {
            return f;
        }
        for node in &cluster.nodes {
            for other in &node.pods {
                if other.key == pod.key {
                    continue;
                }
                for (i, t) in req_aff.iter().enumerate() {
                    if selects(t, &pod.namespace, other) {
                        f.any_affinity_match = true;
                        f.affinity[i].extend(domain(node, &t.topology_key));
                    }
                }
                for (i, t) in req_anti.iter().enumerate() {
                    if selects(t, &pod.namespace, other) {
                        f.anti[i].extend(domain(node, &t.topology_key));
                    }
                }
                let mut add = |key: &str, w: i64| {
                    if let Some(d) = domain(node, key) {
                        *f.score.entry(d).or_insert(0) += w;
                    }
                };
                for t in pref_aff
                    .iter()
                    .filter(|t| selects(&t.pod_affinity_term, &pod.namespace, other))
                {
                    add(&t.pod_affinity_term.topology_key, t.weight as i64);
                }
                for t in pref_anti
                    .iter()
                    .filter(|t| selects(&t.pod_affinity_term, &pod.namespace, other))
                {
                    add(&t.pod_affinity_term.topology_key, -(t.weight as i64));
                }
                let (o_aff, o_anti, o_pref_aff, o_pref_anti) = affinity_terms(other);
                for t in o_anti.iter().filter(|t| selects(t, &other.namespace, pod)) {
                    f.existing_anti.extend(domain(node, &t.topology_key));
                }
                if self.hard_weight > 0 {
                    for t in o_aff.iter().filter(|t| selects(t, &other.namespace, pod)) {
                        add(&t.topology_key, self.hard_weight);
                    }
                }
                if self.ignore_existing_preferred {
                    continue;
                }
                for t in o_pref_aff
                    .iter()
                    .filter(|t| selects(&t.pod_affinity_term, &other.namespace, pod))
                {
                    add(&t.pod_affinity_term.topology_key, t.weight as i64);
                }
                for t in o_pref_anti
                    .iter()
                    .filter(|t| selects(&t.pod_affinity_term, &other.namespace, pod))
                {
                    add(&t.pod_affinity_term.topology_key, -(t.weight as i64));
                }
            }
        }
        f
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        KEY
    }
    /// kube's: assigned pods added, relabelled or deleted; nodes added or relabelled.
    fn events(&self) -> crate::scheduler::framework::events::Events {
        use crate::scheduler::framework::events::Events as E;
        E::POD_ASSIGNED.or(E::NODE_ADD).or(E::NODE_LABEL)
    }
    fn points(&self) -> &'static [Point] {
        &[
            Point::PreFilter,
            Point::Filter,
            Point::PreScore,
            Point::Score,
        ]
    }
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> (Status, Option<HashSet<String>>) {
        let facts = self.facts(pod, cluster);
        let (req_aff, req_anti, _, _) = affinity_terms(pod);
        let nothing = req_aff.is_empty() && req_anti.is_empty() && facts.existing_anti.is_empty();
        state.write(KEY, facts);
        (
            if nothing {
                Status::skip()
            } else {
                Status::success()
            },
            None,
        )
    }
    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Status {
        let Some(f) = state.read::<Facts>(KEY) else {
            return Status::success();
        };
        let (req_aff, req_anti, _, _) = affinity_terms(pod);
        if f.existing_anti
            .iter()
            .any(|(k, v)| node.labels.get(k) == Some(v))
        {
            return Status::unschedulable(
                "node(s) didn't satisfy existing pods anti-affinity rules",
            );
        }
        let in_domain =
            |set: &HashSet<Domain>, key: &str| domain(node, key).is_some_and(|d| set.contains(&d));
        let self_match = req_aff.iter().all(|t| selects(t, &pod.namespace, pod));
        let affinity_ok = req_aff.iter().enumerate().all(|(i, t)| {
            domain(node, &t.topology_key).is_some()
                && (in_domain(&f.affinity[i], &t.topology_key)
                    || (!f.any_affinity_match && self_match))
        });
        if !affinity_ok {
            return Status::unresolvable("node(s) didn't match pod affinity rules");
        }
        if req_anti
            .iter()
            .enumerate()
            .any(|(i, t)| in_domain(&f.anti[i], &t.topology_key))
        {
            return Status::unschedulable("node(s) didn't match pod anti-affinity rules");
        }
        Status::success()
    }
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[usize],
        cluster: &ClusterState,
    ) -> Status {
        if state.read::<Facts>(KEY).is_none() {
            let f = self.facts(pod, cluster);
            state.write(KEY, f);
        }
        match state.read::<Facts>(KEY) {
            Some(f) if !f.score.is_empty() => Status::success(),
            _ => Status::skip(),
        }
    }
    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, Status> {
        let Some(f) = state.read::<Facts>(KEY) else {
            return Ok(0);
        };
        let by_key: BTreeMap<&str, &str> = node
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Ok(f.score
            .iter()
            .filter(|((k, v), _)| by_key.get(k.as_str()) == Some(&v.as_str()))
            .map(|(_, w)| *w)
            .sum())
    }
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        let (min, max) = (
            scores.iter().copied().min().unwrap_or(0),
            scores.iter().copied().max().unwrap_or(0),
        );
        let diff = max - min;
        for s in scores.iter_mut() {
            *s = if diff > 0 {
                (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / diff as f64)) as i64
            } else {
                0
            };
        }
    }
}
