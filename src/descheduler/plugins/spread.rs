//! RemovePodsViolatingTopologySpreadConstraint (Balance): per namespace and distinct
//! constraint of its pods, the matching pods are counted per topology domain; where two
//! domains differ by more than `maxSkew`, pods move from the largest domains toward the
//! average (upstream's `balanceDomains`), each only if it fits a node of a domain below the
//! average (`topologyBalanceNodeFit`, default true).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelector, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::{Act, Env, RemovePodsViolatingTopologySpreadConstraintArgs, Scope};
use crate::api::field::FieldError;
use crate::api::placement::{placement_matches, tolerates};
use crate::api::selector::label_selector_matches;
use crate::descheduler::framework::plugin::NodeInput;
use crate::descheduler::framework::podview::PodView;

const KINDS: [&str; 2] = ["DoNotSchedule", "ScheduleAnyway"];

pub(super) fn validate(
    a: &RemovePodsViolatingTopologySpreadConstraintArgs,
) -> Result<(), FieldError> {
    let ns = a.namespaces.as_ref();
    if ns.is_some_and(|n| !n.include.is_empty() && !n.exclude.is_empty()) {
        return Err(FieldError::new(
            "namespaces",
            "only one of Include/Exclude namespaces can be set",
        ));
    }
    if let Some(c) = a.constraints.iter().find(|c| !KINDS.contains(&c.as_str())) {
        return Err(FieldError::new(
            "constraints",
            format!("constraint {c} is not one of [DoNotSchedule ScheduleAnyway]"),
        ));
    }
    Ok(())
}

/// A pod's node selector and required node affinity.
type Placement = (Option<BTreeMap<String, String>>, Option<NodeSelector>);

/// A constraint as upstream compares them: its selector with `matchLabelKeys` merged in,
/// and the pod's placement where the inclusion policies honour it.
#[derive(Debug, Clone, PartialEq)]
struct Tsc {
    max_skew: i32,
    key: String,
    selector: Option<LabelSelector>,
    /// Node selector and required affinity (nodeAffinityPolicy Honor, the default).
    affinity: Option<Placement>,
    /// Tolerations (nodeTaintsPolicy Honor; Ignore is the default).
    tolerations: Option<Vec<Toleration>>,
}

impl Tsc {
    fn new(c: &TopologySpreadConstraint, pod: &PodView) -> Tsc {
        let mut selector = c.label_selector.clone();
        if let Some(sel) = selector.as_mut() {
            for k in c.match_label_keys.iter().flatten() {
                if let Some(v) = pod.labels.iter().find(|(lk, _)| lk == k).map(|(_, v)| v) {
                    sel.match_expressions.get_or_insert_with(Vec::new).push(
                        LabelSelectorRequirement {
                            key: k.clone(),
                            operator: "In".into(),
                            values: Some(vec![v.clone()]),
                        },
                    );
                }
            }
        }
        let honor = |p: &Option<String>, default: &str| p.as_deref().unwrap_or(default) == "Honor";
        Tsc {
            max_skew: c.max_skew,
            key: c.topology_key.clone(),
            selector,
            affinity: honor(&c.node_affinity_policy, "Honor")
                .then(|| (pod.node_selector.clone(), pod.required_affinity.clone())),
            tolerations: honor(&c.node_taints_policy, "Ignore").then(|| pod.tolerations.to_vec()),
        }
    }

    /// `matchNodeInclusionPolicies`.
    fn includes(&self, i: &NodeInput) -> bool {
        let labels = i.node.metadata.labels.clone().unwrap_or_default();
        let name = i.node.metadata.name.as_deref().unwrap_or("");
        if let Some((sel, req)) = &self.affinity
            && !placement_matches(sel.as_ref(), req.as_ref(), &labels, name)
        {
            return false;
        }
        if let Some(tol) = &self.tolerations {
            let taints = i
                .node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_deref())
                .unwrap_or(&[]);
            let blocking = |t: &&k8s_openapi::api::core::v1::Taint| {
                t.effect == "NoSchedule" || t.effect == "NoExecute"
            };
            if taints.iter().filter(blocking).any(|t| !tolerates(tol, t)) {
                return false;
            }
        }
        true
    }

    fn selects(&self, p: &PodView) -> bool {
        label_selector_matches(self.selector.as_ref(), p.labels_map().as_ref())
    }
}

fn domain_of<'a>(i: &'a NodeInput, key: &str) -> Option<&'a String> {
    i.node.metadata.labels.as_ref()?.get(key)
}

/// Pods that may be given up last come first; the back of each domain's list goes first.
fn sort_domain(pods: &mut [Arc<PodView>]) {
    let pinned = |p: &PodView| p.node_selector.is_some() || p.node_affinity;
    pods.sort_by(|a, b| {
        pinned(b)
            .cmp(&pinned(a))
            .then_with(|| match (a.priority, b.priority) {
                (Some(x), Some(y)) => x.cmp(&y),
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
    });
}

struct Domain {
    value: String,
    pods: Vec<Arc<PodView>>,
}

/// Upstream's `balanceDomains`: the pods to evict for one constraint.
fn balance(
    tsc: &Tsc,
    domains: BTreeMap<String, Vec<Arc<PodView>>>,
    sum: usize,
    env: &Env,
    node_fit: bool,
    out: &mut Vec<(Arc<PodView>, String)>,
) {
    let avg = sum as f64 / domains.len() as f64;
    let mut sorted: Vec<Domain> = domains
        .into_iter()
        .map(|(value, mut pods)| {
            sort_domain(&mut pods);
            Domain { value, pods }
        })
        .collect();
    sorted.sort_by_key(|d| d.pods.len());
    let below: Vec<&str> = env
        .inputs
        .iter()
        .filter(|i| tsc.includes(i))
        .filter(|i| {
            domain_of(i, &tsc.key).is_some_and(|v| {
                sorted
                    .iter()
                    .any(|d| &d.value == v && (d.pods.len() as f64) < avg)
            })
        })
        .filter_map(|i| i.node.metadata.name.as_deref())
        .collect();
    let fits = |p: &PodView| env.fit.fits_any_other(p, Some(&below));
    let (mut i, mut j) = (0usize, sorted.len() - 1);
    while i < j {
        if sorted[j].pods.len() as f64 <= avg {
            j -= 1;
        }
        let skew = sorted[j].pods.len() as i64 - sorted[i].pods.len() as i64;
        if skew <= tsc.max_skew as i64 {
            i += 1;
            continue;
        }
        let above = (sorted[j].pods.len() as f64 - avg).ceil();
        let under = (avg - sorted[i].pods.len() as f64).ceil();
        let half = ((skew - tsc.max_skew as i64) as f64 / 2.0).ceil();
        let moving = above.min(under).min(half) as i64;
        if moving <= 0 {
            i += 1;
            continue;
        }
        // Pods that fit a node below the average go to the back, where pods are taken.
        sorted[j].pods.sort_by_key(|p| fits(p));
        let n = sorted[j].pods.len();
        let taken: Vec<Arc<PodView>> = sorted[j].pods.split_off(n - moving as usize);
        let why = format!(
            "topology spread: domain {}={} has {n} pods, {} has {}, maxSkew {}",
            tsc.key,
            sorted[j].value,
            sorted[i].value,
            sorted[i].pods.len(),
            tsc.max_skew
        );
        for p in &taken {
            if node_fit && !fits(p) {
                continue;
            }
            if !out.iter().any(|(o, _)| Arc::ptr_eq(o, p)) {
                out.push((p.clone(), why.clone()));
            }
        }
        sorted[i].pods.extend(taken);
    }
}

fn constraints_of(allowed: &[String], pods: &[Arc<PodView>]) -> Vec<Tsc> {
    let mut out: Vec<Tsc> = Vec::new();
    for p in pods {
        for c in p.spread.iter() {
            if !allowed.contains(&c.when_unsatisfiable) {
                continue;
            }
            let t = Tsc::new(c, p);
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

pub(super) fn run(
    a: &RemovePodsViolatingTopologySpreadConstraintArgs,
    env: &Env,
    act: &mut dyn Act,
) {
    let allowed = if a.constraints.is_empty() {
        vec!["DoNotSchedule".to_string()]
    } else {
        a.constraints.clone()
    };
    let mut by_ns: BTreeMap<&str, Vec<Arc<PodView>>> = BTreeMap::new();
    for p in env.inputs.iter().flat_map(|i| i.pods.iter()) {
        if a.selects(p) && act.filter(p, false) {
            by_ns
                .entry(p.namespace.as_str())
                .or_default()
                .push(p.clone());
        }
    }
    // Listed by name, as upstream's tests order them: which pods of a domain go is decided
    // by their place in its list.
    for pods in by_ns.values_mut() {
        pods.sort_by(|a, b| a.name.cmp(&b.name));
    }
    let node_of: BTreeMap<&str, &NodeInput> = env
        .inputs
        .iter()
        .filter_map(|i| Some((i.node.metadata.name.as_deref()?, i)))
        .collect();
    let mut chosen: Vec<(Arc<PodView>, String)> = Vec::new();
    for pods in by_ns.values() {
        for tsc in constraints_of(&allowed, pods) {
            let mut domains: BTreeMap<String, Vec<Arc<PodView>>> = BTreeMap::new();
            for i in env.inputs.iter().filter(|i| tsc.includes(i)) {
                if let Some(v) = domain_of(i, &tsc.key) {
                    domains.entry(v.clone()).or_default();
                }
            }
            let mut sum = 0;
            for p in pods.iter().filter(|p| !p.deleting && tsc.selects(p)) {
                let node = p.node_name.as_deref().and_then(|n| node_of.get(n));
                if let Some(v) = node.and_then(|i| domain_of(i, &tsc.key)) {
                    domains.entry(v.clone()).or_default().push(p.clone());
                    sum += 1;
                }
            }
            let sizes = domains.values().map(Vec::len);
            let skew = sizes.clone().max().unwrap_or(0) - sizes.min().unwrap_or(0);
            if skew as i64 <= tsc.max_skew as i64 {
                continue;
            }
            let node_fit = a.topology_balance_node_fit.unwrap_or(true);
            balance(&tsc, domains, sum, env, node_fit, &mut chosen);
        }
    }
    for (p, why) in chosen {
        if act.filter(&p, true) && act.pre_evict(&p, true) {
            act.evict(&p, &why);
        }
    }
}

#[cfg(test)]
#[path = "spread_tests.rs"]
mod tests;
