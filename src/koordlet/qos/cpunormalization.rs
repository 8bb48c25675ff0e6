//! CPUNormalization (`pkg/koordlet/runtimehooks/hooks/cpunormalization`, reconciler mode
//! as in Koordinator): on a node whose `node.koordinator.sh/cpu-normalization-ratio` is
//! above 1 (its CPUs are faster than the baseline), LS and QoS-less pods that share CPUs
//! get their CFS quotas divided by the ratio, pod and containers, from their CPU limits.

use k8s_openapi::api::core::v1::Container;

use super::batchresource::{normalization_ratio, quota};
use super::executor::Update;
use super::podreconcile::Reconcile;
use super::runner::Entry;
use crate::api::extension::qos::QoSClass;
use crate::api::extension::resourcestatus::pinned_cpus as pinned;
use crate::api::pod::container_limits;
use crate::koordlet::features;
use crate::koordlet::informer::{PodMeta, States};
use crate::os::Resource;

fn scaled(limit_milli: Option<i64>, ratio: f64) -> Option<i64> {
    let q = quota(limit_milli.filter(|m| *m > 0)?);
    (q > 0).then(|| (q as f64 / ratio).ceil() as i64)
}

fn cpu_limit(c: &Container) -> Option<i64> {
    container_limits(c).get("cpu").copied()
}

/// Pod-level, then container-level quota updates; nothing when the node has no ratio or
/// the pod is not a CPU-sharing LS/None pod.
pub fn updates(states: &States, pod: &PodMeta) -> Vec<Vec<Update>> {
    let ratio = normalization_ratio(states.node.as_deref());
    let qos = pod.facts.qos;
    if ratio <= 1.0 || !matches!(qos, QoSClass::Ls | QoSClass::None) || !pinned(&pod.pod).is_empty()
    {
        return Vec::new();
    }
    let Some(spec) = pod.pod.spec.as_ref() else {
        return Vec::new();
    };
    let limits: Option<i64> = spec.containers.iter().map(cpu_limit).sum();
    let pod_level: Vec<Update> = scaled(limits, ratio)
        .map(|q| Update::new(Resource::CfsQuota, pod.dir.clone(), q.to_string()))
        .into_iter()
        .collect();
    let containers = pod
        .containers
        .iter()
        .filter_map(|meta| {
            let c = spec.containers.iter().find(|c| c.name == meta.name)?;
            let q = scaled(cpu_limit(c), ratio)?;
            Some(Update::new(
                Resource::CfsQuota,
                meta.dir.clone(),
                q.to_string(),
            ))
        })
        .collect();
    vec![pod_level, containers]
}

/// CPUNormalization.
pub const ENTRY: Entry = Entry {
    gate: features::CPU_NORMALIZATION,
    build: |d| {
        Box::new(Reconcile {
            ex: d.executor.clone(),
            name: "cpunormalization",
            updates,
        })
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{Cgroups, Driver, Version};
    use serde_json::json;
    use std::sync::Arc;

    fn meta(qos: &str) -> PodMeta {
        let pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "d", "uid": "u1", "labels": {"koordinator.sh/qosClass": qos}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]},
            "status": {"qosClass": "Burstable", "containerStatuses": [{"name": "c", "containerID": "containerd://x",
                "image": "i", "imageID": "", "ready": true, "restartCount": 0}]}}))
        .unwrap();
        PodMeta::new(pod, &Cgroups::new("/r", Version::V1, Driver::Cgroupfs, "")).unwrap()
    }

    fn node(ratio: &str) -> States {
        let n = serde_json::from_value(json!({"metadata": {"name": "n",
            "annotations": {"node.koordinator.sh/cpu-normalization-ratio": ratio}}}))
        .unwrap();
        States {
            node: Some(Arc::new(n)),
            ..Default::default()
        }
    }

    #[test]
    fn ls_quotas_shrink_by_the_ratio() {
        let u = updates(&node("1.25"), &meta("LS"));
        let vals: Vec<Vec<String>> = u
            .iter()
            .map(|l| l.iter().map(|x| x.value.clone()).collect())
            .collect();
        assert_eq!(
            vals,
            vec![vec!["160000".to_string()], vec!["160000".to_string()]]
        );
        assert!(updates(&node("1.0"), &meta("LS")).is_empty());
        assert!(
            updates(&node("1.25"), &meta("BE")).is_empty(),
            "BE has BatchResource"
        );
    }
}
