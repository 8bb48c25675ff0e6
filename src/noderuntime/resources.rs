//! The kubelet's cgroup values for pods and containers (pkg/kubelet/cm): cpu shares from
//! requests, CFS quota and memory limit from limits, BestEffort at minimum shares.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::api::extension::qos::KubeQoS;
use crate::api::pod::{
    all_containers_limit, container_limits, container_requests, pod_limits, pod_requests,
};

pub use crate::api::kubeletqos::{MAX_SHARES, MIN_SHARES, milli_cpu_to_shares};
pub const CFS_PERIOD_US: i64 = 100_000;
pub const MIN_QUOTA_US: i64 = 1000;

/// `MilliCPUToQuota` for the default period; -1 (unlimited) without a limit.
pub fn milli_cpu_to_quota(milli: i64) -> i64 {
    if milli <= 0 {
        return -1;
    }
    (milli * CFS_PERIOD_US / 1000).max(MIN_QUOTA_US)
}

/// Values for one cgroup; `-1` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupValues {
    pub cpu_shares: i64,
    pub cpu_quota: i64,
    pub cpu_period: i64,
    pub memory_limit: i64,
}

/// Pod-level values: limits only when every container sets one.
pub fn pod_values(pod: &Pod, qos: KubeQoS) -> CgroupValues {
    if qos == KubeQoS::BestEffort {
        return CgroupValues {
            cpu_shares: MIN_SHARES,
            cpu_quota: -1,
            cpu_period: CFS_PERIOD_US,
            memory_limit: -1,
        };
    }
    let req = pod_requests(pod);
    let lim = pod_limits(pod);
    let cpu_quota = if all_containers_limit(pod, "cpu") {
        milli_cpu_to_quota(lim["cpu"])
    } else {
        -1
    };
    let memory_limit = if all_containers_limit(pod, "memory") {
        lim["memory"]
    } else {
        -1
    };
    CgroupValues {
        cpu_shares: milli_cpu_to_shares(req.get("cpu").copied().unwrap_or(0)),
        cpu_quota,
        cpu_period: CFS_PERIOD_US,
        memory_limit,
    }
}

/// Container-level values.
pub fn container_values(c: &Container) -> CgroupValues {
    let req = container_requests(c);
    let lim = container_limits(c);
    CgroupValues {
        cpu_shares: milli_cpu_to_shares(req.get("cpu").copied().unwrap_or(0)),
        cpu_quota: lim.get("cpu").map_or(-1, |m| milli_cpu_to_quota(*m)),
        cpu_period: CFS_PERIOD_US,
        memory_limit: lim.get("memory").copied().filter(|m| *m > 0).unwrap_or(-1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extension::qos::kube_qos;

    fn pod(containers: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"spec": {"containers": containers}})).unwrap()
    }

    #[test]
    fn shares_and_quota() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(250), 256);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(1_000_000), MAX_SHARES);
        assert_eq!(milli_cpu_to_quota(0), -1);
        assert_eq!(milli_cpu_to_quota(5), 1000, "quota has a 1ms floor");
        assert_eq!(milli_cpu_to_quota(1500), 150_000);
    }

    #[test]
    fn pod_values_by_qos() {
        let guaranteed = pod(serde_json::json!([
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}}]));
        let v = pod_values(&guaranteed, kube_qos(&guaranteed));
        assert_eq!(
            v,
            CgroupValues {
                cpu_shares: 1536,
                cpu_quota: 150_000,
                cpu_period: 100_000,
                memory_limit: (3 << 29)
            }
        );
        let burstable = pod(serde_json::json!([
            {"name": "a", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"memory": "64Mi"}}}]));
        let v = pod_values(&burstable, kube_qos(&burstable));
        assert_eq!(
            (v.cpu_shares, v.cpu_quota, v.memory_limit),
            (256, -1, -1),
            "limits only when every container has one"
        );
        let be = pod(
            serde_json::json!([{"name": "a", "resources": {"requests": {"kubernetes.io/batch-cpu": "2000"}}}]),
        );
        assert_eq!(
            pod_values(&be, kube_qos(&be)).cpu_shares,
            2,
            "BestEffort gets minimum shares"
        );
        let c: Container = serde_json::from_value(serde_json::json!({"name": "a",
            "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m", "memory": "64Mi"}}})).unwrap();
        assert_eq!(
            container_values(&c),
            CgroupValues {
                cpu_shares: 256,
                cpu_quota: 50_000,
                cpu_period: 100_000,
                memory_limit: 64 << 20
            }
        );
    }
}
