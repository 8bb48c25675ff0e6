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
        node: &|| node,
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
fn an_unset_container_quota_does_not_double_the_pod_quota() {
    // Two 1-CPU containers: the kubelet's pod quota is 200000; one container's quota was
    // unset (-1). Its limit back is 100000, which the pod quota already counts.
    let p = meta(json!({}), json!({}), &[Some("1"), Some("1")]);
    let pod_dir = p.dir.as_str().to_string();
    let (c0, c1) = (
        p.containers[0].dir.as_str().to_string(),
        p.containers[1].dir.as_str().to_string(),
    );
    let quotas = HashMap::from([(pod_dir.clone(), 200_000), (c0.clone(), -1), (c1, 100_000)]);
    let only = cfs_states("cpuBurstOnly", -1);
    let out = plan(
        &only,
        &p,
        NodeBurstState::Idle,
        &quotas,
        0.0,
        &mut HashMap::new(),
    );
    let quota_of = |dir: &str| {
        out.iter()
            .find(|(r, d, _)| *r == Resource::CfsQuota && d == dir)
            .map(|(_, _, v)| v.clone())
    };
    assert_eq!(quota_of(&c0).as_deref(), Some("100000"));
    assert_eq!(
        quota_of(&pod_dir).as_deref(),
        Some("200000"),
        "was 300001: target − (−1) added to the pod"
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

/// Koordinator records `koordlet_container_scaled_cfs_burst_us` where the write went
/// through, not where the kernel lacks `cpu.cfs_burst_us`.
#[test]
fn scaled_burst_is_recorded_where_the_kernel_has_the_knob() {
    use crate::koordlet::qos::executor::Executor;
    use crate::koordlet::qos::hookreconcile::tests::test_ctx;
    use crate::koordlet::qos::runner::Strategy;
    let dir = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(dir.path(), Version::V1, Driver::Cgroupfs, "");
    let pod_json = |uid: &str| {
        json!({"metadata": {"name": uid, "namespace": "d", "uid": uid},
            "spec": {"containers": [{"name": "c0", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running", "qosClass": "Burstable", "containerStatuses": [{"name": "c0",
                "containerID": format!("containerd://{uid}c"), "image": "x", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {}}}]}})
    };
    let with = PodMeta::new(serde_json::from_value(pod_json("with")).unwrap(), &cg).unwrap();
    let without = PodMeta::new(serde_json::from_value(pod_json("without")).unwrap(), &cg).unwrap();
    for (p, burst) in [(&with, true), (&without, false)] {
        for d in [&p.dir, &p.containers[0].dir] {
            let path = dir.path().join("cpu").join(d.as_str());
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("cpu.cfs_quota_us"), "200000").unwrap();
            if burst {
                std::fs::write(path.join("cpu.cfs_burst_us"), "0").unwrap();
            }
        }
    }
    let mut st = states("cpuBurstOnly");
    st.pods = Arc::new(vec![with.clone(), without.clone()]);
    let ctx = test_ctx(&st);
    let ex = Arc::new(Executor::new(
        cg.clone(),
        std::time::Duration::from_secs(60),
    ));
    let host = crate::os::system::Host::new(dir.path().join("proc"), dir.path().join("sys"));
    let mut s = CpuBurst::new(ex, host);
    futures::executor::block_on(s.tick(&ctx, &st));
    let written = std::fs::read_to_string(
        dir.path()
            .join("cpu")
            .join(with.containers[0].dir.as_str())
            .join("cpu.cfs_burst_us"),
    )
    .unwrap();
    // 200 % of 2 cores is 400000 µs a period, capped at the 200000 µs quota.
    assert_eq!(written.trim(), "200000");
    let registry = crate::kernel::Metrics::new();
    let m = crate::koordlet::metrics::KoordletMetrics::register(&registry);
    let ctx = crate::koordlet::qos::context::QosCtx { metrics: m, ..ctx };
    futures::executor::block_on(s.tick(&ctx, &st));
    let scrape = registry.scrape();
    let pods: Vec<&str> = scrape
        .samples
        .iter()
        .filter(|x| x.metric == "koordlet_container_scaled_cfs_burst_us")
        .filter_map(|x| x.labels.get("pod_name"))
        .collect();
    assert_eq!(pods, vec!["with"]);
}
