//! Gangs (Koordinator's Coscheduling cache): every gang's spec — from its PodGroup, or
//! from the first pod's `gang.scheduling.koordinator.sh/*` annotations — its children,
//! which are bound, which wait at Permit, and whether it was once satisfied. Tracked only
//! when a profile enables Coscheduling.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use super::types::PodInfo;

use k8s_openapi::api::core::v1::Pod;

use crate::api::quota::PodGroup;
use crate::api::scheduling::network_topology::GatherSpec;

pub use crate::api::scheduling::gang::{ANN_PREFIX, LABEL_POD_GROUP, gang_of};
use crate::api::scheduling::gang::{ann, label};
const LABEL_POD_GROUP_MIN: &str = "pod-group.scheduling.sigs.k8s.io/min-available";

/// Why a gang member cannot be scheduled yet (Coscheduling's basic check), in
/// Koordinator's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GangError {
    #[error("can't find gang, gangName: {gang}, podName: {pod}")]
    NotFound { gang: String, pod: String },
    #[error("gang has not init, gangName: {gang}, podName: {pod}")]
    NotInit { gang: String, pod: String },
    #[error("gangGroup [{group}] basic check: {failed}, current gang: {gang}, podName: {pod}")]
    BasicCheck {
        group: String,
        failed: String,
        gang: String,
        pod: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct GangSettings {
    pub default_timeout: Duration,
    pub default_match_policy: String,
    /// `awareNetworkTopology`: a gang group with a network-topology spec is placed whole.
    pub aware_network_topology: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Strict,
    NonStrict,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GangSpec {
    pub min: usize,
    pub total: usize,
    pub mode: Mode,
    pub wait: Duration,
    /// Gang ids scheduled together (always including this gang's own).
    pub groups: Vec<String>,
    pub match_policy: String,
    /// `gang.scheduling.koordinator.sh/network-topology-spec` (a malformed one: none).
    pub network_topology: Option<GatherSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Child {
    pub bound: bool,
    pub running: bool,
    pub succeeded: bool,
    pub failed: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Gang {
    /// None until the PodGroup (or a pod with annotations) is seen.
    pub spec: Option<GangSpec>,
    pub from_pod_group: bool,
    pub children: BTreeMap<String, Child>,
    pub once_satisfied: bool,
}

#[derive(Default)]
pub struct GangState {
    pub settings: Option<GangSettings>,
    pub gangs: BTreeMap<String, Gang>,
    pod_gang: HashMap<String, String>,
    /// Pods assumed and waiting at Permit.
    pub waiting: BTreeSet<String>,
    pub version: u64,
    /// Members not bound, as the scheduler sees them (a job's preemption places them all).
    unbound: HashMap<String, Arc<PodInfo>>,
    /// Gang group id → the pod whose job preemption succeeded and its message, until a
    /// member is placed or that pod tries again (Koordinator's gang scheduling context).
    preempted: HashMap<String, (String, String)>,
    /// Gang group id → its network-topology placement (or why there is none) for this
    /// round: until the group passes Permit, a member fails, or the pod that planned it
    /// tries again.
    plans: HashMap<String, JobPlan>,
}

/// A gang group's placement in its network topology, made by `trigger`'s cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPlan {
    pub trigger: String,
    /// Pod key → planned node, and the domain; or Koordinator's message why none.
    pub result: Result<(BTreeMap<String, String>, String), String>,
}

fn parse_spec(
    get: &dyn Fn(&str) -> Option<String>,
    id: &str,
    min: usize,
    timeout: Option<Duration>,
    s: &GangSettings,
) -> GangSpec {
    let total = get("total-number")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|t| *t >= min)
        .unwrap_or(min);
    let mode = match get("mode").as_deref() {
        Some("NonStrict") => Mode::NonStrict,
        _ => Mode::Strict,
    };
    let wait = get("waiting-time")
        .and_then(|v| crate::api::duration::parse(&v).ok())
        .filter(|d| !d.is_zero())
        .or(timeout)
        .unwrap_or(s.default_timeout);
    let mut groups: Vec<String> = get("groups")
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default();
    if !groups.iter().any(|g| g == id) {
        groups.push(id.to_string());
    }
    groups.sort();
    groups.dedup();
    let match_policy = get("match-policy")
        .filter(|p| ["once-satisfied", "only-waiting", "waiting-and-running"].contains(&p.as_str()))
        .unwrap_or_else(|| s.default_match_policy.clone());
    let network_topology = get("network-topology-spec")
        .filter(|v| !v.is_empty())
        .and_then(|v| match serde_json::from_str(&v) {
            Ok(spec) => Some(spec),
            Err(e) => {
                tracing::warn!(gang = id, error = %e, "the gang's network-topology-spec does not parse; ignored");
                None
            }
        });
    GangSpec {
        min,
        total,
        mode,
        wait,
        groups,
        match_policy,
        network_topology,
    }
}

impl GangState {
    pub fn enabled(&self) -> bool {
        self.settings.is_some()
    }

    fn changed(&mut self) {
        self.version += 1;
    }

    /// A PodGroup: its gang's spec (annotations on the PodGroup as on pods).
    pub fn upsert_pod_group(&mut self, pg: &PodGroup) {
        let Some(s) = self.settings.clone() else {
            return;
        };
        let ns = pg.metadata.namespace.as_deref().unwrap_or("");
        let id = format!("{ns}/{}", pg.metadata.name.as_deref().unwrap_or(""));
        let annotations = pg.metadata.annotations.clone().unwrap_or_default();
        let get = |k: &str| {
            annotations
                .get(&format!("{ANN_PREFIX}{k}"))
                .or_else(|| {
                    (k == "match-policy")
                        .then(|| annotations.get("pod-group.scheduling.sigs.k8s.io/match-policy"))
                        .flatten()
                })
                .cloned()
        };
        let min = pg.spec.min_member.unwrap_or(0).max(0) as usize;
        let timeout = pg
            .spec
            .schedule_timeout_seconds
            .filter(|t| *t > 0)
            .map(|t| Duration::from_secs(t as u64));
        let spec = parse_spec(&get, &id, min, timeout, &s);
        let g = self.gangs.entry(id).or_default();
        g.spec = Some(spec);
        g.from_pod_group = true;
        self.changed();
    }

    pub fn remove_pod_group(&mut self, id: &str) {
        if let Some(g) = self.gangs.get_mut(id).filter(|g| g.from_pod_group) {
            g.spec = None;
            g.from_pod_group = false;
            self.changed();
        }
    }

    /// A live pod: a child of its gang (an annotation gang starts from its first pod).
    pub fn track(&mut self, pod: &Pod, key: &str, child: Child) {
        let Some(s) = self.settings.clone() else {
            return;
        };
        let Some(id) = gang_of(pod) else {
            return;
        };
        let by_label = label(pod, LABEL_POD_GROUP).is_some();
        let g = self.gangs.entry(id.clone()).or_default();
        if g.spec.is_none() && !by_label {
            let min = ann(pod, &format!("{ANN_PREFIX}min-available"))
                .or_else(|| label(pod, LABEL_POD_GROUP_MIN))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            let get = |k: &str| {
                ann(pod, &format!("{ANN_PREFIX}{k}"))
                    .or_else(|| {
                        (k == "match-policy")
                            .then(|| ann(pod, "pod-group.scheduling.sigs.k8s.io/match-policy"))
                            .flatten()
                    })
                    .map(str::to_string)
            };
            g.spec = Some(parse_spec(&get, &id, min, None, &s));
        }
        if child.bound {
            // A member bound (also one found bound after a restart) satisfies the gang.
            g.once_satisfied = true;
        }
        if g.children.get(key) != Some(&child) {
            g.children.insert(key.to_string(), child);
            self.pod_gang.insert(key.to_string(), id);
            self.changed();
        }
    }

    /// Keeps a tracked member's pod while it is not bound.
    pub fn keep_unbound(&mut self, info: &Arc<PodInfo>) {
        if !self.pod_gang.contains_key(&info.key) || info.node_name.is_some() {
            self.unbound.remove(&info.key);
        } else {
            self.unbound.insert(info.key.clone(), info.clone());
        }
    }

    /// The members of `id`'s gang group not bound, waiting at Permit or in `assumed`, by key.
    pub fn pending_members(
        &self,
        id: &str,
        assumed: &HashMap<String, String>,
    ) -> Vec<Arc<PodInfo>> {
        let mut out: Vec<Arc<PodInfo>> = self
            .group(id)
            .iter()
            .filter_map(|m| self.gangs.get(m))
            .flat_map(|g| g.children.keys())
            .filter(|k| !self.waiting.contains(*k) && !assumed.contains_key(*k))
            .filter_map(|k| self.unbound.get(k).cloned())
            .filter(|p| p.pod.metadata.deletion_timestamp.is_none())
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// The members of `id`'s gang group waiting at Permit.
    pub fn waiting_members(&self, id: &str) -> Vec<String> {
        self.group(id)
            .iter()
            .filter_map(|m| self.gangs.get(m))
            .flat_map(|g| g.children.keys())
            .filter(|k| self.waiting.contains(*k))
            .cloned()
            .collect()
    }

    /// Who already preempted for `group` in this round, and with what message.
    pub fn preempted_by(&self, group: &str) -> Option<&(String, String)> {
        self.preempted.get(group)
    }

    pub fn set_preempted(&mut self, group: &str, trigger: &str, message: &str) {
        let v = (trigger.to_string(), message.to_string());
        self.preempted.insert(group.to_string(), v);
    }

    /// `key` tries again: what it preempted or planned for its group is over.
    pub fn attempt(&mut self, key: &str) {
        if !self.preempted.is_empty() {
            self.preempted.retain(|_, (t, _)| t != key);
        }
        if !self.plans.is_empty() {
            self.plans.retain(|_, p| p.trigger != key);
        }
    }

    /// The network-topology placement of `key`'s gang group in this round.
    pub fn plan_of(&self, key: &str) -> Option<&JobPlan> {
        let id = self.gang_id(key)?;
        self.plans.get(&self.group_id(id))
    }

    pub fn set_plan(&mut self, group: &str, plan: JobPlan) {
        self.plans.insert(group.to_string(), plan);
    }

    fn end_plan(&mut self, key: &str) {
        if let Some(id) = self.gang_id(key) {
            let group = self.group_id(id);
            self.plans.remove(&group);
        }
    }

    /// A member of `key`'s group is placed: the group's round is over.
    pub fn placed(&mut self, key: &str) {
        if let Some(id) = self.gang_id(key) {
            let group = self.group_id(id);
            self.preempted.remove(&group);
        }
    }

    pub fn untrack(&mut self, key: &str) {
        self.unbound.remove(key);
        self.preempted.retain(|_, (t, _)| t != key);
        self.plans.retain(|_, p| p.trigger != key);
        self.waiting.remove(key);
        if let Some(id) = self.pod_gang.remove(key) {
            if let Some(g) = self.gangs.get_mut(&id) {
                g.children.remove(key);
                if g.children.is_empty() && !g.from_pod_group {
                    self.gangs.remove(&id);
                }
            }
            self.changed();
        }
    }

    pub fn gang_id(&self, key: &str) -> Option<&str> {
        self.pod_gang.get(key).map(String::as_str)
    }

    pub fn spec(&self, id: &str) -> Option<&GangSpec> {
        self.gangs.get(id)?.spec.as_ref()
    }

    /// The gang group's id as Koordinator writes it: member gang ids joined by ",".
    pub fn group_id(&self, id: &str) -> String {
        self.spec(id)
            .map(|s| s.groups.join(","))
            .unwrap_or_else(|| id.to_string())
    }

    fn group(&self, id: &str) -> Vec<String> {
        self.spec(id)
            .map(|s| s.groups.clone())
            .unwrap_or_else(|| vec![id.to_string()])
    }

    /// PreEnqueue / PreFilter: the gang exists, is initialised, and every gang of its
    /// group has at least min children (Koordinator's basic check).
    pub fn check(&self, key: &str, pod: &Pod) -> Result<(), GangError> {
        let Some(id) = self
            .gang_id(key)
            .map(str::to_string)
            .or_else(|| gang_of(pod))
        else {
            return Ok(());
        };
        let pod_id = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let Some(g) = self.gangs.get(&id) else {
            return Err(GangError::NotFound {
                gang: id,
                pod: pod_id,
            });
        };
        let Some(spec) = &g.spec else {
            return Err(GangError::NotInit {
                gang: id,
                pod: pod_id,
            });
        };
        if spec.match_policy == "once-satisfied" && g.once_satisfied {
            return Ok(());
        }
        let (mut missing, mut uninit, mut short) = (Vec::new(), Vec::new(), false);
        for m in &spec.groups {
            match self.gangs.get(m) {
                None => missing.push(m.clone()),
                Some(x) => match &x.spec {
                    None => uninit.push(m.clone()),
                    Some(s) if x.children.len() < s.min => short = true,
                    Some(_) => {}
                },
            }
        }
        let mut failed = Vec::new();
        if !missing.is_empty() {
            failed.push(format!(
                "memberGangs [{}] doesn't exists",
                missing.join(" ")
            ));
        }
        if !uninit.is_empty() {
            failed.push(format!("memberGangs [{}] has not init", uninit.join(" ")));
        }
        if short {
            failed.push(format!(
                "memberGangs [{}] child pod not collect enough",
                spec.groups.join(" ")
            ));
        }
        if failed.is_empty() {
            return Ok(());
        }
        Err(GangError::BasicCheck {
            group: spec.groups.join(" "),
            failed: failed.join(", "),
            gang: id,
            pod: pod_id,
        })
    }

    /// Permit: whether every gang of the pod's group has enough members waiting (counting
    /// this pod), by its match policy.
    pub fn ready(&self, key: &str) -> bool {
        let Some(id) = self.gang_id(key) else {
            return true;
        };
        self.group(id).iter().all(|m| {
            let Some(g) = self.gangs.get(m) else {
                return false;
            };
            let Some(s) = &g.spec else { return false };
            let waiting = g
                .children
                .keys()
                .filter(|k| *k == key || self.waiting.contains(*k))
                .count();
            let bound = g.children.values().filter(|c| c.bound).count();
            match s.match_policy.as_str() {
                "only-waiting" => waiting >= s.min,
                "waiting-and-running" => waiting + bound >= s.min,
                _ => g.once_satisfied || waiting >= s.min,
            }
        })
    }

    /// The wait at Permit for a member of gang `id`.
    pub fn wait_time(&self, id: &str) -> Duration {
        self.spec(id).map(|s| s.wait).unwrap_or_else(|| {
            self.settings
                .as_ref()
                .map(|s| s.default_timeout)
                .unwrap_or(Duration::from_secs(600))
        })
    }

    pub fn wait(&mut self, key: &str) {
        self.waiting.insert(key.to_string());
    }

    /// The group passed Permit: its waiting members go on; every gang is satisfied.
    pub fn release(&mut self, key: &str) -> Vec<String> {
        let Some(id) = self.gang_id(key).map(str::to_string) else {
            return Vec::new();
        };
        self.end_plan(key);
        let mut out = Vec::new();
        for m in self.group(&id) {
            if let Some(g) = self.gangs.get_mut(&m) {
                g.once_satisfied = true;
                for k in g.children.keys() {
                    if self.waiting.remove(k) {
                        out.push(k.clone());
                    }
                }
            }
        }
        self.changed();
        out
    }

    /// A member failed (Filter, Permit timeout, binding): in Strict mode, unless already
    /// satisfied, every waiting member of the group is rejected too.
    pub fn member_failed(&mut self, key: &str) -> Vec<String> {
        self.waiting.remove(key);
        // The plan is no longer good for the group: the next round makes another.
        if self
            .plans
            .get(
                &self
                    .gang_id(key)
                    .map(|id| self.group_id(id))
                    .unwrap_or_default(),
            )
            .is_some_and(|p| p.result.is_ok())
        {
            self.end_plan(key);
        }
        let Some(id) = self.gang_id(key).map(str::to_string) else {
            return Vec::new();
        };
        let Some(g) = self.gangs.get(&id) else {
            return Vec::new();
        };
        let strict = g.spec.as_ref().is_some_and(|s| s.mode == Mode::Strict);
        if !strict || g.once_satisfied {
            return Vec::new();
        }
        let mut out = Vec::new();
        for m in self.group(&id) {
            if let Some(g) = self.gangs.get(&m) {
                for k in g.children.keys() {
                    if self.waiting.remove(k) {
                        out.push(k.clone());
                    }
                }
            }
        }
        out
    }
}

/// The plugin a gang's verdicts are reported under.
pub const PLUGIN: &str = "Coscheduling";

/// Koordinator's message for members released because another failed.
pub fn rejected_message(group: &str, trigger: &str, reason: &str, waiting: usize) -> String {
    format!(
        "GangGroup {group:?} gets rejected due to member Pod {trigger:?} is unschedulable with reason {reason:?}, alreadyWaitForBound: {waiting}"
    )
}

/// Members still waiting at Permit when a pass ends (explain): the gang never completed.
pub fn incomplete_message(id: &str, min: usize) -> String {
    format!("Gang {id:?} cannot be completed: fewer than {min} members could be placed")
}

#[cfg(test)]
#[path = "gangs_tests.rs"]
mod tests;
