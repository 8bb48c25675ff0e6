//! DefaultPreemption, as kube-scheduler's: when no node fits, find on each node the
//! lower-priority pods whose eviction lets the pod fit — giving back first the ones a
//! PodDisruptionBudget protects, then the others, most important first — and nominate the
//! node with the fewest PDB violations, then the lowest highest-victim priority, the
//! smallest priority sum, the fewest victims and the latest start of its most important
//! victims. A pod with `preemptionPolicy: Never` preempts nothing.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::super::framework::runtime::Verdicts;
use super::super::framework::{
    ClusterState, Code, CycleState, Fits, FitsPod, NodeInfo, Nomination, Plugin, PodInfo, Point,
    Status,
};

pub struct DefaultPreemption;

/// One node's victims and how many of them a PDB protects.
#[derive(Debug, Clone)]
pub struct Victims {
    pub pods: Vec<Arc<PodInfo>>,
    pub pdb_violations: usize,
}

/// `MoreImportantPod`: higher priority, then the one running longer (a pod not started yet
/// counts as starting now).
pub fn more_important(a: &PodInfo, b: &PodInfo, now_ms: i64) -> std::cmp::Ordering {
    b.priority.cmp(&a.priority).then(
        a.started_ms
            .unwrap_or(now_ms)
            .cmp(&b.started_ms.unwrap_or(now_ms)),
    )
}

/// `filterPodsWithPDBViolation`: the pods (in order) whose eviction would take a matching
/// PDB below its `disruptionsAllowed`, and the rest.
pub fn split_by_pdb<'a>(
    pods: Vec<Arc<PodInfo>>,
    pdbs: impl Iterator<Item = &'a Arc<PodDisruptionBudget>>,
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut budgets: Vec<(&PodDisruptionBudget, i32)> = pdbs
        .map(|p| {
            let allowed = p
                .status
                .as_ref()
                .map(|s| s.disruptions_allowed)
                .unwrap_or(0);
            (&**p, allowed)
        })
        .collect();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for pod in pods {
        let mut violated = false;
        if !pod.labels.is_empty() {
            for (pdb, allowed) in budgets.iter_mut() {
                if !protects(pdb, &pod) {
                    continue;
                }
                *allowed -= 1;
                violated |= *allowed < 0;
            }
        }
        if violated {
            violating.push(pod);
        } else {
            fine.push(pod);
        }
    }
    (violating, fine)
}

/// The PDB is in the pod's namespace, its (non-empty) selector matches the pod and the pod
/// is not already among its disrupted pods.
fn protects(pdb: &PodDisruptionBudget, pod: &PodInfo) -> bool {
    if pdb.metadata.namespace.as_deref().unwrap_or_default() != pod.namespace {
        return false;
    }
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    let empty = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    let disrupted = pdb
        .status
        .as_ref()
        .and_then(|s| s.disrupted_pods.as_ref())
        .is_some_and(|d| d.contains_key(&pod.name));
    !empty
        && !disrupted
        && crate::api::selector::label_selector_matches(Some(sel), Some(&pod.labels))
}

/// A node with a preemption's candidate victims taken off. An owner of a reservation gives
/// what it held back to that reservation (its reserve pod recounted), where only the
/// reservation's owners can use it (Koordinator's `preemptibleInRRs`).
struct Trial<'a> {
    node: NodeInfo,
    cluster: &'a ClusterState,
    gone: HashSet<String>,
}

impl Trial<'_> {
    fn remove(&mut self, v: &Arc<PodInfo>) {
        self.node.remove_pod(&v.key);
        self.gone.insert(v.key.clone());
        self.recount(v);
    }

    fn add(&mut self, v: &Arc<PodInfo>) {
        self.node.add_pod(v.clone());
        self.gone.remove(&v.key);
        self.recount(v);
    }

    fn recount(&mut self, v: &PodInfo) {
        let Some(uid) = &v.reservation_allocated else {
            return;
        };
        let Some(r) = self.cluster.reserve_pod_without(uid, &self.gone) else {
            return;
        };
        if r.node_name.as_deref() == Some(self.node.name.as_str()) && self.node.remove_pod(&r.key) {
            self.node.add_pod(r);
        }
    }
}

/// `SelectVictimsOnNode`: remove every lower-priority pod; if the pod then fits, give back
/// the PDB-protected ones first, then the rest, most important first, keeping as victims
/// those the pod cannot fit beside.
pub fn select_victims(
    pod: &PodInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
    (fits, eligible): (&Fits<'_>, &dyn Fn(&PodInfo) -> bool),
) -> Option<Victims> {
    let mut lower: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority < pod.priority && eligible(p))
        .cloned()
        .collect();
    if lower.is_empty() {
        return None;
    }
    let mut trial = Trial {
        node: node.clone(),
        cluster,
        gone: HashSet::new(),
    };
    for v in &lower {
        trial.remove(v);
    }
    if !fits(&trial.node) {
        return None;
    }
    lower.sort_by(|a, b| more_important(a, b, cluster.now_ms));
    let (violating, fine) = split_by_pdb(lower, cluster.pdbs.values());
    let mut out = Victims {
        pods: Vec::new(),
        pdb_violations: 0,
    };
    let mixed = !violating.is_empty() && !fine.is_empty();
    for (protected, v) in violating
        .into_iter()
        .map(|v| (true, v))
        .chain(fine.into_iter().map(|v| (false, v)))
    {
        trial.add(&v);
        if !fits(&trial.node) {
            trial.remove(&v);
            out.pdb_violations += protected as usize;
            out.pods.push(v);
        }
    }
    if mixed {
        out.pods
            .sort_by(|a, b| more_important(a, b, cluster.now_ms));
    }
    // Upstream drops a node where the pod fits with no victims (its rejection came from
    // elsewhere, e.g. a quota's PreFilter).
    (!out.pods.is_empty()).then_some(out)
}

/// `GetEarliestPodStartTime`: the earliest start among the most important victims.
fn earliest_start(v: &Victims, now_ms: i64) -> i64 {
    let top = v.pods.iter().map(|p| p.priority).max().unwrap_or(i32::MIN);
    v.pods
        .iter()
        .filter(|p| p.priority == top)
        .map(|p| p.started_ms.unwrap_or(now_ms))
        .min()
        .unwrap_or(now_ms)
}

/// `pickOneNodeForPreemption`'s order: fewest PDB violations, lowest highest-victim
/// priority, smallest priority sum, fewest victims, latest start of the most important
/// victims (a tie stays with the node first by name).
pub fn better(a: &Victims, b: &Victims, now_ms: i64) -> bool {
    let key = |v: &Victims| {
        let top = v
            .pods
            .iter()
            .map(|p| p.priority as i64)
            .max()
            .unwrap_or(i64::MIN);
        let sum: i64 = v
            .pods
            .iter()
            .map(|p| p.priority as i64 + i32::MAX as i64 + 1)
            .sum();
        (
            v.pdb_violations,
            top,
            sum,
            v.pods.len(),
            std::cmp::Reverse(earliest_start(v, now_ms)),
        )
    };
    key(a) < key(b)
}

/// kube-scheduler's `Preempt` for one pod: the node whose victims (lower priority, and
/// `eligible`) cost least, among the nodes rejected as Unschedulable.
pub fn preempt(
    pod: &PodInfo,
    cluster: &ClusterState,
    rejected: &Verdicts,
    (fits, eligible): (&Fits<'_>, &dyn Fn(&PodInfo) -> bool),
) -> (Status, Option<Nomination>) {
    if pod.spec().and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
        return (
            Status::unresolvable("not eligible due to preemptionPolicy=Never"),
            None,
        );
    }
    match pick_node(cluster, rejected, |node| {
        select_victims(pod, node, cluster, (fits, eligible))
    }) {
        Some(n) => (Status::success(), Some(n)),
        None => (
            Status::unschedulable("No preemption victims found for incoming pod"),
            None,
        ),
    }
}

/// `pickOneNodeForPreemption` over the nodes rejected as Unschedulable: the node whose
/// victims (`victims_on`) cost least.
pub fn pick_node(
    cluster: &ClusterState,
    rejected: &Verdicts,
    victims_on: impl Fn(&NodeInfo) -> Option<Victims>,
) -> Option<Nomination> {
    let mut best: Option<(String, Victims)> = None;
    for (name, v) in rejected {
        if v.code != Code::Unschedulable {
            continue;
        }
        let Some(node) = cluster.node(name) else {
            continue;
        };
        let Some(victims) = victims_on(node) else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|(_, b)| better(&victims, b, cluster.now_ms))
        {
            best = Some((name.to_string(), victims));
        }
    }
    best.map(|(node, v)| Nomination {
        node,
        victims: v.pods,
        job: None,
    })
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        "DefaultPreemption"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PostFilter]
    }
    fn post_filter(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        rejected: &Verdicts,
        fits: &Fits<'_>,
        _: &FitsPod<'_>,
    ) -> (Status, Option<Nomination>) {
        preempt(pod, cluster, rejected, (fits, &|_| true))
    }
}
