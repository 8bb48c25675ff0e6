//! cpuburst (`pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst.go`) for LS pods; LSR/LSE (pinned) and BE pods are left alone.
//! - `cpuBurstOnly`/`auto`: container `cpu.cfs_burst_us` = limit cores × cpuBurstPercent%
//!   of a period, capped at the container's current quota (kernels refuse burst > quota),
//!   pod = Σ containers; `none`/`cfsQuotaBurstOnly` set 0.
//! - `cfsQuotaBurstOnly`/`auto`: [`cfs_updates`] scales a running container's quota with
//!   the decisions of [`super::cfsquotaburst`].

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use super::cfsquotaburst::{
    Limiter, NodeBurstState, base_quota, by_node, ceil_quota, container_op, target_quota,
};
use super::executor::Update;
use crate::api::extension::keys::ANNOTATION_CPU_BURST;
use crate::api::extension::qos::{QoSClass, pod_qos_class};
use crate::api::extension::resources::CPU;
use crate::api::pod::container_limits;
use crate::api::slo::nodeslo::{CPUBurstConfig, CPUBurstStrategy};
use crate::api::sloconfig::overlay;
use crate::koordlet::informer::{PodMeta, States};
use crate::os::{CgroupDir, Resource};

/// The NodeSLO's `cpuBurstStrategy` over Koordinator's defaults.
pub fn node_strategy(states: &States) -> &CPUBurstStrategy {
    &states.slo().cpu_burst
}

/// The node strategy over defaults, with the pod's `koordinator.sh/cpuBurst` on top.
pub fn config_for(states: &States, pod: &Pod) -> CPUBurstConfig {
    let base = node_strategy(states).config.clone();
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

/// Is cpuburst for this pod at all? (not LSR/LSE/BE, and Pending or Running)
pub fn burstable(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(
        pod_qos_class(pod),
        QoSClass::Lsr | QoSClass::Lse | QoSClass::Be
    ) && matches!(phase, None | Some("Pending") | Some("Running"))
}

fn burst_on(cfg: &CPUBurstConfig) -> bool {
    matches!(cfg.policy.as_deref(), Some("cpuBurstOnly") | Some("auto"))
}

fn quota_burst_on(cfg: &CPUBurstConfig) -> bool {
    matches!(
        cfg.policy.as_deref(),
        Some("cfsQuotaBurstOnly") | Some("auto")
    )
}

/// The burst a container should have with quota `quota` (−1: unlimited, no cap).
fn safe_burst(cfg: &CPUBurstConfig, limit_milli: i64, quota: Option<i64>) -> i64 {
    if !burst_on(cfg) || limit_milli <= 0 {
        return 0;
    }
    let b = burst_us(limit_milli, cfg.cpu_burst_percent.unwrap_or(1000));
    match quota {
        Some(q) if q > 0 => b.min(q),
        _ => b,
    }
}

/// Pod-level then container-level `cpu.cfs_burst_us` updates; `quota` reads a cgroup's
/// current CFS quota.
pub fn updates(
    states: &States,
    pod: &PodMeta,
    quota: &dyn Fn(&CgroupDir) -> Option<i64>,
) -> Vec<Vec<Update>> {
    if !burstable(&pod.pod) {
        return Vec::new();
    }
    let Some(spec) = pod.pod.spec.as_ref() else {
        return Vec::new();
    };
    let cfg = config_for(states, &pod.pod);
    let mut total = 0;
    let mut containers = Vec::new();
    for meta in &pod.containers {
        let Some(c) = spec.containers.iter().find(|c| c.name == meta.name) else {
            continue;
        };
        let limit = container_limits(c).get(CPU).copied().unwrap_or(0);
        let b = safe_burst(&cfg, limit, quota(&meta.dir));
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

/// What [`cfs_updates`] reads about the node, the cgroups and the metric store.
pub struct CfsEnv<'a> {
    pub node: NodeBurstState,
    /// Monotonic seconds (the limiters' clock).
    pub now: f64,
    /// A cgroup's current CFS quota.
    pub quota: &'a dyn Fn(&CgroupDir) -> Option<i64>,
    /// A container's last throttled ratio, by bare container id.
    pub throttled: &'a dyn Fn(&str) -> Option<f64>,
    /// A container's last CPU usage in cores, by bare container id.
    pub usage: &'a dyn Fn(&str) -> Option<f64>,
    /// The random initial fill of a new limiter, in [0, 0.5).
    pub fill: &'a dyn Fn() -> f64,
}

fn running(pod: &Pod, name: &str) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .any(|c| c.name == name && c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

/// May the container keep (or start) bursting? Without a period the limiter is off.
fn allowed(
    cfg: &CPUBurstConfig,
    env: &CfsEnv,
    limiters: &mut HashMap<String, Limiter>,
    id: &str,
    limit_milli: i64,
) -> bool {
    let period = match cfg.cfs_quota_burst_period_seconds {
        Some(p) if p >= 0 => p,
        _ => return true,
    };
    let percent = match cfg.cfs_quota_burst_percent {
        Some(p) if p >= 100 => p,
        _ => return false,
    };
    let limit = limit_milli as f64 / 1000.0;
    let usage = (env.usage)(id).unwrap_or(limit);
    let l = limiters
        .entry(id.to_string())
        .or_insert_with(|| Limiter::new(period, percent, (env.fill)(), env.now));
    if !l.matches(period, percent) {
        *l = Limiter::new(period, percent, (env.fill)(), env.now);
    }
    l.allow(env.now, (usage / limit * 100.0) as i64)
}

/// Ordered writes scaling the CFS quota of the pod's running, CPU-limited containers:
/// growing writes the pod quota first and the burst last, shrinking the reverse, so the
/// kernel's parent ≥ child and burst ≤ quota rules hold at every step.
pub fn cfs_updates(
    states: &States,
    pod: &PodMeta,
    env: &CfsEnv,
    limiters: &mut HashMap<String, Limiter>,
) -> Vec<Update> {
    let Some(spec) = pod.pod.spec.as_ref().filter(|_| burstable(&pod.pod)) else {
        return Vec::new();
    };
    let cfg = config_for(states, &pod.pod);
    let mut pod_quota = (env.quota)(&pod.dir).unwrap_or(-1);
    let mut out = Vec::new();
    for meta in &pod.containers {
        let Some(c) = spec.containers.iter().find(|c| c.name == meta.name) else {
            continue;
        };
        let limit = container_limits(c).get(CPU).copied().unwrap_or(0);
        if limit <= 0 || !running(&pod.pod, &meta.name) {
            continue;
        }
        let Some(cur) = (env.quota)(&meta.dir) else {
            continue;
        };
        let id = PodMeta::container_id(meta);
        let ok = allowed(&cfg, env, limiters, id, limit);
        let op = by_node(
            env.node,
            container_op(quota_burst_on(&cfg), ok, (env.throttled)(id)),
        );
        let base = base_quota(limit);
        let target = target_quota(cur, base, ceil_quota(base, cfg.cfs_quota_burst_percent), op);
        if target == cur {
            continue;
        }
        let delta = target - cur;
        let quota = Update::new(Resource::CfsQuota, meta.dir.clone(), target.to_string());
        let burst = burst_on(&cfg).then(|| {
            let b = safe_burst(&cfg, limit, Some(target));
            Update::new(Resource::CfsBurst, meta.dir.clone(), b.to_string())
        });
        let parent = (pod_quota > 0).then(|| {
            pod_quota += delta;
            Update::new(Resource::CfsQuota, pod.dir.clone(), pod_quota.to_string())
        });
        if delta > 0 {
            out.extend(parent.into_iter().chain([quota]).chain(burst));
        } else {
            out.extend(burst.into_iter().chain([quota]).chain(parent));
        }
    }
    out
}

/// The container-level burst and quota values among `updates`, as
/// (container id, container name, pod, resource, value).
pub fn scaled_values<'a>(
    pod: &'a crate::koordlet::informer::PodMeta,
    updates: impl IntoIterator<Item = &'a super::executor::Update>,
) -> Vec<crate::koordlet::metrics::ScaledCfs> {
    use crate::os::Resource;
    let mut out = Vec::new();
    for u in updates {
        let (Resource::CfsBurst | Resource::CfsQuota) = u.resource else {
            continue;
        };
        let Some(c) = pod.containers.iter().find(|c| c.dir == u.dir) else {
            continue;
        };
        let Ok(value) = u.value.trim().parse::<f64>() else {
            continue;
        };
        out.push(crate::koordlet::metrics::ScaledCfs {
            namespace: pod.namespace.clone(),
            pod: pod.name.clone(),
            container_id: crate::koordlet::informer::PodMeta::container_id(c).to_string(),
            container: c.name.clone(),
            burst: u.resource == Resource::CfsBurst,
            value,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{Cgroups, Driver, Version};
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
            "image": "x", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}})
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

    fn unlimited(_: &CgroupDir) -> Option<i64> {
        Some(-1)
    }

    #[test]
    fn burst_from_limits_and_policies() {
        assert_eq!(burst_us(2000, 1000), 2_000_000);
        let p = meta(json!({}), json!({}), &[Some("2"), Some("500m"), None]);
        // 200 %: 2 cores → 400000 µs, 0.5 core → 100000 µs, no limit → 0.
        assert_eq!(
            values(&updates(&states("cpuBurstOnly"), &p, &unlimited)),
            vec![
                vec!["500000".to_string()],
                vec!["400000".into(), "100000".into(), "0".into()]
            ]
        );
        assert_eq!(
            values(&updates(&states("none"), &p, &unlimited))[0],
            vec!["0".to_string()]
        );
        let opted_in = meta(
            json!({}),
            json!({"koordinator.sh/cpuBurst": "{\"policy\": \"auto\", \"cpuBurstPercent\": 100}"}),
            &[Some("1")],
        );
        assert_eq!(
            values(&updates(&states("none"), &opted_in, &unlimited)),
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
                    ),
                    &unlimited
                )
                .is_empty(),
                "{q}"
            );
        }
    }

    fn cfs_states(policy: &str, period: i64) -> States {
        let slo = json!({"metadata": {"name": "n"}, "spec": {"cpuBurstStrategy": {"policy": policy,
            "cpuBurstPercent": 50, "cfsQuotaBurstPercent": 300, "cfsQuotaBurstPeriodSeconds": period}}});
        States {
            node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
            ..Default::default()
        }
    }

    fn plan(
        states: &States,
        pod: &PodMeta,
        node: NodeBurstState,
        quotas: &HashMap<String, i64>,
        throttled: f64,
        limiters: &mut HashMap<String, Limiter>,
    ) -> Vec<(Resource, String, String)> {
        let quota = |d: &CgroupDir| quotas.get(d.as_str()).copied();
        let env = CfsEnv {
            node,
            now: 1.0,
            quota: &quota,
            throttled: &|_| Some(throttled),
            usage: &|_| Some(2.5),
            fill: &|| 0.0,
        };
        cfs_updates(states, pod, &env, limiters)
            .into_iter()
            .map(|u| (u.resource, u.dir.as_str().to_string(), u.value))
            .collect()
    }

    #[test]
    fn throttled_containers_scale_their_quota_in_kernel_order() {
        let p = meta(json!({}), json!({}), &[Some("2")]);
        let (pod_dir, ctr_dir) = (
            p.dir.as_str().to_string(),
            p.containers[0].dir.as_str().to_string(),
        );
        let quotas = HashMap::from([(pod_dir.clone(), 200_000), (ctr_dir.clone(), 200_000)]);
        let mut lim = HashMap::new();
        let auto = cfs_states("auto", -1);
        // Throttled on an idle node: ×1.2, pod first, burst (50 % of 2 cores) last.
        assert_eq!(
            plan(&auto, &p, NodeBurstState::Idle, &quotas, 0.3, &mut lim),
            vec![
                (Resource::CfsQuota, pod_dir.clone(), "240000".into()),
                (Resource::CfsQuota, ctr_dir.clone(), "240000".into()),
                (Resource::CfsBurst, ctr_dir.clone(), "100000".into()),
            ]
        );
        // Not throttled: nothing to write. Cooling node: no growth either.
        assert!(plan(&auto, &p, NodeBurstState::Idle, &quotas, 0.0, &mut lim).is_empty());
        assert!(plan(&auto, &p, NodeBurstState::Cooling, &quotas, 0.3, &mut lim).is_empty());
        // Overloaded node with a raised quota: ×0.8 back, burst first, pod last.
        let raised = HashMap::from([(pod_dir.clone(), 400_000), (ctr_dir.clone(), 400_000)]);
        assert_eq!(
            plan(&auto, &p, NodeBurstState::Overload, &raised, 0.3, &mut lim),
            vec![
                (Resource::CfsBurst, ctr_dir.clone(), "100000".into()),
                (Resource::CfsQuota, ctr_dir.clone(), "320000".into()),
                (Resource::CfsQuota, pod_dir.clone(), "320000".into()),
            ]
        );
        // cpuBurstOnly resets a raised quota to the limit; burst is untouched there.
        let only = cfs_states("cpuBurstOnly", -1);
        assert_eq!(
            plan(&only, &p, NodeBurstState::Idle, &raised, 0.3, &mut lim),
            vec![
                (Resource::CfsBurst, ctr_dir.clone(), "100000".into()),
                (Resource::CfsQuota, ctr_dir.clone(), "200000".into()),
                (Resource::CfsQuota, pod_dir.clone(), "200000".into()),
            ]
        );
        // Unlimited pod quota (-1) is left alone; the container still grows.
        let no_pod = HashMap::from([(pod_dir.clone(), -1), (ctr_dir.clone(), 200_000)]);
        assert_eq!(
            plan(&auto, &p, NodeBurstState::Idle, &no_pod, 0.3, &mut lim).len(),
            2
        );
    }

    #[test]
    fn the_limiter_takes_the_burst_back() {
        let p = meta(json!({}), json!({}), &[Some("2")]);
        let (pod_dir, ctr_dir) = (
            p.dir.as_str().to_string(),
            p.containers[0].dir.as_str().to_string(),
        );
        let raised = HashMap::from([(pod_dir.clone(), 300_000), (ctr_dir.clone(), 300_000)]);
        // A 10 s budget that starts empty; using 125 % of the limit spends it: shrink.
        let s = cfs_states("cfsQuotaBurstOnly", 10);
        let mut lim = HashMap::new();
        let out = plan(&s, &p, NodeBurstState::Idle, &raised, 0.3, &mut lim);
        assert_eq!(
            out,
            vec![
                (Resource::CfsQuota, ctr_dir.clone(), "240000".into()),
                (Resource::CfsQuota, pod_dir.clone(), "240000".into()),
            ]
        );
        assert!(lim.contains_key("x0"), "one limiter per container id");
    }

    #[test]
    fn burst_is_capped_at_the_quota() {
        let p = meta(json!({}), json!({}), &[Some("2")]);
        let q = |_: &CgroupDir| Some(200_000);
        // 1000 % of 2 cores would be 2,000,000 µs; the kernel refuses more than the quota.
        let s = States {
            node_slo: Some(Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "n"},
                "spec": {"cpuBurstStrategy": {"policy": "auto"}}}))
                .unwrap(),
            )),
            ..Default::default()
        };
        assert_eq!(
            values(&updates(&s, &p, &q)),
            vec![vec!["200000".to_string()], vec!["200000".into()]]
        );
    }
}
