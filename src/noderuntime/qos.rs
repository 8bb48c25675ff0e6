//! The QoS cgroups as a kubelet keeps them (`UpdateCgroups` of its QoS container manager,
//! at every pod change and once a minute): kubepods, kubepods/burstable and
//! kubepods/besteffort get the `cpu.shares` of `api::kubeletqos`. Something else writing
//! them (a kernel that reset a weight when `cpu.idle` went back to 0, say) is undone within
//! a minute, as on a kubelet's node.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::api::extension::qos::KubeQoS;
use crate::api::kubeletqos::qos_cpu_shares;
use crate::os::{Cgroups, Resource};

/// How often the QoS levels are written without a pod change (the kubelet's
/// `periodicQOSCgroupUpdateInterval`).
pub const PERIOD: Duration = Duration::from_secs(60);

/// A pod the kubelet counts among its active pods: not Succeeded or Failed.
fn active(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Writes each QoS level's `cpu.shares` where it differs; a level running as `cpu.idle`
/// (the koordlet's CoreSched) refuses a weight and is left to it. Returns the levels
/// written.
pub fn update<'a>(
    cgroups: &Cgroups,
    allocatable_milli: i64,
    pods: impl Iterator<Item = &'a Pod> + Clone,
) -> Vec<KubeQoS> {
    let mut written = Vec::new();
    for kube in [KubeQoS::Guaranteed, KubeQoS::Burstable, KubeQoS::BestEffort] {
        let dir = cgroups.qos_dir(kube);
        let want = qos_cpu_shares(kube, allocatable_milli, pods.clone().filter(|p| active(p)));
        if cgroups
            .read_i64(Resource::CpuIdle, &dir)
            .is_ok_and(|i| i == 1)
        {
            continue;
        }
        if cgroups.read_i64(Resource::CpuShares, &dir).ok() == Some(want) {
            continue;
        }
        match cgroups.write(Resource::CpuShares, &dir, &want.to_string()) {
            Ok(()) => written.push(kube),
            Err(e) => tracing::warn!(dir = %dir.as_str(), error = %e, "QoS cgroup cpu.shares"),
        }
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{Driver, Version};
    use serde_json::json;

    #[test]
    fn the_levels_come_back_to_the_kubelets_values() {
        let root = tempfile::tempdir().unwrap();
        let cg = Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
        for k in [KubeQoS::Guaranteed, KubeQoS::Burstable, KubeQoS::BestEffort] {
            let d = root.path().join("cpu").join(cg.qos_dir(k).as_str());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpu.shares"), "1024").unwrap();
            std::fs::write(d.join("cpu.idle"), "0").unwrap();
        }
        let pods: Vec<Pod> = [json!({"requests": {"cpu": "900m"}}), json!({})]
            .into_iter()
            .map(|r| {
                serde_json::from_value(
                    json!({"spec": {"containers": [{"name": "c", "resources": r}]}}),
                )
                .unwrap()
            })
            .collect();
        let written = update(&cg, 2000, pods.iter());
        assert_eq!(
            written,
            vec![KubeQoS::Guaranteed, KubeQoS::Burstable, KubeQoS::BestEffort]
        );
        let shares = |k| cg.read_i64(Resource::CpuShares, &cg.qos_dir(k)).unwrap();
        assert_eq!(
            (
                shares(KubeQoS::Guaranteed),
                shares(KubeQoS::Burstable),
                shares(KubeQoS::BestEffort)
            ),
            (2048, 921, 2)
        );
        assert!(update(&cg, 2000, pods.iter()).is_empty(), "nothing differs");
        // A kernel reset (cpu.idle back to 0 makes the weight 1024) is undone; an idle
        // level is the koordlet's.
        let be = root
            .path()
            .join("cpu")
            .join(cg.qos_dir(KubeQoS::BestEffort).as_str());
        std::fs::write(be.join("cpu.shares"), "1024").unwrap();
        assert_eq!(update(&cg, 2000, pods.iter()), vec![KubeQoS::BestEffort]);
        std::fs::write(be.join("cpu.shares"), "3").unwrap();
        std::fs::write(be.join("cpu.idle"), "1").unwrap();
        assert!(update(&cg, 2000, pods.iter()).is_empty());
    }
}
