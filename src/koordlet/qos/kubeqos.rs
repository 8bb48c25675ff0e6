//! `cpu.idle` on the kube QoS cgroups, which two strategies set: CoreSched (each class's
//! `cpuQOS.schedIdle` under the coreSched policy) and cpusuppress's `cpuIdle` policy (BE runs
//! as SCHED_IDLE). One rule decides what besteffort wants, so the two never undo each other,
//! and a level leaving idle gets back the `cpu.shares` a kubelet keeps there at once: the
//! kernel resets a group's weight to 1024 when `cpu.idle` goes back to 0, which left BE
//! competing with LS at equal weight until the kubelet's next minute.

use super::executor::{ExecError, Executor, Outcome, Update};
use crate::api::extension::qos::KubeQoS;
use crate::api::kubeletqos::qos_cpu_shares;
use crate::api::quantity::q_milli;
use crate::koordlet::informer::States;
use crate::os::Resource;

/// cpusuppress's policy that runs BE as SCHED_IDLE (a koord policy; Koordinator has
/// `cpuset` and `cfsQuota`).
pub const CPU_IDLE_POLICY: &str = "cpuIdle";

/// The BE suppression strategy is on with the `cpuIdle` policy.
pub fn suppress_by_idle(states: &States) -> bool {
    let s = &states.slo().threshold;
    s.enable == Some(true) && s.cpu_suppress_policy.as_deref() == Some(CPU_IDLE_POLICY)
}

/// Whether a kube QoS level should run as `cpu.idle`: what CoreSched's rule says (`false`
/// where its gate is off), and besteffort also under cpusuppress's `cpuIdle` policy.
pub fn wants_idle(states: &States, kube: KubeQoS, by_core_sched: bool) -> bool {
    by_core_sched || (kube == KubeQoS::BestEffort && suppress_by_idle(states))
}

/// Writes a level's `cpu.idle`; leaving idle, puts the kubelet's `cpu.shares` back. A
/// kernel without `cpu.idle` is left alone (the executor remembers the missing knob).
pub fn set_idle(
    ex: &Executor,
    states: &States,
    kube: KubeQoS,
    idle: bool,
) -> Vec<Result<Outcome, ExecError>> {
    let dir = ex.cgroups().qos_dir(kube);
    let value = if idle { "1" } else { "0" };
    let written = ex.update(&Update::new(Resource::CpuIdle, dir.clone(), value));
    let left_idle = matches!(&written, Ok(Outcome::Written(c)) if c.old == "1" && !idle);
    let mut out = vec![written];
    if left_idle {
        let shares = Update::new(
            Resource::CpuShares,
            dir,
            kubelet_shares(states, kube).to_string(),
        );
        ex.forget(&shares);
        out.push(ex.update(&shares));
    }
    out
}

/// The level's `cpu.shares` as the kubelet computes it from the node and its pods.
fn kubelet_shares(states: &States, kube: KubeQoS) -> i64 {
    let allocatable = states
        .node
        .as_ref()
        .and_then(|n| n.status.as_ref()?.allocatable.as_ref()?.get("cpu"))
        .map_or(0, q_milli);
    qos_cpu_shares(kube, allocatable, states.pods.iter().map(|p| &*p.pod))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{Cgroups, Driver, Version};
    use serde_json::json;
    use std::sync::Arc;

    fn states(slo: serde_json::Value) -> States {
        States {
            node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
            ..Default::default()
        }
    }

    #[test]
    fn leaving_idle_puts_the_kubelets_weight_back() {
        let root = tempfile::tempdir().unwrap();
        let cg = Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
        let be = cg.qos_dir(KubeQoS::BestEffort);
        let dir = cg.dir_path(Resource::CpuIdle.subsystem(), &be);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpu.idle"), "0").unwrap();
        std::fs::write(dir.join("cpu.shares"), "2").unwrap();
        let ex = Executor::new(cg.clone(), std::time::Duration::from_secs(60));
        let on = states(
            json!({"metadata": {"name": "n"}, "spec": {"resourceUsedThresholdWithBE": {
            "enable": true, "cpuSuppressPolicy": "cpuIdle"}}}),
        );
        assert!(wants_idle(&on, KubeQoS::BestEffort, false));
        assert!(
            wants_idle(&on, KubeQoS::Burstable, true),
            "CoreSched's rule says so"
        );
        assert!(!wants_idle(&on, KubeQoS::Burstable, false));
        let _ = set_idle(&ex, &on, KubeQoS::BestEffort, true);
        assert_eq!(cg.read_i64(Resource::CpuIdle, &be).unwrap(), 1);
        // What the kernel does on leaving idle, then what koord does about it.
        let _ = ex.update(&Update::new(Resource::CpuShares, be.clone(), "2"));
        std::fs::write(dir.join("cpu.shares"), "1024").unwrap();
        let off = states(json!({"metadata": {"name": "n"}, "spec": {}}));
        assert!(!wants_idle(&off, KubeQoS::BestEffort, false));
        let _ = set_idle(&ex, &off, KubeQoS::BestEffort, false);
        assert_eq!(cg.read_i64(Resource::CpuIdle, &be).unwrap(), 0);
        assert_eq!(
            cg.read_i64(Resource::CpuShares, &be).unwrap(),
            2,
            "written although the executor had cached 2"
        );
    }
}
