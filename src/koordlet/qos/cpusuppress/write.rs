//! cpusuppress's cgroup writes: the besteffort level, its pods and containers, top down
//! as `Executor::leveled` orders them.

use super::super::executor::{Change, ExecError, Executor, Outcome, Update};
use crate::api::cpuset;
use crate::api::extension::qos::{KubeQoS, kube_qos};
use crate::api::extension::resourcestatus::resource_status;
use crate::koordlet::informer::{PodMeta, States};
use crate::os::{CgroupDir, Resource};

/// The besteffort QoS dir, its pods and their containers (those of pods `containers_of`
/// accepts), top down.
pub(super) fn be_dirs_of(
    states: &States,
    ex: &Executor,
    containers_of: impl Fn(&PodMeta) -> bool,
) -> Vec<Vec<CgroupDir>> {
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
            .filter(|p| containers_of(p))
            .flat_map(|p| p.containers.iter().map(|c| c.dir.clone()))
            .collect(),
    ]
}

pub(super) fn be_dirs(states: &States, ex: &Executor) -> Vec<Vec<CgroupDir>> {
    be_dirs_of(states, ex, |_| true)
}

/// Koordinator's `recoverCPUSetForBECPUManager`: the BE pool on the QoS and pod levels and on
/// the containers of pods the scheduler bound to no cpuset or NUMA node (those are the
/// cpuset hook's).
pub(super) fn restore_for_be_cpu_manager(
    ex: &Executor,
    states: &States,
    pool: &[u32],
    out: &mut Vec<Change>,
) {
    let unbound = |p: &PodMeta| {
        resource_status(&p.pod).map_or(true, |s| {
            s.cpuset.is_empty() && s.numa_node_resources.as_ref().is_none_or(|n| n.is_empty())
        })
    };
    write_cpuset(ex, be_dirs_of(states, ex, unbound), pool, out);
}

pub(super) fn apply_cpuset(ex: &Executor, states: &States, cpus: &[u32], out: &mut Vec<Change>) {
    write_cpuset(ex, be_dirs(states, ex), cpus, out);
}

/// The suppressed set under the kubelet's static CPU manager (Koordinator's
/// `applyCPUSetWithStaticPolicy`): the QoS and pod levels keep the BE pool, so the kubelet's
/// own writes below them stay valid, and only the containers get the suppressed CPUs.
pub(super) fn apply_cpuset_static(
    ex: &Executor,
    states: &States,
    pool: &[u32],
    cpus: &[u32],
    out: &mut Vec<Change>,
) {
    let mut levels = be_dirs(states, ex);
    let containers = levels.pop().unwrap_or_default();
    write_cpuset(ex, levels, pool, out);
    write_cpuset(ex, vec![containers], cpus, out);
}

pub(super) fn write_cpuset(
    ex: &Executor,
    dirs: Vec<Vec<CgroupDir>>,
    cpus: &[u32],
    out: &mut Vec<Change>,
) {
    let value = cpuset::format(cpus);
    let levels: Vec<Vec<Update>> = dirs
        .into_iter()
        .map(|l| {
            l.into_iter()
                .map(|d| Update::new(Resource::CpusetCpus, d, value.clone()))
                .collect()
        })
        .collect();
    collect(ex.leveled(&levels), out);
}

pub(super) fn collect(results: Vec<Result<Outcome, ExecError>>, out: &mut Vec<Change>) {
    for r in results {
        match r {
            Ok(Outcome::Written(c)) => out.push(c),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cpusuppress write rejected"),
        }
    }
}

pub(super) fn set_quota(ex: &Executor, quota: i64, out: &mut Vec<Change>) {
    let dir = ex.cgroups().qos_dir(KubeQoS::BestEffort);
    collect(
        vec![ex.update(&Update::new(Resource::CfsQuota, dir, quota.to_string()))],
        out,
    );
}

/// The besteffort quota with every BE pod and container below it unlimited first (the
/// cfsQuota policy: the QoS level governs): cgroup v1 refuses a parent quota below a
/// child's (EINVAL), so the children are written before the parent.
/// True when the level took the quota (its write, the last of the round, succeeded).
pub(super) fn set_quota_over_be(
    ex: &Executor,
    states: &States,
    quota: i64,
    out: &mut Vec<Change>,
) -> bool {
    let unlimited = |dirs: Vec<CgroupDir>| -> Vec<Update> {
        dirs.into_iter()
            .map(|d| Update::new(Resource::CfsQuota, d, "-1"))
            .collect()
    };
    let mut levels: Vec<Vec<Update>> = be_dirs(states, ex).into_iter().map(unlimited).collect();
    if let Some(top) = levels.first_mut() {
        *top = vec![Update::new(
            Resource::CfsQuota,
            ex.cgroups().qos_dir(KubeQoS::BestEffort),
            quota.to_string(),
        )];
    }
    let results = ex.leveled(&levels);
    let applied = results.last().is_some_and(|r| r.is_ok());
    collect(results, out);
    applied
}
