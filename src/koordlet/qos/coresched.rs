//! CoreSched (`pkg/koordlet/runtimehooks/hooks/coresched`): with NodeSLO
//! `policies.cpuPolicy: coreSched`, the processes of each core-sched group share one
//! core-scheduling cookie, so an SMT sibling never runs two groups at once, and the kube QoS
//! cgroups get `cpu.idle` from each class's `cpuQOS.schedIdle`.
//!
//! A pod's group is its `koordinator.sh/core-sched-group-id` label ("" when absent), the
//! pod UID under `koordinator.sh/core-sched-policy: exclusive`, no group at all under
//! `none`; classes with `coreExpeller` get a separate `-expeller` group. Like Koordinator
//! this is a reconciler (the hook protocol cannot carry a cookie): every 5 s each enabled
//! process joins its group's cookie, each disabled one goes back to the default cookie.
//!
//! koord keeps no cookie cache: the cookies are read back from the kernel every round, and
//! a group's cookie is the first non-default one found among its pods in creation order
//! that no earlier group holds — the same outcome as Koordinator's cache, rebuilt after a
//! restart for free.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;

use super::context::{QosCtx, record};
use super::executor::{ExecError, Executor, Outcome};
use super::runner::{Round, Strategy};
use crate::api::extension::qos::{KubeQoS, QoSClass, kube_qos, pod_qos_class};
use crate::api::slo::nodeslo::{CPUQOSCfg, ResourceQOS, ResourceQOSStrategy};
use crate::koordlet::informer::{PodMeta, States};
use crate::koordlet::metrics::Pairs;
use crate::os::CgroupDir;
use crate::os::coresched::CookieOps;

use super::runner::Entry;
pub use crate::api::extension::keys::{LABEL_CORE_SCHED_GROUP_ID, LABEL_CORE_SCHED_POLICY};
use crate::koordlet::features;
pub const EXPELLER_GROUP_SUFFIX: &str = "-expeller";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Param {
    pub enabled: bool,
    pub expeller: bool,
    pub cpu_idle: bool,
}

/// What the NodeSLO asks of core scheduling, per QoS class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub lsr: Param,
    pub ls: Param,
    pub be: Param,
}

fn param(cfg: Option<&CPUQOSCfg>, core_sched: bool, expeller_default: bool) -> Param {
    let Some(c) = cfg.filter(|_| core_sched) else {
        return Param::default();
    };
    Param {
        enabled: c.enable == Some(true),
        expeller: c.cpu_qos.core_expeller.unwrap_or(expeller_default),
        cpu_idle: c.cpu_qos.sched_idle == Some(1),
    }
}

fn cpu_cfg(c: &Option<ResourceQOS>) -> Option<&CPUQOSCfg> {
    c.as_ref().and_then(|r| r.cpu_qos.as_ref())
}

impl Rule {
    pub fn new(q: &ResourceQOSStrategy) -> Rule {
        let core_sched =
            q.policies.as_ref().and_then(|p| p.cpu_policy.as_deref()) == Some("coreSched");
        let cpu = cpu_cfg;
        Rule {
            lsr: param(cpu(&q.lsr_class), core_sched, true),
            ls: param(cpu(&q.ls_class), core_sched, true),
            be: param(cpu(&q.be_class), core_sched, false),
        }
    }

    pub fn enabled(&self) -> bool {
        self.lsr.enabled || self.ls.enabled || self.be.enabled
    }

    fn for_kube(&self, k: KubeQoS) -> Param {
        match k {
            KubeQoS::Guaranteed if self.lsr.enabled => self.lsr,
            KubeQoS::Guaranteed | KubeQoS::Burstable => self.ls,
            KubeQoS::BestEffort => self.be,
        }
    }

    /// `cpu.idle` for a kube QoS cgroup.
    pub fn cpu_idle(&self, k: KubeQoS) -> bool {
        self.for_kube(k).cpu_idle
    }

    /// The pod's group, or `None` when its processes keep the default cookie.
    pub fn group(&self, pod: &Pod) -> Option<String> {
        let p = match pod_qos_class(pod) {
            QoSClass::Lse | QoSClass::Lsr => self.lsr,
            QoSClass::Ls => self.ls,
            QoSClass::Be => self.be,
            QoSClass::None => self.for_kube(kube_qos(pod)),
            QoSClass::System => return None,
        };
        let label = |k: &str| pod.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned();
        let mut group = match label(LABEL_CORE_SCHED_POLICY).as_deref() {
            Some("none") => return None,
            Some("exclusive") => pod.metadata.uid.clone().unwrap_or_default(),
            _ => label(LABEL_CORE_SCHED_GROUP_ID).unwrap_or_default(),
        };
        if !p.enabled {
            return None;
        }
        if p.expeller {
            group.push_str(EXPELLER_GROUP_SUFFIX);
        }
        Some(group)
    }
}

/// (container series with their value, (group, all processes share one cookie)).
pub type CookieReport = (Vec<(Pairs, f64)>, Vec<(String, bool)>);

/// (pid, cookie) of a pod's processes.
type Cookies = Vec<(u32, u64)>;
/// (pod name, what changed).
pub type Changes = Vec<(String, String)>;

/// One round of cookie assignment over the pods (oldest first) and their processes.
/// Returns what changed, as (pod name, message) lines for the log.
pub fn assign(ops: &dyn CookieOps, rule: &Rule, pods: &[(&Pod, Vec<u32>)]) -> Changes {
    let mut out = Vec::new();
    let mut chosen: HashMap<String, (u64, u32)> = HashMap::new();
    let mut taken: HashSet<u64> = HashSet::new();
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    let mut plan: Vec<(&Pod, Option<String>, Cookies)> = Vec::new();
    for (pod, pids) in pods {
        // SYSTEM pods keep whatever cookie they have (the koordlet among them).
        if pod_qos_class(pod) == QoSClass::System {
            continue;
        }
        let cookies: Vec<(u32, u64)> = pids
            .iter()
            .filter_map(|p| Some((*p, ops.get(*p).ok()?)))
            .collect();
        let group = rule.group(pod);
        if let Some(g) = &group
            && !chosen.contains_key(g)
            && let Some((pid, c)) = cookies.iter().find(|(_, c)| *c != 0 && !taken.contains(c))
        {
            chosen.insert(g.clone(), (*c, *pid));
            taken.insert(*c);
        }
        plan.push((*pod, group, cookies));
    }
    for (pod, group, cookies) in plan {
        let Some(g) = group else {
            let stale: Vec<u32> = cookies
                .iter()
                .filter(|(_, c)| *c != 0)
                .map(|(p, _)| *p)
                .collect();
            if !stale.is_empty() {
                report(
                    &mut out,
                    &name(pod),
                    "cleared",
                    &stale,
                    ops.share(None, &stale),
                );
            }
            continue;
        };
        let want = chosen.get(&g).copied();
        let mut todo: Vec<u32> = cookies
            .iter()
            .filter(|(_, c)| want.is_none_or(|(w, _)| *c != w))
            .map(|(p, _)| *p)
            .collect();
        let from = match want {
            Some((_, pid)) => pid,
            None if todo.is_empty() => continue,
            None => {
                let first = todo.remove(0);
                if let Err(e) = ops.create(first) {
                    out.push((
                        name(pod),
                        format!("group {g:?}: no cookie made for pid {first}: {e}"),
                    ));
                    continue;
                }
                if let Ok(c) = ops.get(first) {
                    chosen.insert(g.clone(), (c, first));
                    taken.insert(c);
                }
                out.push((
                    name(pod),
                    format!("group {g:?}: new cookie from pid {first}"),
                ));
                first
            }
        };
        if !todo.is_empty() {
            report(
                &mut out,
                &name(pod),
                &format!("joined group {g:?}"),
                &todo,
                ops.share(Some(from), &todo),
            );
        }
    }
    out
}

fn report(
    out: &mut Vec<(String, String)>,
    pod: &str,
    what: &str,
    pids: &[u32],
    failed: Vec<(u32, std::io::Error)>,
) {
    out.push((
        pod.to_string(),
        format!("{} pid(s) {what}, {} failed", pids.len(), failed.len()),
    ));
    for (pid, e) in failed {
        out.push((pod.to_string(), format!("pid {pid}: {e}")));
    }
}

/// The CoreSched reconciler: cookies where the kernel has core scheduling, `cpu.idle` where
/// the cgroups have it.
pub struct CoreSched {
    ex: Arc<Executor>,
    proc_root: std::path::PathBuf,
    ops: Arc<dyn CookieOps>,
    unsupported: Option<String>,
    probed: bool,
}

impl CoreSched {
    pub fn new(
        ex: Arc<Executor>,
        proc_root: std::path::PathBuf,
        ops: Arc<dyn CookieOps>,
    ) -> CoreSched {
        CoreSched {
            ex,
            proc_root,
            ops,
            unsupported: None,
            probed: false,
        }
    }

    /// Why cookies are not made on this node, once a round has found out.
    pub fn unsupported(&self) -> Option<&str> {
        self.unsupported.as_deref()
    }

    /// `cpu.idle` on the kube QoS cgroups (`kubeqos`: besteffort also under cpusuppress's
    /// `cpuIdle` policy; a level leaving idle gets the kubelet's weight back).
    fn cpu_idle(&self, states: &States, rule: &Rule) -> Vec<Result<Outcome, ExecError>> {
        [KubeQoS::Guaranteed, KubeQoS::Burstable, KubeQoS::BestEffort]
            .into_iter()
            .flat_map(|k| {
                let idle = super::kubeqos::wants_idle(states, k, rule.cpu_idle(k));
                super::kubeqos::set_idle(&self.ex, states, k, idle)
            })
            .collect()
    }

    /// One round: `cpu.idle` on the kube QoS cgroups, then the cookies. Returns the
    /// cgroup writes' outcomes and the cookie changes as (pod, message).
    pub fn round(&mut self, states: &States) -> (Vec<Result<Outcome, ExecError>>, Changes) {
        let rule = Rule::new(&states.slo().resource_qos);
        let idle = self.cpu_idle(states, &rule);
        if rule.enabled() && !self.probed {
            self.probed = true;
            self.unsupported = crate::os::coresched::enable(&self.proc_root).err();
            if let Some(why) = &self.unsupported {
                tracing::warn!(reason = %why, "CoreSched: no core-scheduling cookies on this node (cpu.idle still applies)");
            }
        }
        if !self.probed || self.unsupported.is_some() {
            return (idle, Vec::new());
        }
        let mut pods: Vec<&PodMeta> = states.pods.iter().collect();
        pods.sort_by_key(|p| p.pod.metadata.creation_timestamp.clone().map(|t| t.0));
        let with_pids: Vec<(&Pod, Vec<u32>)> =
            pods.iter().map(|p| (&*p.pod, self.pids(p))).collect();
        (idle, assign(self.ops.as_ref(), &rule, &with_pids))
    }

    /// After a round: each grouped container's cookie, as Koordinator's
    /// `koordlet_container_core_sched_cookie` labels, and per group whether every process
    /// of its pods holds one shared, non-default cookie (`core_sched_cookie_manage_status`).
    pub fn cookie_report(&self, states: &States, node: &str) -> CookieReport {
        let rule = Rule::new(&states.slo().resource_qos);
        if !rule.enabled() || !self.probed || self.unsupported.is_some() {
            return (Vec::new(), Vec::new());
        }
        let cg = self.ex.cgroups();
        let mut series = Vec::new();
        let mut groups: HashMap<String, HashSet<u64>> = HashMap::new();
        for pod in states.pods.iter() {
            let Some(group) = rule.group(&pod.pod) else {
                continue;
            };
            let held = groups.entry(group.clone()).or_default();
            for pid in self.pids(pod) {
                held.insert(self.ops.get(pid).unwrap_or(0));
            }
            for c in &pod.containers {
                let first = cg.procs(&c.dir).unwrap_or_default().into_iter().next();
                let cookie = first
                    .and_then(|p| u32::try_from(p).ok())
                    .and_then(|p| self.ops.get(p).ok())
                    .filter(|c| *c != 0);
                let Some(cookie) = cookie else {
                    continue;
                };
                let labels: Pairs = vec![
                    ("node", node.to_string()),
                    ("pod_name", pod.name.clone()),
                    ("pod_namespace", pod.namespace.clone()),
                    ("pod_uid", pod.uid.clone()),
                    ("container_name", c.name.clone()),
                    ("container_id", PodMeta::container_id(c).to_string()),
                    ("core_sched_group", group.clone()),
                    ("core_sched_cookie", cookie.to_string()),
                ];
                series.push((labels, 1.0));
            }
        }
        let mut status: Vec<(String, bool)> = groups
            .into_iter()
            .filter(|(_, held)| !held.is_empty())
            .map(|(g, held)| {
                let ok = held.len() == 1 && !held.contains(&0);
                (g, ok)
            })
            .collect();
        status.sort();
        (series, status)
    }

    fn pids(&self, pod: &PodMeta) -> Vec<u32> {
        let cg = self.ex.cgroups();
        let mut dirs = vec![pod.dir.clone()];
        dirs.extend(cg.children(&pod.dir).iter().map(|c| pod.dir.join(c)));
        let mut pids: Vec<u32> = dirs
            .iter()
            .flat_map(|d: &CgroupDir| cg.procs(d).unwrap_or_default())
            .filter_map(|p| u32::try_from(p).ok())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }
}

impl Strategy for CoreSched {
    fn name(&self) -> &'static str {
        "coresched"
    }

    fn interval(&self) -> Duration {
        Duration::from_secs(5)
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        let (idle, cookies) = self.round(states);
        record(ctx, "coresched", "kubepods", idle);
        for (pod, msg) in cookies {
            tracing::info!(pod = %pod, "CoreSched: {msg}");
        }
        let node = states.node.as_ref().and_then(|n| n.metadata.name.clone());
        let node = node.unwrap_or_default();
        let (series, groups) = self.cookie_report(states, &node);
        ctx.metrics.ops.set_core_sched_cookies(series);
        for (group, ok) in groups {
            ctx.metrics.ops.core_sched_managed(&node, &group, ok);
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// CoreSched.
pub const ENTRY: Entry = Entry {
    gate: features::CORE_SCHED,
    build: |d| {
        Box::new(CoreSched::new(
            d.executor.clone(),
            d.host.proc_root.clone(),
            Arc::new(crate::os::coresched::Prctl),
        ))
    },
};

#[cfg(test)]
#[path = "coresched_tests.rs"]
mod tests;
