//! The NodeMetric report from the store: policy, window averages, aggregates, pods, GPUs,
//! NUMA nodes and the memory collect policies.

use std::sync::Arc;

use super::*;
use crate::koordlet::store::{Point, StoreOptions};

/// The node's one pod, `ns/web` (uid `u1`, LS).
fn web_pod() -> States {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1",
        "labels": {"koordinator.sh/qosClass": "LS"}}, "spec": {"containers": []}}),
    )
    .unwrap();
    let cg = crate::os::Cgroups::new(
        "/x",
        crate::os::Version::V1,
        crate::os::Driver::Cgroupfs,
        "",
    );
    States {
        pods: Arc::new(vec![
            crate::koordlet::informer::PodMeta::new(pod, &cg).unwrap(),
        ]),
        ..Default::default()
    }
}

/// A minute's window and report, memory as `memory_policy`.
fn minute(memory_policy: String) -> Policy {
    Policy {
        aggregate: Duration::from_secs(60),
        interval: Duration::from_secs(60),
        durations: vec![Duration::from_secs(60)],
        memory_policy,
    }
}

fn nm(spec: serde_json::Value) -> NodeMetric {
    serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}, "spec": spec})).unwrap()
}

const FLOORS: Floors = Floors {
    min_interval: Duration::from_secs(30),
    max_interval: None,
    min_aggregate: Duration::from_secs(60),
};

#[test]
fn policy_defaults_and_floors() {
    let p = policy(None, FLOORS);
    assert_eq!((p.aggregate.as_secs(), p.interval.as_secs()), (300, 60));
    assert_eq!(p.durations.len(), 3);
    let custom = nm(
        serde_json::json!({"metricCollectPolicy": {"aggregateDurationSeconds": 10, "reportIntervalSeconds": 5,
        "nodeAggregatePolicy": {"durations": ["1m0s", "bogus"]}}}),
    );
    let p = policy(Some(&custom), FLOORS);
    assert_eq!(
        (p.aggregate.as_secs(), p.interval.as_secs()),
        (60, 30),
        "floors apply"
    );
    assert_eq!(p.durations, vec![Duration::from_secs(60)]);
    // Embedded mode: a 15 s ceiling over the manager's 60 s, the floor lowered to it.
    let embedded = Floors {
        min_interval: Duration::from_secs(15),
        max_interval: Some(Duration::from_secs(15)),
        ..FLOORS
    };
    assert_eq!(policy(None, embedded).interval.as_secs(), 15);
    assert_eq!(
        policy(Some(&custom), embedded).interval.as_secs(),
        15,
        "the floor wins"
    );
}

#[test]
fn status_from_samples() {
    let store = MetricStore::temporary(StoreOptions::default()).unwrap();
    let now = 1_000_000i64;
    let mut samples = Vec::new();
    for i in 0..60 {
        let ts = now - 59_000 + i * 1000;
        samples.push((
            SeriesKey::node(MetricKind::NodeCpuUsage),
            Point {
                ts,
                value: 1.0 + (i % 2) as f64,
            },
        ));
        samples.push((
            SeriesKey::node(MetricKind::NodeMemoryUsage),
            Point { ts, value: 1e9 },
        ));
        samples.push((
            SeriesKey::pod(MetricKind::PodCpuUsage, "u1"),
            Point { ts, value: 0.25 },
        ));
        samples.push((
            SeriesKey::pod(MetricKind::PodMemoryUsage, "u1"),
            Point { ts, value: 1e8 },
        ));
        samples.push((
            SeriesKey::node(MetricKind::NodeMemoryWithPageCache),
            Point { ts, value: 3e9 },
        ));
        samples.push((
            SeriesKey::pod(MetricKind::PodMemoryWithPageCache, "u1"),
            Point { ts, value: 4e8 },
        ));
        use crate::koordlet::collectors::gpu::key;
        for (kind, value) in [
            (MetricKind::NodeGpuCoreUsage, 30.0 + (i % 2) as f64 * 20.0),
            (MetricKind::NodeGpuMemoryUsage, 20.0 * (1u64 << 30) as f64),
            (MetricKind::NodeGpuMemoryTotal, 80.0 * (1u64 << 30) as f64),
        ] {
            samples.push((key(kind, 1, "GPU-1"), Point { ts, value }));
        }
        // Pod u1's processes on GPU 1: 10 % of its SMs, 8 GiB.
        use crate::koordlet::collectors::gpu::owner_key;
        for (kind, value) in [
            (MetricKind::PodGpuCoreUsage, 10.0),
            (MetricKind::PodGpuMemoryUsage, 8.0 * (1u64 << 30) as f64),
        ] {
            let k = owner_key(kind, ("pod_uid", "u1"), 1, "GPU-1");
            samples.push((k, Point { ts, value }));
        }
        for n in 0..2 {
            samples.push((
                SeriesKey::numa(MetricKind::NodeNumaCpuUsage, n),
                Point { ts, value: 0.5 },
            ));
            samples.push((
                SeriesKey::numa(MetricKind::NodeNumaMemoryUsage, n),
                Point { ts, value: 5e8 },
            ));
            if n == 0 {
                samples.push((
                    SeriesKey::numa(MetricKind::SysNumaCpuUsage, n),
                    Point { ts, value: 0.25 },
                ));
                samples.push((
                    SeriesKey::numa(MetricKind::SysNumaMemoryUsage, n),
                    Point { ts, value: 1e8 },
                ));
            }
        }
    }
    store.insert(&samples).unwrap();
    let states = web_pod();
    let p = Policy {
        durations: vec![Duration::from_secs(60), Duration::from_secs(600)],
        ..minute(String::new())
    };
    let st = build_status(&store, &states, &p, now, None).unwrap();
    let info = st.node_metric.unwrap();
    let gpus = info.node_usage.devices.clone().unwrap();
    let gpu = &gpus[0];
    assert_eq!((gpu.minor, gpu.uuid.as_deref()), (Some(1), Some("GPU-1")));
    let r = gpu.resources.clone().unwrap();
    assert_eq!(r["koordinator.sh/gpu-core"].0, "40", "window average");
    assert_eq!(r["koordinator.sh/gpu-memory"].0, (20u64 << 30).to_string());
    assert_eq!(r["koordinator.sh/gpu-memory-ratio"].0, "25");
    let pod = &st.pods_metric.as_ref().unwrap()[0];
    let devices = pod.pod_usage.devices.clone().expect("the pod's GPU usage");
    let r = devices[0].resources.clone().unwrap();
    assert_eq!(devices[0].minor, Some(1));
    assert_eq!(r["koordinator.sh/gpu-core"].0, "10");
    assert_eq!(r["koordinator.sh/gpu-memory"].0, (8u64 << 30).to_string());
    assert_eq!(
        r["koordinator.sh/gpu-memory-ratio"].0, "10",
        "of the GPU's 80 GiB"
    );
    let numa = info.numa_usages.clone().unwrap();
    assert_eq!(numa.len(), 2);
    assert_eq!(
        (
            numa[1].numa_node_id,
            numa[1].node_usage.get("cpu").unwrap().0.as_str()
        ),
        (1, "500m")
    );
    let system = &numa[0].system_usage;
    assert_eq!(system.get("cpu").unwrap().0, "250m");
    assert_eq!(system.get("memory").unwrap().0, "100000000");
    assert!(
        numa[1].system_usage.resources.is_none(),
        "no system samples there"
    );
    assert_eq!(info.node_usage.get("cpu").unwrap().0, "1500m");
    assert_eq!(info.node_usage.get("memory").unwrap().0, "1000000000");
    let aggs = info.aggregated_node_usages.unwrap();
    assert_eq!(aggs[0].duration.as_deref(), Some("1m0s"));
    assert_eq!(
        aggs[0].usage.as_ref().unwrap()["p90"].get("cpu").unwrap().0,
        "2"
    );
    assert!(
        aggs[1].usage.as_ref().unwrap()["avg"]
            .resources
            .as_ref()
            .unwrap()
            .is_empty(),
        "59 s of data is under half of 10 min"
    );
    let pods = st.pods_metric.unwrap();
    assert_eq!(
        (
            pods[0].name.as_deref(),
            pods[0].qos.as_deref(),
            pods[0].priority.as_deref()
        ),
        (Some("web"), Some("LS"), Some("koord-prod"))
    );
    assert_eq!(pods[0].pod_usage.get("cpu").unwrap().0, "250m");
    assert_eq!(pods[0].pod_usage.get("memory").unwrap().0, "100000000");
    assert!(st.update_time.is_some());
    // nodeMemoryCollectPolicy: usageWithPageCache reports the series with page cache.
    let cached = Policy {
        memory_policy: WITH_PAGE_CACHE.into(),
        ..p
    };
    let st = build_status(&store, &states, &cached, now, None).unwrap();
    let node = st.node_metric.unwrap().node_usage;
    assert_eq!(node.get("memory").unwrap().0, "3000000000");
    let pods = st.pods_metric.unwrap();
    assert_eq!(pods[0].pod_usage.get("memory").unwrap().0, "400000000");
}

#[test]
fn hot_page_cache_once_kidled_reports_else_without_page_cache() {
    let store = MetricStore::temporary(StoreOptions::default()).unwrap();
    let now = 1_000_000i64;
    let mut samples = Vec::new();
    for i in 0..10 {
        let ts = now - 9_000 + i * 1000;
        for (k, v) in [
            (SeriesKey::node(MetricKind::NodeCpuUsage), 1.0),
            (SeriesKey::node(MetricKind::NodeMemoryUsage), 1e9),
            (SeriesKey::pod(MetricKind::PodCpuUsage, "u1"), 0.5),
            (SeriesKey::pod(MetricKind::PodMemoryUsage, "u1"), 1e8),
        ] {
            samples.push((k, Point { ts, value: v }));
        }
    }
    store.insert(&samples).unwrap();
    let states = web_pod();
    let p = minute(WITH_HOT_PAGE_CACHE.into());
    let memory = |st: &NodeMetricStatus| {
        let node = st
            .node_metric
            .as_ref()
            .unwrap()
            .node_usage
            .get("memory")
            .unwrap()
            .0
            .clone();
        let pod = st.pods_metric.as_ref().unwrap()[0]
            .pod_usage
            .get("memory")
            .unwrap()
            .0
            .clone();
        (node, pod)
    };
    let st = build_status(&store, &states, &p, now, None).unwrap();
    assert_eq!(
        memory(&st),
        ("1000000000".into(), "100000000".into()),
        "no kidled yet"
    );
    let mut hot = Vec::new();
    for i in 0..10 {
        let ts = now - 9_000 + i * 1000;
        hot.push((
            SeriesKey::node(MetricKind::NodeMemoryWithHotPage),
            Point { ts, value: 2e9 },
        ));
        hot.push((
            SeriesKey::pod(MetricKind::PodMemoryWithHotPage, "u1"),
            Point { ts, value: 3e8 },
        ));
    }
    store.insert(&hot).unwrap();
    let st = build_status(&store, &states, &p, now, None).unwrap();
    assert_eq!(memory(&st), ("2000000000".into(), "300000000".into()));
}
