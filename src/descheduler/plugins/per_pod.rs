//! The per-pod Deschedule plugins: each looks at one pod (and its node) at a time and names
//! it with a reason. RemoveFailedPods, PodLifeTime, RemovePodsHavingTooManyRestarts (the
//! most restarted first), RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector, Taint};

use super::{
    Env, Kind, PodLifeTimeArgs, RemoveFailedPodsArgs, RemovePodsHavingTooManyRestartsArgs,
    RemovePodsViolatingNodeAffinityArgs, RemovePodsViolatingNodeTaintsArgs, Scope,
};
use crate::api::field::FieldError;
use crate::api::placement::{term_matches, tolerates};
use crate::descheduler::framework::plugin::NodeInput;
use crate::descheduler::framework::podview::{ContainerState, PodView};

/// (pod, node, reason) for every pod the plugin would evict, node by node.
pub(super) fn candidates(plugin: &Kind, env: &Env) -> Vec<(Arc<PodView>, String, String)> {
    let mut out = Vec::new();
    for i in env.inputs {
        let node = i.node.metadata.name.clone().unwrap_or_default();
        let mut here: Vec<(Arc<PodView>, String, String)> = Vec::new();
        for p in &i.pods {
            let why = match plugin {
                Kind::RemoveFailedPods(a) if a.selects(p) => failed(a, p, env.now_ms),
                Kind::PodLifeTime(a) if a.selects(p) => too_old(a, p, env.now_ms),
                Kind::RemovePodsHavingTooManyRestarts(a) if a.selects(p) => restarts(a, p),
                Kind::RemovePodsViolatingNodeTaints(a) if a.selects(p) => taints(a, p, &i.node),
                Kind::RemovePodsViolatingNodeAffinity(a) if a.selects(p) => affinity(a, p, i, env),
                _ => None,
            };
            if let Some(why) = why {
                here.push((p.clone(), node.clone(), why));
            }
        }
        if let Kind::RemovePodsHavingTooManyRestarts(a) = plugin {
            here.sort_by_key(|(p, _, _)| std::cmp::Reverse(total_restarts(a, p)));
        }
        out.extend(here);
    }
    if let Kind::PodLifeTime(_) = plugin {
        // Oldest first, across the nodes (upstream's `SortPodsBasedOnAge`).
        out.sort_by_key(|(p, _, _)| p.created_ms);
    }
    out
}

fn age_s(p: &PodView, now_ms: i64) -> i64 {
    p.created_ms.map_or(0, |t| (now_ms - t) / 1000)
}

fn failed(a: &RemoveFailedPodsArgs, p: &PodView, now_ms: i64) -> Option<String> {
    if p.phase.as_deref() != Some("Failed") {
        return None;
    }
    if let Some(min) = a.min_pod_lifetime_seconds
        && age_s(p, now_ms) < min as i64
    {
        return None;
    }
    if p.owners
        .iter()
        .any(|o| a.exclude_owner_kinds.contains(&o.kind))
    {
        return None;
    }
    let init = a.including_init_containers.unwrap_or(false);
    let seen = p.containers.iter().filter(|c| init || !c.init);
    let mut reasons: Vec<String> = p.reason.iter().cloned().collect();
    for c in seen.clone() {
        reasons.extend(c.waiting.clone());
        reasons.extend(c.terminated.clone());
    }
    if !a.reasons.is_empty() && !reasons.iter().any(|r| a.reasons.contains(r)) {
        return None;
    }
    let codes: Vec<i32> = seen.filter_map(|c| c.exit_code).collect();
    if !a.exit_codes.is_empty() && !codes.iter().any(|c| a.exit_codes.contains(c)) {
        return None;
    }
    Some(format!("pod failed ({})", reasons.join(", ")))
}

/// States PodLifeTime accepts: pod phases, pod status reasons, container waiting and
/// terminated reasons (upstream's `podLifeTimeAllowedStates`).
const LIFETIME_STATES: &[&str] = &[
    "Running",
    "Pending",
    "Succeeded",
    "Failed",
    "Unknown",
    "NodeAffinity",
    "NodeLost",
    "Shutdown",
    "UnexpectedAdmissionError",
    "PodInitializing",
    "ContainerCreating",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "ErrImagePull",
    "CreateContainerError",
    "InvalidImageName",
    "OOMKilled",
    "Error",
    "Completed",
    "DeadlineExceeded",
    "Evicted",
    "ContainerCannotRun",
    "StartError",
];

pub(super) fn validate_pod_life_time(a: &PodLifeTimeArgs) -> Result<(), FieldError> {
    let bad =
        |what: &str, msg: String| Err(FieldError::new(format!("PodLifeTimeArgs.{what}"), msg));
    if a.owner_kinds
        .as_ref()
        .is_some_and(|o| !o.include.is_empty() && !o.exclude.is_empty())
    {
        return bad(
            "ownerKinds",
            "only one of Include/Exclude ownerKinds can be set".into(),
        );
    }
    if a.states
        .iter()
        .any(|s| !LIFETIME_STATES.contains(&s.as_str()))
    {
        let mut allowed = LIFETIME_STATES.to_vec();
        allowed.sort();
        return bad(
            "states",
            format!("states must be one of [{}]", allowed.join(" ")),
        );
    }
    for (i, c) in a.conditions.iter().enumerate() {
        if c.type_.is_none()
            && c.status.is_none()
            && c.reason.is_none()
            && c.min_time_since_last_transition_seconds.is_none()
        {
            return bad(
                &format!("conditions[{i}]"),
                "at least one of type, status, reason, or minTimeSinceLastTransitionSeconds must be set".into(),
            );
        }
    }
    if a.max_pod_life_time_seconds.is_none()
        && a.states.is_empty()
        && a.conditions.is_empty()
        && a.exit_codes.is_empty()
    {
        return bad(
            "maxPodLifeTimeSeconds",
            "at least one filtering criterion must be specified (maxPodLifeTimeSeconds, states, conditions, or exitCodes)".into(),
        );
    }
    Ok(())
}

/// The containers PodLifeTime looks at: regular, init (`includingInitContainers`) and
/// ephemeral (`includingEphemeralContainers`).
fn lifetime_containers<'a>(
    a: &PodLifeTimeArgs,
    p: &'a PodView,
    ephemeral: bool,
) -> impl Iterator<Item = &'a ContainerState> + Clone {
    let init = a.including_init_containers;
    let eph = ephemeral && a.including_ephemeral_containers;
    p.containers
        .iter()
        .filter(move |c| init || !c.init)
        .chain(p.ephemeral.iter().filter(move |_| eph))
}

fn too_old(a: &PodLifeTimeArgs, p: &PodView, now_ms: i64) -> Option<String> {
    let age = p.created_ms.map(|c| (now_ms - c) / 1000);
    if let Some(max) = a.max_pod_life_time_seconds
        && !age.is_some_and(|age| age >= 0 && age > max as i64)
    {
        return None;
    }
    if !a.states.is_empty() {
        let has = |s: &Option<String>| s.as_ref().is_some_and(|s| a.states.contains(s));
        let matched = has(&p.phase)
            || has(&p.reason)
            || lifetime_containers(a, p, true).any(|c| has(&c.waiting) || has(&c.terminated));
        if !matched {
            return None;
        }
    }
    if let Some(k) = &a.owner_kinds {
        let kinds = || p.owners.iter().map(|o| o.kind.as_str());
        if !k.include.is_empty() && !kinds().any(|o| k.include.iter().any(|i| i == o)) {
            return None;
        }
        if k.include.is_empty() && kinds().any(|o| k.exclude.iter().any(|e| e == o)) {
            return None;
        }
    }
    if !a.conditions.is_empty() && !a.conditions.iter().any(|f| condition_matches(f, p, now_ms)) {
        return None;
    }
    if !a.exit_codes.is_empty()
        && !lifetime_containers(a, p, false)
            .any(|c| c.exit_code.is_some_and(|e| a.exit_codes.contains(&e)))
    {
        return None;
    }
    Some(match (a.max_pod_life_time_seconds, age) {
        (Some(max), Some(age)) => format!("pod is {age}s old, over maxPodLifeTimeSeconds {max}"),
        _ => "pod matches PodLifeTime's filters".into(),
    })
}

fn condition_matches(f: &super::PodConditionFilter, p: &PodView, now_ms: i64) -> bool {
    p.conditions().any(|c| {
        let eq = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| Some(w) == have)
        };
        let reason = Some(c.reason).filter(|r| !r.is_empty());
        if !eq(&f.type_, Some(c.type_)) || !eq(&f.status, Some(c.status)) || !eq(&f.reason, reason)
        {
            return false;
        }
        match f.min_time_since_last_transition_seconds {
            None => true,
            Some(min) => c
                .transition_s
                .is_some_and(|t| now_ms / 1000 - t >= 0 && (now_ms / 1000 - t) as u64 >= min),
        }
    })
}

fn total_restarts(a: &RemovePodsHavingTooManyRestartsArgs, p: &PodView) -> i32 {
    let init = a.including_init_containers.unwrap_or(false);
    p.containers
        .iter()
        .filter(|c| init || !c.init)
        .map(|c| c.restarts)
        .sum()
}

fn restarts(a: &RemovePodsHavingTooManyRestartsArgs, p: &PodView) -> Option<String> {
    let n = total_restarts(a, p);
    let t = a.pod_restart_threshold?;
    if n < t {
        return None;
    }
    if !a.states.is_empty() {
        let init = a.including_init_containers.unwrap_or(false);
        let in_phase = p.phase.as_ref().is_some_and(|ph| a.states.contains(ph));
        let waiting = p
            .containers
            .iter()
            .filter(|c| init || !c.init)
            .filter_map(|c| c.waiting.as_ref())
            .any(|w| a.states.contains(w));
        if !in_phase && !waiting {
            return None;
        }
    }
    Some(format!("pod restarted {n} times, threshold {t}"))
}

/// `key` or `key=value` of a taint is listed (a value only when the taint has one).
fn listed(list: &[String], t: &Taint) -> bool {
    let value = t.value.as_deref().filter(|v| !v.is_empty());
    list.iter()
        .any(|e| *e == t.key || value.is_some_and(|v| *e == format!("{}={v}", t.key)))
}

fn taints(a: &RemovePodsViolatingNodeTaintsArgs, p: &PodView, node: &Node) -> Option<String> {
    let prefer = a.include_prefer_no_schedule.unwrap_or(false);
    node.spec
        .as_ref()?
        .taints
        .iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || (prefer && t.effect == "PreferNoSchedule"))
        .filter(|t| !listed(&a.excluded_taints, t))
        .filter(|t| a.included_taints.as_ref().is_none_or(|inc| listed(inc, t)))
        .find(|t| !tolerates(&p.tolerations, t))
        .map(|t| {
            format!(
                "pod does not tolerate taint {}={}:{} of its node",
                t.key,
                t.value.as_deref().unwrap_or(""),
                t.effect
            )
        })
}

/// Σ weights of the pod's preferred node-affinity terms a node matches.
fn preferred_weight(p: &PodView, n: &Node) -> i32 {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    let labels = n.metadata.labels.as_ref().unwrap_or(&NONE);
    let name = n.metadata.name.as_deref().unwrap_or("");
    p.preferred_affinity
        .iter()
        .filter(|t| term_matches(&t.preference, labels, name))
        .map(|t| t.weight)
        .sum()
}

/// Upstream's `PodFitsAnyNode` over the plugin's nodes (the pod's own included).
fn fits_any(p: &PodView, env: &Env) -> bool {
    env.inputs.iter().any(|i| {
        let name = i.node.metadata.name.as_deref().unwrap_or("");
        env.fit
            .slot(name)
            .is_some_and(|s| env.fit.check(p, s).is_ok())
    })
}

fn affinity(
    a: &RemovePodsViolatingNodeAffinityArgs,
    p: &PodView,
    i: &NodeInput,
    env: &Env,
) -> Option<String> {
    let labels = i.node.metadata.labels.clone().unwrap_or_default();
    let name = i.node.metadata.name.as_deref().unwrap_or("");
    for t in &a.node_affinity_type {
        match t.as_str() {
            "requiredDuringSchedulingIgnoredDuringExecution" => {
                let required: Option<&NodeSelector> = p.required_affinity.as_ref();
                if required.is_some() && !p.fits_node(&labels, name) && fits_any(p, env) {
                    return Some("pod's required node affinity no longer matches its node".into());
                }
            }
            "preferredDuringSchedulingIgnoredDuringExecution" => {
                if p.preferred_affinity.is_empty() || !fits_any(p, env) {
                    continue;
                }
                let here = preferred_weight(p, &i.node);
                let best = env
                    .inputs
                    .iter()
                    .map(|o| preferred_weight(p, &o.node))
                    .max()
                    .unwrap_or(0);
                if best > here {
                    return Some(format!(
                        "a node scores {best} by the pod's preferred node affinity, its own {here}"
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
#[path = "per_pod_tests/mod.rs"]
mod tests;
