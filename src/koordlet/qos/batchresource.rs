//! BatchResource as a reconciler (`pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go`): BE pods request only
//! `kubernetes.io/batch-*`, so Kubernetes gives them BestEffort cgroups with 2 shares and
//! no limits; this gives their pod and container cgroups real `cpu.shares`, CFS quota and
//! memory limit from the batch requests and limits.

use k8s_openapi::api::core::v1::{Container, Node};

use super::executor::Update;
use super::podreconcile::Reconcile;
use super::runner::Entry;
use crate::api::extension::keys::ANNOTATION_NODE_CPU_NORMALIZATION_RATIO;
use crate::api::extension::qos::{KubeQoS, QoSClass};
use crate::api::extension::resources::{BATCH_CPU, BATCH_MEMORY};
use crate::api::pod::{container_limits, container_requests};
use crate::koordlet::features;
use crate::koordlet::informer::PodMeta;
use crate::os::Resource;

/// milli-CPU → cpu.shares, clamped to [2, 262144].
pub fn shares(milli: i64) -> i64 {
    (milli * 1024 / 1000).clamp(2, 262_144)
}

/// milli-CPU → cfs quota (µs per 100 ms); ≤ 0 is unlimited, tiny values become 1000.
pub fn quota(milli: i64) -> i64 {
    match milli * 100_000 / 1000 {
        q if q <= 0 => -1,
        q if q < 1000 => 1000,
        q => q,
    }
}

/// (Σ requests, Σ limits or None when a container has no limit) of one batch resource.
fn sums<'a>(containers: impl Iterator<Item = &'a Container>, name: &str) -> (i64, Option<i64>) {
    let (mut req, mut lim) = (0i64, Some(0i64));
    for c in containers {
        req += container_requests(c).get(name).copied().unwrap_or(0);
        lim = match (
            lim,
            container_limits(c).get(name).copied().filter(|v| *v > 0),
        ) {
            (Some(total), Some(l)) => Some(total + l),
            _ => None,
        };
    }
    (req, lim)
}

/// The node's CPU normalization ratio (> 1 shrinks quotas), 1 when absent.
pub fn normalization_ratio(node: Option<&Node>) -> f64 {
    node.and_then(|n| n.metadata.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_NODE_CPU_NORMALIZATION_RATIO))
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|r| *r > 1.0)
        .unwrap_or(1.0)
}

fn values(
    cpu: (i64, Option<i64>),
    mem: Option<i64>,
    force_unlimited_quota: bool,
    ratio: f64,
) -> [(Resource, i64); 3] {
    let q = match cpu.1 {
        _ if force_unlimited_quota => -1,
        None => -1,
        Some(l) => match quota(l) {
            q if q > 0 && ratio > 1.0 => (q as f64 / ratio).ceil() as i64,
            q => q,
        },
    };
    [
        (Resource::CpuShares, shares(cpu.0)),
        (Resource::CfsQuota, q),
        (Resource::MemoryLimit, mem.unwrap_or(-1)),
    ]
}

/// cpu.shares, CFS quota and memory limit of one container of a BE pod, from its batch
/// requests and limits (what the BatchResource hook answers at creation).
pub fn container_values(c: &Container, ratio: f64) -> [(Resource, i64); 3] {
    values(
        sums(std::iter::once(c), BATCH_CPU),
        sums(std::iter::once(c), BATCH_MEMORY).1,
        false,
        ratio,
    )
}

/// Pod-level then container-level updates for a BE pod; nothing for other pods.
/// `force_unlimited_quota`: BE suppression runs with the cfsQuota policy (the QoS-level
/// quota governs).
pub fn updates(pod: &PodMeta, force_unlimited_quota: bool, ratio: f64) -> Vec<Vec<Update>> {
    if pod.facts.hook_qos != QoSClass::Be {
        return Vec::new();
    }
    let Some(spec) = pod.pod.spec.as_ref() else {
        return Vec::new();
    };
    let pod_level = values(
        sums(spec.containers.iter(), BATCH_CPU),
        sums(spec.containers.iter(), BATCH_MEMORY).1,
        force_unlimited_quota,
        ratio,
    );
    let mut levels = Vec::with_capacity(3);
    if !force_unlimited_quota
        && pod.facts.kube_qos == KubeQoS::BestEffort
        && let Some(qos) = pod.dir.parent()
    {
        // Outside the cfsQuota policy the besteffort level has no quota (cpusuppress lifts
        // it too); lifted first, the pod's quota written below it is never refused.
        levels.push(vec![Update::new(Resource::CfsQuota, qos, "-1")]);
    }
    levels.push(
        pod_level
            .iter()
            .map(|(r, v)| Update::new(*r, pod.dir.clone(), v.to_string()))
            .collect::<Vec<_>>(),
    );
    let mut containers = Vec::new();
    for meta in &pod.containers {
        let Some(c) = spec.containers.iter().find(|c| c.name == meta.name) else {
            continue;
        };
        let vals = values(
            sums(std::iter::once(c), BATCH_CPU),
            sums(std::iter::once(c), BATCH_MEMORY).1,
            force_unlimited_quota,
            ratio,
        );
        containers.extend(
            vals.iter()
                .map(|(r, v)| Update::new(*r, meta.dir.clone(), v.to_string())),
        );
    }
    levels.push(containers);
    levels
}

/// BatchResource: BE pod and container cgroups get shares, quota and memory limits from
/// their batch resources.
pub const ENTRY: Entry = Entry {
    gate: features::BATCH_RESOURCE,
    build: |d| {
        Box::new(Reconcile {
            ex: d.executor.clone(),
            name: "batchresource",
            updates: |states, pod| {
                let s = &states.slo().threshold;
                let by_quota =
                    s.enable == Some(true) && s.cpu_suppress_policy.as_deref() == Some("cfsQuota");
                let ratio = normalization_ratio(states.node.as_deref());
                updates(pod, by_quota, ratio)
            },
        })
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{Cgroups, Driver, Version};
    use serde_json::json;

    fn meta(labels: serde_json::Value, containers: serde_json::Value) -> PodMeta {
        let statuses: Vec<serde_json::Value> = containers.as_array().unwrap().iter().enumerate()
            .map(|(i, c)| json!({"name": c["name"], "containerID": format!("containerd://c{i}"), "image": "x", "imageID": "", "ready": true, "restartCount": 0}))
            .collect();
        let pod = json!({"metadata": {"name": "p", "namespace": "d", "uid": "u1", "labels": labels}, "spec": {"containers": containers},
            "status": {"qosClass": "BestEffort", "containerStatuses": statuses}});
        PodMeta::new(
            serde_json::from_value(pod).unwrap(),
            &Cgroups::new("/r", Version::V1, Driver::Cgroupfs, ""),
        )
        .unwrap()
    }

    fn vals(levels: &[Vec<Update>]) -> Vec<Vec<(Resource, String)>> {
        levels
            .iter()
            .map(|l| l.iter().map(|u| (u.resource, u.value.clone())).collect())
            .collect()
    }

    #[test]
    fn helpers() {
        assert_eq!(
            (shares(0), shares(1000), shares(1_000_000)),
            (2, 1024, 262_144)
        );
        assert_eq!((quota(0), quota(5), quota(1500)), (-1, 1000, 150_000));
    }

    #[test]
    fn be_pods_get_limits_from_batch_resources() {
        let be = json!({"koordinator.sh/qosClass": "BE"});
        let c = |name: &str, req: i64, lim: Option<i64>, mem: Option<&str>| {
            let mut limits = json!({});
            if let Some(l) = lim {
                limits["kubernetes.io/batch-cpu"] = l.to_string().into();
            }
            if let Some(m) = mem {
                limits["kubernetes.io/batch-memory"] = m.into();
            }
            json!({"name": name, "resources": {"requests": {"kubernetes.io/batch-cpu": req.to_string()}, "limits": limits}})
        };
        let p = meta(
            be.clone(),
            json!([
                c("a", 1000, Some(2000), Some("1Gi")),
                c("b", 500, Some(500), Some("512Mi"))
            ]),
        );
        assert_eq!(
            vals(&updates(&p, false, 1.0)),
            vec![
                vec![(Resource::CfsQuota, "-1".into())],
                vec![
                    (Resource::CpuShares, "1536".into()),
                    (Resource::CfsQuota, "250000".into()),
                    (Resource::MemoryLimit, "1610612736".into())
                ],
                vec![
                    (Resource::CpuShares, "1024".into()),
                    (Resource::CfsQuota, "200000".into()),
                    (Resource::MemoryLimit, "1073741824".into()),
                    (Resource::CpuShares, "512".into()),
                    (Resource::CfsQuota, "50000".into()),
                    (Resource::MemoryLimit, "536870912".into()),
                ],
            ]
        );
        // A container without limits leaves the pod unlimited; suppression by quota forces -1;
        // normalization shrinks quotas.
        let p = meta(
            be.clone(),
            json!([c("a", 1000, Some(2000), None), c("b", 500, None, None)]),
        );
        let l = vals(&updates(&p, false, 1.0));
        assert_eq!(l[1][1], (Resource::CfsQuota, "-1".into()));
        assert_eq!(l[1][2], (Resource::MemoryLimit, "-1".into()));
        let by_quota = updates(&p, true, 1.0);
        assert_eq!(by_quota.len(), 2, "the QoS level's quota is cpusuppress's");
        assert_eq!(vals(&by_quota)[1][1], (Resource::CfsQuota, "-1".into()));
        assert_eq!(
            vals(&updates(&p, false, 1.5))[2][1],
            (Resource::CfsQuota, "133334".into())
        );
        assert!(
            updates(
                &meta(json!({}), json!([c("a", 1000, Some(1000), None)])),
                false,
                1.0
            )
            .is_empty(),
            "only BE pods"
        );
        let batch_band = meta(
            json!({"koordinator.sh/priority-class": "koord-batch"}),
            json!([c("a", 1000, Some(1000), None)]),
        );
        assert!(
            !updates(&batch_band, false, 1.0).is_empty(),
            "the koord-batch band is"
        );
    }
}
