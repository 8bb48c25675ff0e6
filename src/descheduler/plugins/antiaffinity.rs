//! RemovePodsViolatingInterPodAntiAffinity (Deschedule): a pod whose required anti-affinity
//! selects another pod in the same topology domain is evicted, lowest priority first; once
//! evicted it no longer counts against the others.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Act, Env, RemovePodsViolatingInterPodAntiAffinityArgs, Scope, priority_low_to_high};
use crate::descheduler::framework::fit::{term_namespaces, term_selects};
use crate::descheduler::framework::podview::PodView;

/// Both nodes are the same or share the value of `key`.
fn same_domain(
    labels: &BTreeMap<&str, &BTreeMap<String, String>>,
    a: &str,
    b: &str,
    key: &str,
) -> bool {
    if a == b {
        return true;
    }
    let v = |n: &str| labels.get(n).and_then(|l| l.get(key));
    matches!((v(a), v(b)), (Some(x), Some(y)) if x == y)
}

/// The pod of `others` that `pod`'s anti-affinity repels, if any.
fn violation<'a>(
    pod: &PodView,
    others: &'a [Arc<PodView>],
    labels: &BTreeMap<&str, &BTreeMap<String, String>>,
) -> Option<(&'a PodView, String)> {
    let here = pod.node_name.as_deref()?;
    for t in pod.anti_affinity.iter() {
        let namespaces = term_namespaces(pod, t);
        for o in others
            .iter()
            .filter(|o| namespaces.contains(&o.namespace.as_str()))
        {
            let Some(there) = o.node_name.as_deref() else {
                continue;
            };
            if labels.contains_key(there)
                && term_selects(pod, t, o)
                && same_domain(labels, here, there, &t.topology_key)
            {
                return Some((o, t.topology_key.clone()));
            }
        }
    }
    None
}

pub(super) fn run(a: &RemovePodsViolatingInterPodAntiAffinityArgs, env: &Env, act: &mut dyn Act) {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    let labels: BTreeMap<&str, &BTreeMap<String, String>> = env
        .inputs
        .iter()
        .filter_map(|i| {
            let l = i.node.metadata.labels.as_ref().unwrap_or(&NONE);
            Some((i.node.metadata.name.as_deref()?, l))
        })
        .collect();
    let mut all: Vec<Arc<PodView>> = env
        .inputs
        .iter()
        .flat_map(|i| i.pods.iter())
        .filter(|p| a.selects(p))
        .cloned()
        .collect();
    for i in env.inputs {
        let mut pods: Vec<Arc<PodView>> = i.pods.iter().filter(|p| a.selects(p)).cloned().collect();
        priority_low_to_high(&mut pods);
        for p in pods {
            let Some((other, key)) = violation(&p, &all, &labels) else {
                continue;
            };
            let why = format!(
                "pod's required anti-affinity selects {} in its {key} domain",
                other.key()
            );
            if act.filter(&p, true) && act.pre_evict(&p, true) && act.evict(&p, &why) {
                all.retain(|o| !Arc::ptr_eq(o, &p));
            }
        }
    }
}

#[cfg(test)]
#[path = "antiaffinity_tests.rs"]
mod tests;
