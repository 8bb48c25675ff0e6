//! cpuburst, the `cpuBurstOnly` part (koordlet spec §4.5): LS pods may run above their CPU
//! limit for short bursts — container `cpu.cfs_burst_us` = limit cores × cpuBurstPercent%
//! of a period, pod = Σ containers. Policies `none` and `cfsQuotaBurstOnly` set bursts to
//! 0. LSR/LSE (pinned) and BE pods are left alone. The cfsQuotaBurst half (scaling quotas
//! of throttled containers with a node share-pool state and token buckets) is not here yet.

use k8s_openapi::api::core::v1::Pod;

use super::executor::Update;
use crate::api::extension::keys::ANNOTATION_CPU_BURST;
use crate::api::extension::qos::{QoSClass, pod_qos_class};
use crate::api::extension::resources::CPU;
use crate::api::pod::container_limits;
use crate::api::slo::nodeslo::{CPUBurstConfig, CPUBurstStrategy};
use crate::api::sloconfig::overlay;
use crate::api::sloconfig::strategies::default_cpu_burst;
use crate::koordlet::informer::{PodMeta, States};
use crate::koordlet::os::Resource;

/// The node strategy over defaults, with the pod's `koordinator.sh/cpuBurst` on top.
pub fn config_for(states: &States, pod: &Pod) -> CPUBurstConfig {
    let node: CPUBurstStrategy = states
        .node_slo
        .as_ref()
        .and_then(|s| s.spec.cpu_burst_strategy.clone())
        .unwrap_or_default();
    let base = overlay(&default_cpu_burst(), &node).config;
    let over: Option<CPUBurstConfig> = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_CPU_BURST))
        .and_then(|s| serde_json::from_str(s).ok());
    match over {
        Some(o) => overlay(&base, &o),
        None => base,
    }
}

/// Burst (µs per 100 ms period) for a CPU limit in milli-cores.
pub fn burst_us(limit_milli: i64, percent: i64) -> i64 {
    (limit_milli * percent / 100) * 100_000 / 1000
}

/// Pod-level then container-level `cpu.cfs_burst_us` updates.
pub fn updates(states: &States, pod: &PodMeta) -> Vec<Vec<Update>> {
    if matches!(
        pod_qos_class(&pod.pod),
        QoSClass::Lsr | QoSClass::Lse | QoSClass::Be
    ) {
        return Vec::new();
    }
    let Some(spec) = pod.pod.spec.as_ref() else {
        return Vec::new();
    };
    let cfg = config_for(states, &pod.pod);
    let on = matches!(cfg.policy.as_deref(), Some("cpuBurstOnly") | Some("auto"));
    let percent = cfg.cpu_burst_percent.unwrap_or(1000);
    let mut total = 0;
    let mut containers = Vec::new();
    for meta in &pod.containers {
        let Some(c) = spec.containers.iter().find(|c| c.name == meta.name) else {
            continue;
        };
        let limit = container_limits(c).get(CPU).copied().unwrap_or(0);
        let b = if on && limit > 0 {
            burst_us(limit, percent)
        } else {
            0
        };
        total += b;
        containers.push(Update::new(
            Resource::CfsBurst,
            meta.dir.clone(),
            b.to_string(),
        ));
    }
    vec![
        vec![Update::new(
            Resource::CfsBurst,
            pod.dir.clone(),
            total.to_string(),
        )],
        containers,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::koordlet::os::{Cgroups, Driver, Version};
    use serde_json::json;
    use std::sync::Arc;

    fn meta(
        labels: serde_json::Value,
        annotations: serde_json::Value,
        limits: &[Option<&str>],
    ) -> PodMeta {
        let containers: Vec<_> = limits
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let lim = l.map(|v| json!({"cpu": v})).unwrap_or(json!({}));
                json!({"name": format!("c{i}"), "resources": {"limits": lim}})
            })
            .collect();
        let statuses: Vec<_> = (0..limits.len())
            .map(|i| {
                json!({"name": format!("c{i}"), "containerID": format!("containerd://x{i}"),
            "image": "x", "imageID": "", "ready": true, "restartCount": 0})
            })
            .collect();
        let pod = json!({"metadata": {"name": "p", "namespace": "d", "uid": "u", "labels": labels, "annotations": annotations},
            "spec": {"containers": containers}, "status": {"qosClass": "Burstable", "containerStatuses": statuses}});
        PodMeta::new(
            serde_json::from_value(pod).unwrap(),
            &Cgroups::new("/r", Version::V1, Driver::Cgroupfs, ""),
        )
        .unwrap()
    }

    fn states(policy: &str) -> States {
        let slo = json!({"metadata": {"name": "n"}, "spec": {"cpuBurstStrategy": {"policy": policy, "cpuBurstPercent": 200}}});
        States {
            node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
            ..Default::default()
        }
    }

    fn values(l: &[Vec<Update>]) -> Vec<Vec<String>> {
        l.iter()
            .map(|x| x.iter().map(|u| u.value.clone()).collect())
            .collect()
    }

    #[test]
    fn burst_from_limits_and_policies() {
        assert_eq!(burst_us(2000, 1000), 2_000_000);
        let p = meta(json!({}), json!({}), &[Some("2"), Some("500m"), None]);
        // 200 %: 2 cores → 400000 µs, 0.5 core → 100000 µs, no limit → 0.
        assert_eq!(
            values(&updates(&states("cpuBurstOnly"), &p)),
            vec![
                vec!["500000".to_string()],
                vec!["400000".into(), "100000".into(), "0".into()]
            ]
        );
        assert_eq!(
            values(&updates(&states("none"), &p))[0],
            vec!["0".to_string()]
        );
        let opted_in = meta(
            json!({}),
            json!({"koordinator.sh/cpuBurst": "{\"policy\": \"auto\", \"cpuBurstPercent\": 100}"}),
            &[Some("1")],
        );
        assert_eq!(
            values(&updates(&states("none"), &opted_in)),
            vec![vec!["100000".to_string()], vec!["100000".into()]],
            "the pod annotation wins"
        );
        for q in ["LSR", "LSE", "BE"] {
            assert!(
                updates(
                    &states("cpuBurstOnly"),
                    &meta(
                        json!({"koordinator.sh/qosClass": q}),
                        json!({}),
                        &[Some("1")]
                    )
                )
                .is_empty(),
                "{q}"
            );
        }
    }
}
