//! What a kubelet keeps on its QoS cgroups (`pkg/kubelet/cm/qos_container_manager_linux.go`
//! and `node_container_manager_linux.go`): kubepods gets the node's allocatable CPU as
//! shares, kubepods/burstable the Σ of its pods' CPU requests, kubepods/besteffort the
//! minimum (2). A kubelet writes them at every pod sync and once a minute; the embedded node
//! runtime does the same, and the koordlet puts them back at once where a kernel reset them
//! (leaving `cpu.idle` resets a group's weight to 1024).

use k8s_openapi::api::core::v1::Pod;

use crate::api::extension::qos::{KubeQoS, kube_qos};
use crate::api::extension::resources::CPU;
use crate::api::pod::pod_requests;

pub const MIN_SHARES: i64 = 2;
pub const MAX_SHARES: i64 = 262_144;

/// `MilliCPUToShares`.
pub fn milli_cpu_to_shares(milli: i64) -> i64 {
    if milli <= 0 {
        return MIN_SHARES;
    }
    (milli * 1024 / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// The `cpu.shares` a kubelet keeps on a QoS level: `Guaranteed` names the kubepods root
/// (allocatable CPU), `Burstable` and `BestEffort` their directories.
pub fn qos_cpu_shares<'a>(
    kube: KubeQoS,
    allocatable_milli: i64,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> i64 {
    match kube {
        KubeQoS::Guaranteed => milli_cpu_to_shares(allocatable_milli),
        KubeQoS::BestEffort => MIN_SHARES,
        KubeQoS::Burstable => {
            let requested: i64 = pods
                .into_iter()
                .filter(|p| kube_qos(p) == KubeQoS::Burstable)
                .map(|p| pod_requests(p).get(CPU).copied().unwrap_or(0))
                .sum();
            milli_cpu_to_shares(requested)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(resources: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"spec": {"containers": [{"name": "c", "resources": resources}]}}),
        )
        .unwrap()
    }

    #[test]
    fn qos_levels_as_the_kubelet_sets_them() {
        let pods = [
            pod(json!({"requests": {"cpu": "900m"}, "limits": {"cpu": "1"}})),
            pod(json!({"requests": {"cpu": "100m"}})),
            pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}})),
            pod(json!({})),
        ];
        assert_eq!(qos_cpu_shares(KubeQoS::Burstable, 2000, &pods), 1024);
        assert_eq!(qos_cpu_shares(KubeQoS::BestEffort, 2000, &pods), 2);
        assert_eq!(qos_cpu_shares(KubeQoS::Guaranteed, 2000, &pods), 2048);
        assert_eq!(
            qos_cpu_shares(KubeQoS::Burstable, 2000, std::iter::empty()),
            2,
            "no pod: the minimum"
        );
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(10_000_000), MAX_SHARES);
    }
}
