//! Applies cpusuppress every second (`pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go`): reads the NodeSLO, the last
//! node/pod CPU usage from the metric store and the CPU topology, decides with
//! [`cpusuppress`](super::cpusuppress), writes through the [`Executor`].

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Pod;

use super::cpusuppress::{self, Cpu, Inputs};
use super::executor::{Change, Executor, Outcome, Update};
use crate::api::cpuset;
use crate::api::extension::keys::ANNOTATION_RESOURCE_STATUS;
use crate::api::extension::qos::{
    KubeQoS, QoSClass, kube_qos, pod_qos_class, pod_qos_class_with_default,
};
use crate::api::quantity::q_milli;
use crate::api::slo::nodeslo::ResourceThresholdStrategy;
use crate::koordlet::informer::States;
use crate::os::{CgroupDir, Resource};

/// Measured CPU usage in milli-cores (`None`: no recent sample).
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub node: Option<i64>,
    /// Pod uid → usage.
    pub pods: HashMap<String, i64>,
}

/// What the last pass left in place, so restoring is not repeated every second.
#[derive(Debug, Default)]
pub struct Memory {
    restored: bool,
}

/// The NodeSLO threshold strategy over Koordinator's defaults.
pub fn strategy(states: &States) -> &ResourceThresholdStrategy {
    &states.slo().threshold
}

/// The CPUs an LSE/LSR pod was given (`resource-status` annotation), empty when none.
pub(crate) fn pinned(pod: &Pod) -> Vec<u32> {
    let raw = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_RESOURCE_STATUS));
    let v: Option<serde_json::Value> = raw.and_then(|s| serde_json::from_str(s).ok());
    v.and_then(|v| v.get("cpuset").and_then(|c| c.as_str()).map(str::to_string))
        .and_then(|c| cpuset::parse(&c).ok())
        .unwrap_or_default()
}

fn is_be(pod: &Pod) -> bool {
    pod_qos_class(pod) == QoSClass::Be || kube_qos(pod) == KubeQoS::BestEffort
}

/// The inputs of the formula from the informer's state and measured usage.
pub fn inputs(states: &States, usage: &Usage, s: &ResourceThresholdStrategy) -> Option<Inputs> {
    let node = states.node.as_ref()?;
    let status = node.status.as_ref()?;
    let cpu = |l: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| { l.and_then(|m| m.get("cpu")).map(q_milli).unwrap_or(0) };
    let capacity = cpu(status.capacity.as_ref());
    let reserved = (capacity - cpu(status.allocatable.as_ref())).max(0);
    let node_used = usage.node?;
    let pods_used: i64 = usage.pods.values().sum();
    let non_be: i64 = states
        .pods
        .iter()
        .filter(|p| !is_be(&p.pod))
        .filter_map(|p| usage.pods.get(&p.uid))
        .sum();
    // Pods measured but unknown to the informer count as non-BE.
    let known: BTreeSet<&str> = states.pods.iter().map(|p| p.uid.as_str()).collect();
    let unknown: i64 = usage
        .pods
        .iter()
        .filter(|(uid, _)| !known.contains(uid.as_str()))
        .map(|(_, v)| v)
        .sum();
    Some(Inputs {
        capacity_milli: capacity,
        threshold_percent: s.cpu_suppress_threshold_percent.unwrap_or(65),
        min_percent: s.cpu_suppress_min_percent,
        non_be_pods_milli: non_be + unknown,
        non_be_host_milli: 0,
        system_used_milli: cpusuppress::system_used(node_used, pods_used, 0, reserved),
    })
}

fn be_dirs(states: &States, ex: &Executor) -> Vec<Vec<CgroupDir>> {
    let be_pods: Vec<_> = states
        .pods
        .iter()
        .filter(|p| kube_qos(&p.pod) == KubeQoS::BestEffort)
        .collect();
    vec![
        vec![ex.cgroups().qos_dir(KubeQoS::BestEffort)],
        be_pods.iter().map(|p| p.dir.clone()).collect(),
        be_pods
            .iter()
            .flat_map(|p| p.containers.iter().map(|c| c.dir.clone()))
            .collect(),
    ]
}

fn apply_cpuset(ex: &Executor, states: &States, cpus: &[u32], out: &mut Vec<Change>) {
    let value = cpuset::format(cpus);
    let levels: Vec<Vec<Update>> = be_dirs(states, ex)
        .into_iter()
        .map(|l| {
            l.into_iter()
                .map(|d| Update::new(Resource::CpusetCpus, d, value.clone()))
                .collect()
        })
        .collect();
    collect(ex.leveled(&levels), out);
}

fn collect(results: Vec<Result<Outcome, super::executor::ExecError>>, out: &mut Vec<Change>) {
    for r in results {
        match r {
            Ok(Outcome::Written(c)) => out.push(c),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cpusuppress write rejected"),
        }
    }
}

fn set_quota(ex: &Executor, quota: i64, out: &mut Vec<Change>) {
    let dir = ex.cgroups().qos_dir(KubeQoS::BestEffort);
    collect(
        vec![ex.update(&Update::new(Resource::CfsQuota, dir, quota.to_string()))],
        out,
    );
}

/// CPUs BE pods may never use: those pinned by LSE pods.
fn lse_pinned(states: &States) -> BTreeSet<u32> {
    states
        .pods
        .iter()
        .filter(|p| pod_qos_class_with_default(&p.pod) == QoSClass::Lse)
        .flat_map(|p| pinned(&p.pod))
        .collect()
}

/// One cpusuppress round; returns the changes written.
pub fn pass(
    states: &States,
    usage: &Usage,
    topo: &[Cpu],
    ex: &Executor,
    mem: &mut Memory,
) -> Vec<Change> {
    let s = strategy(states);
    let mut out = Vec::new();
    let excluded = lse_pinned(states);
    let all: Vec<u32> = topo
        .iter()
        .map(|c| c.id)
        .filter(|c| !excluded.contains(c))
        .collect();
    if s.enable != Some(true) {
        if !mem.restored {
            set_quota(ex, -1, &mut out);
            apply_cpuset(ex, states, &all, &mut out);
            mem.restored = true;
        }
        return out;
    }
    mem.restored = false;
    let Some(i) = inputs(states, usage, s) else {
        return out;
    };
    let suppress = cpusuppress::suppress_milli(&i);
    if s.cpu_suppress_policy.as_deref() == Some("cfsQuota") {
        let dir = ex.cgroups().qos_dir(KubeQoS::BestEffort);
        let current = ex
            .cgroups()
            .read_i64(Resource::CfsQuota, &dir)
            .unwrap_or(-1);
        if let Some(q) = cpusuppress::cfs_quota(suppress, current, i.capacity_milli) {
            set_quota(ex, q, &mut out);
        }
        apply_cpuset(ex, states, &all, &mut out);
        return out;
    }
    let qos = ex.cgroups().qos_dir(KubeQoS::BestEffort);
    let current = ex
        .cgroups()
        .read(Resource::CpusetCpus, &qos)
        .ok()
        .and_then(|c| cpuset::parse(c.trim()).ok())
        .unwrap_or_default();
    let n = cpusuppress::cpuset_count(suppress, current.len(), all.len());
    let lsr: BTreeSet<u32> = states
        .pods
        .iter()
        .filter(|p| pod_qos_class(&p.pod) == QoSClass::Lsr)
        .flat_map(|p| pinned(&p.pod))
        .collect();
    let cpus = cpusuppress::be_cpuset(topo, n, &excluded, &lsr);
    if !cpus.is_empty() {
        apply_cpuset(ex, states, &cpus, &mut out);
    }
    set_quota(ex, -1, &mut out);
    out
}

#[cfg(test)]
#[path = "suppress_tests.rs"]
mod tests;
