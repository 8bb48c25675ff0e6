//! ScheduleExplanation's answer, from scheduling attempts: the live scheduler answers each
//! object from a dry run of its cycle ([`cycle::dry_run`]) on its own cache, and
//! `koord explain schedule` prints the same answer for each pod it schedules — one function,
//! so both say the same thing about the same state.
//!
//! Koordinator's diagnosis: each rejected node's (plugin, reason, preempt might help —
//! every code but UnschedulableAndUnresolvable) folded into `nodeFailedDetails`, sorted by
//! plugin, then reason, then preempt-might-help first, each node list sorted; the nodes
//! grouped into topology domains by the value of the node label the pod names in
//! `scheduling.koordinator.sh/topology-key-to-explain`.

use std::collections::BTreeMap;

use super::cycle::{Attempt, Outcome};
use super::framework::fit_error::nodes_available;
use super::framework::runtime::NodeVerdict;
use super::framework::{ClusterState, Code, Nomination, PodInfo};
use crate::api::scheduling::explanation::{
    DetailedExplanation, Explanation, FeasibleSchedulingResult, NodeFailedDetail,
    NodePossibleVictims, PossibleVictim, ScheduleExplanationStatus,
};

/// A pod's label naming the ScheduleExplanation key it answers to (a job's pods).
pub const LABEL_QUESTIONED_OBJECT_KEY: &str = "scheduling.koordinator.sh/questioned-object-key";
/// A pod's label naming the node label whose values are the domains explained apart.
pub const LABEL_TOPOLOGY_KEY_TO_EXPLAIN: &str = "scheduling.koordinator.sh/topology-key-to-explain";

/// One questioned pod and what a cycle said about it.
pub struct Asked<'a> {
    pub pod: &'a PodInfo,
    pub attempt: &'a Attempt,
}

/// The status for the pods a question names (several for a job or gang), over `cluster`.
pub fn status(asked: &[Asked<'_>], cluster: &ClusterState) -> ScheduleExplanationStatus {
    let Some(first) = asked.first() else {
        return ScheduleExplanationStatus::default();
    };
    let key = first
        .pod
        .labels
        .get(LABEL_TOPOLOGY_KEY_TO_EXPLAIN)
        .map(String::as_str);
    let domains = domains(cluster, key);
    let detailed: Vec<DetailedExplanation> = domains
        .iter()
        .map(|(domain, nodes)| in_domain(asked, domain, nodes))
        .collect();
    let schedulable = asked.iter().all(|a| a.attempt.node().is_some());
    let preempt = !schedulable && asked.iter().all(|a| placed_or_nominated(a.attempt));
    let failed = asked.iter().find_map(|a| failed_message(a.attempt));
    ScheduleExplanationStatus {
        schedulable: Some(schedulable),
        schedulable_after_preemption: Some(preempt),
        failed_message: failed,
        detailed_explanation: Some(detailed),
        last_update_time: None,
    }
}

/// The answer for the pod `namespace/name` already placed on `node` (nothing to explain
/// but where it went).
pub fn bound(key: &str, node: &str) -> ScheduleExplanationStatus {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    let result = FeasibleSchedulingResult {
        namespace: Some(namespace.to_string()),
        name: Some(name.to_string()),
        uid: None,
        node_name: Some(node.to_string()),
    };
    let explanation = Explanation {
        schedulable: Some(true),
        feasible_scheduling_result: Some(vec![result]),
        ..Default::default()
    };
    ScheduleExplanationStatus {
        schedulable: Some(true),
        schedulable_after_preemption: Some(false),
        detailed_explanation: Some(vec![DetailedExplanation {
            schedulable: Some(true),
            schedulable_after_preemption: Some(false),
            schedule_explanation: Some(explanation),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// The answer when no pod answers to the key.
pub fn not_found(key: &str) -> ScheduleExplanationStatus {
    ScheduleExplanationStatus {
        schedulable: Some(false),
        schedulable_after_preemption: Some(false),
        failed_message: Some(format!("no pod found for questionObjectKey {key:?}")),
        ..Default::default()
    }
}

fn placed_or_nominated(a: &Attempt) -> bool {
    a.node().is_some()
        || matches!(
            &a.outcome,
            Outcome::Unschedulable {
                nomination: Some(_),
                ..
            }
        )
}

fn failed_message(a: &Attempt) -> Option<String> {
    match &a.outcome {
        Outcome::Gated { plugin, reason } => Some(format!("{plugin}: {reason}")),
        Outcome::Unschedulable { message, .. } => Some(message.clone()),
        Outcome::Failed { plugin, reason, .. } | Outcome::PermitRejected { plugin, reason, .. } => {
            Some(format!("{plugin}: {reason}"))
        }
        _ => None,
    }
}

/// Node names by domain: one unnamed domain of every node without a topology key.
fn domains(cluster: &ClusterState, key: Option<&str>) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in &cluster.nodes {
        let domain = match key {
            Some(k) => match n.labels.get(k) {
                Some(v) => v.clone(),
                None => continue,
            },
            None => String::new(),
        };
        out.entry(domain).or_default().push(n.name.clone());
    }
    if out.is_empty() {
        out.insert(String::new(), Vec::new());
    }
    out
}

fn in_domain(asked: &[Asked<'_>], domain: &str, nodes: &[String]) -> DetailedExplanation {
    let set: std::collections::HashSet<&str> = nodes.iter().map(String::as_str).collect();
    let mut feasible_results = Vec::new();
    let mut details: BTreeMap<(&'static str, String, bool), Vec<String>> = BTreeMap::new();
    let mut reasons: Vec<String> = Vec::new();
    let mut victims = Vec::new();
    let mut preempt_failed = None;
    for a in asked {
        if let Some(node) = a.attempt.node().filter(|n| set.contains(n)) {
            feasible_results.push(feasible(a.pod, node));
            continue;
        }
        for (name, v) in verdicts_of(a.attempt) {
            if v.feasible || !set.contains(name) {
                continue;
            }
            let (plugin, reason, help) = failed_status(v);
            details
                .entry((plugin, reason.clone(), help))
                .or_default()
                .push(name.to_string());
            reasons.push(reason);
        }
        match &a.attempt.outcome {
            Outcome::Unschedulable {
                nomination: Some(n),
                ..
            } if set.contains(n.node.as_str()) => victims.push(possible_victims(n)),
            Outcome::Unschedulable { .. } => preempt_failed = preemption_message(a.attempt),
            _ => {}
        }
    }
    let schedulable = !asked.is_empty() && feasible_results.len() == asked.len();
    let failed =
        (!schedulable).then(|| nodes_available(nodes.len(), reasons.iter().map(String::as_str)));
    let failed_details = sorted(details);
    let preempt = !schedulable && !victims.is_empty();
    DetailedExplanation {
        topology_domain: Some(domain.to_string()).filter(|d| !d.is_empty()),
        schedulable: Some(schedulable),
        schedulable_after_preemption: Some(preempt),
        failed_message: failed.clone(),
        schedule_explanation: Some(Explanation {
            schedulable: Some(schedulable),
            failed_message: failed,
            node_failed_details: Some(failed_details).filter(|d| !d.is_empty()),
            feasible_scheduling_result: Some(feasible_results).filter(|r| !r.is_empty()),
        }),
        preempt_explanation: (!schedulable).then(|| Explanation {
            schedulable: Some(preempt),
            failed_message: if preempt { None } else { preempt_failed },
            ..Default::default()
        }),
        node_possible_victims: Some(victims).filter(|v| !v.is_empty()),
    }
}

fn verdicts_of(a: &Attempt) -> Vec<(&str, &NodeVerdict)> {
    a.result
        .iter()
        .flat_map(|r| r.verdicts.iter())
        .map(|(n, v)| (n.as_ref(), v))
        .collect()
}

/// Koordinator's `NodeFailedStatus` of a rejected node.
fn failed_status(v: &NodeVerdict) -> (&'static str, String, bool) {
    let help = v.code != Code::UnschedulableAndUnresolvable;
    (v.plugin.unwrap_or(""), v.reason.to_string(), help)
}

/// The rejected nodes folded by (plugin, reason, preempt might help), in Koordinator's order.
fn sorted(details: BTreeMap<(&'static str, String, bool), Vec<String>>) -> Vec<NodeFailedDetail> {
    let mut out: Vec<NodeFailedDetail> = details
        .into_iter()
        .map(|((plugin, reason, help), nodes)| NodeFailedDetail {
            failed_plugin: Some(plugin.to_string()).filter(|p| !p.is_empty()),
            reason: Some(reason).filter(|r| !r.is_empty()),
            failed_nodes: Some(nodes),
            preempt_might_help: Some(help),
        })
        .collect();
    sort_node_failed_details(&mut out);
    out
}

/// Koordinator's `SortNodeFailedDetails`: by plugin, then reason, then preempt might help
/// first; each node list sorted.
pub fn sort_node_failed_details(details: &mut [NodeFailedDetail]) {
    details.sort_by(|a, b| {
        (&a.failed_plugin, &a.reason)
            .cmp(&(&b.failed_plugin, &b.reason))
            .then(b.preempt_might_help.cmp(&a.preempt_might_help))
    });
    for d in details {
        if let Some(nodes) = d.failed_nodes.as_mut() {
            nodes.sort();
        }
    }
}

fn preemption_message(a: &Attempt) -> Option<String> {
    let msgs: Vec<String> = a
        .post_filter
        .iter()
        .filter(|r| !r.message.is_empty())
        .map(|r| format!("{}: {}", r.plugin, r.message))
        .collect();
    (!msgs.is_empty()).then(|| msgs.join("; "))
}

fn possible_victims(n: &Nomination) -> NodePossibleVictims {
    let victims = n
        .victims
        .iter()
        .map(|v| PossibleVictim {
            namespace: Some(v.namespace.clone()),
            name: Some(v.name.clone()),
            uid: Some(v.uid.clone()).filter(|u| !u.is_empty()),
            // A pod only nominated there (not yet bound) gives way too.
            is_nominated_pod: Some(v.node_name.is_none()),
        })
        .collect();
    NodePossibleVictims {
        node_name: Some(n.node.clone()),
        possible_victims: Some(victims),
    }
}

fn feasible(pod: &PodInfo, node: &str) -> FeasibleSchedulingResult {
    FeasibleSchedulingResult {
        namespace: Some(pod.namespace.clone()),
        name: Some(pod.name.clone()),
        uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
        node_name: Some(node.to_string()),
    }
}

#[cfg(test)]
#[path = "explanation_tests.rs"]
mod tests;
