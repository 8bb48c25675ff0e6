//! BEMemoryEvict against the embedded API server: with node memory (a fake usage) over
//! the NodeSLO threshold, the koordlet evicts the right BE pods through the Eviction API
//! with a Warning event, never an LS pod, and not again while the eviction is recent.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::TestApi;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use koord::koordlet::informer::{PodMeta, States};
use koord::koordlet::qos::evictor::Evictor;
use koord::koordlet::qos::memoryevict::memory_pass;
use koord::os::{Cgroups, Driver, Version};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

const GIB: i64 = 1 << 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_over_threshold_evicts_be_pods_by_priority_and_usage() {
    let _cpu = common::cpu_exclusive();
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}, "status": {"capacity": {"memory": "10Gi"}, "allocatable": {"memory": "10Gi"}}})).unwrap();
    Api::<Node>::all(c.clone())
        .create(&pp, &node)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut created = Vec::new();
    for (name, qos, class) in [
        ("web", "LS", "koord-prod"),
        ("be-big", "BE", "koord-batch"),
        ("be-small", "BE", "koord-batch"),
        ("be-free", "BE", "koord-free"),
    ] {
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": {"koordinator.sh/qosClass": qos}},
            "spec": {"nodeName": "n1", "priorityClassName": class, "containers": [{"name": "c", "image": "x"}]}})).unwrap();
        created.push(pods.create(&pp, &p).await.unwrap());
    }
    let tmp = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(tmp.path(), Version::V1, Driver::Cgroupfs, "");
    let metas: Vec<PodMeta> = created
        .iter()
        .map(|p| PodMeta::new(p.clone(), &cg).unwrap())
        .collect();
    let uid = |name: &str| metas.iter().find(|m| m.name == name).unwrap().uid.clone();
    let slo = json!({"metadata": {"name": "n1"}, "spec": {"resourceUsedThresholdWithBE": {"enable": true, "memoryEvictThresholdPercent": 70}}});
    let states = States {
        node: Some(Arc::new(
            serde_json::from_value(serde_json::to_value(&node).unwrap()).unwrap(),
        )),
        pods: Arc::new(metas.clone()),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        node_metric: None,
        slo_view: Default::default(),
    };
    let used: HashMap<String, i64> = HashMap::from([
        (uid("web"), 4 * GIB),
        (uid("be-big"), 2 * GIB),
        (uid("be-small"), GIB / 2),
        (uid("be-free"), GIB / 4),
    ]);
    let evictor = Evictor::default();

    assert!(
        memory_pass(&c, &evictor, &states, Some(6 * GIB), &used)
            .await
            .is_empty(),
        "60 % is under the threshold"
    );
    // 80 % of 10 Gi: release down to 68 % = 1.2 Gi. koord-free goes first (lowest priority),
    // then the batch pod using the most memory.
    let evicted = memory_pass(&c, &evictor, &states, Some(8 * GIB), &used).await;
    assert_eq!(evicted, ["default/be-free", "default/be-big"]);
    for name in ["be-free", "be-big"] {
        let gone = pods
            .get_opt(name)
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some());
        assert!(gone, "{name} evicted");
    }
    for name in ["web", "be-small"] {
        assert!(
            pods.get(name)
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_none(),
            "{name} untouched"
        );
    }
    let events = Api::<Event>::namespaced(c.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let e = events
        .items
        .iter()
        .find(|e| e.involved_object.name.as_deref() == Some("be-big"))
        .expect("an event on the evicted pod");
    assert_eq!(e.reason.as_deref(), Some("evictPodSuccess"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    let msg = e.message.as_deref().unwrap();
    assert!(
        msg.starts_with("evict Pod:default/be-big, reason: evicted, message: trigger by koordlet feature BEMemoryEvict, kill pod: be-big"),
        "Koordinator's message: {msg}"
    );
    assert!(msg.contains("80%"), "with the numbers: {msg}");
    // The same pressure again a second later: the recent evictions count, nothing new.
    let again = memory_pass(&c, &evictor, &states, Some(8 * GIB), &used).await;
    assert!(again.is_empty(), "{again:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starved_be_pods_are_evicted_by_satisfaction() {
    let _cpu = common::cpu_exclusive();
    use koord::koordlet::qos::cpuevict::BeCpu;
    use koord::koordlet::qos::cpuevict::cpu_pass;
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "16"}, "allocatable": {"cpu": "16"}}})).unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut created = Vec::new();
    for (name, class, req) in [
        ("be-a", "koord-batch", "6000"),
        ("be-b", "koord-batch", "4000"),
        ("web", "koord-prod", "0"),
    ] {
        let qos = if name == "web" { "LS" } else { "BE" };
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": {"koordinator.sh/qosClass": qos}},
            "spec": {"nodeName": "n1", "priorityClassName": class, "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"kubernetes.io/batch-cpu": req}}}]}})).unwrap();
        created.push(pods.create(&pp, &p).await.unwrap());
    }
    let tmp = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(tmp.path(), Version::V1, Driver::Cgroupfs, "");
    let metas: Vec<PodMeta> = created
        .iter()
        .map(|p| PodMeta::new(p.clone(), &cg).unwrap())
        .collect();
    let slo = json!({"metadata": {"name": "n1"}, "spec": {"resourceUsedThresholdWithBE": {"enable": true,
        "cpuEvictBESatisfactionLowerPercent": 40, "cpuEvictBESatisfactionUpperPercent": 60}}});
    let states = States {
        node: Some(Arc::new(node)),
        pods: Arc::new(metas.clone()),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        node_metric: None,
        slo_view: Default::default(),
    };
    let used: HashMap<String, f64> = metas
        .iter()
        .map(|m| {
            (
                m.uid.clone(),
                if m.name == "be-b" { 1900.0 } else { 1000.0 },
            )
        })
        .collect();
    let evictor = Evictor::default();
    // Requests 10 cores, suppressed to 3, using 2.9: satisfaction 30 % ≤ 40 % → release 3 cores.
    let starved = BeCpu {
        usage: 2900.0,
        request: 10_000.0,
        limit: 3000.0,
    };
    let evicted = cpu_pass(&c, &evictor, &states, Some(starved), Some(starved), &used).await;
    assert_eq!(
        evicted,
        ["default/be-b"],
        "the pod using most of its request goes first; its 4 cores cover 3"
    );
    assert!(
        pods.get("web")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    // Enough CPU again: nothing happens.
    let fine = BeCpu {
        limit: 8000.0,
        ..starved
    };
    assert!(
        cpu_pass(&c, &evictor, &states, Some(fine), Some(fine), &used)
            .await
            .is_empty()
    );
    // Too few samples in the window (None): nothing happens.
    assert!(
        cpu_pass(&c, &evictor, &states, None, Some(starved), &used)
            .await
            .is_empty()
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_evict_takes_only_opted_in_pods() {
    let _cpu = common::cpu_exclusive();
    use koord::koordlet::qos::usageevict::usage_pass;
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut created = Vec::new();
    for (name, opted) in [("opted", true), ("protected", false)] {
        let mut labels = json!({"koordinator.sh/qosClass": "LS"});
        if opted {
            labels["koordinator.sh/eviction-enabled"] = "true".into();
        }
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"nodeName": "n1", "priorityClassName": "koord-mid", "containers": [{"name": "c", "image": "x"}]}})).unwrap();
        created.push(pods.create(&pp, &p).await.unwrap());
    }
    let tmp = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(tmp.path(), Version::V1, Driver::Cgroupfs, "");
    let metas: Vec<PodMeta> = created
        .iter()
        .map(|p| PodMeta::new(p.clone(), &cg).unwrap())
        .collect();
    let slo = json!({"metadata": {"name": "n1"}, "spec": {"resourceUsedThresholdWithBE": {"enable": true,
        "memoryEvictThresholdPercent": 70, "evictEnabledPriorityThreshold": 7999}}});
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    let states = States {
        node: Some(Arc::new(node)),
        pods: Arc::new(metas.clone()),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        node_metric: None,
        slo_view: Default::default(),
    };
    let used: HashMap<String, i64> = metas.iter().map(|m| (m.uid.clone(), 3 * GIB)).collect();
    let evicted = usage_pass(
        &c,
        &Evictor::default(),
        &states,
        "MemoryEvict",
        10 * GIB,
        Some(8 * GIB),
        &used,
    )
    .await;
    assert_eq!(evicted, ["default/opted"]);
    assert!(
        pods.get("protected")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_allocatable_evict_releases_the_overcommitted_batch_account() {
    let _cpu = common::cpu_exclusive();
    use koord::koordlet::qos::allocatableevict::allocatable_pass;
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut created = Vec::new();
    // batch-cpu requests 4000 + 5000 + 3000 = 12000 on a 10000 account (120 % > 110 %):
    // release down to 100 % = 2000. Largest request first among opted-in pods; "pinned"
    // did not opt in.
    for (name, req, opted) in [
        ("big", 5000, true),
        ("small", 3000, true),
        ("pinned", 4000, false),
    ] {
        let mut labels = json!({"koordinator.sh/qosClass": "BE"});
        if opted {
            labels["koordinator.sh/eviction-enabled"] = "true".into();
        }
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"nodeName": "n1", "priorityClassName": "koord-batch", "priority": 5000,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"kubernetes.io/batch-cpu": req.to_string()}}}]}})).unwrap();
        created.push(pods.create(&pp, &p).await.unwrap());
    }
    let tmp = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(tmp.path(), Version::V1, Driver::Cgroupfs, "");
    let metas: Vec<PodMeta> = created
        .iter()
        .map(|p| PodMeta::new(p.clone(), &cg).unwrap())
        .collect();
    let slo = json!({"metadata": {"name": "n1"}, "spec": {"resourceUsedThresholdWithBE": {"enable": true,
        "cpuAllocatableEvictThresholdPercent": 110, "cpuAllocatableEvictLowerPercent": 100,
        "allocatableEvictPriorityThreshold": 5999}}});
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"kubernetes.io/batch-cpu": "10000"}}}),
    )
    .unwrap();
    let states = States {
        node: Some(Arc::new(node)),
        pods: Arc::new(metas),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        node_metric: None,
        slo_view: Default::default(),
    };
    let evictor = Evictor::default();
    let evicted = allocatable_pass(&c, &evictor, &states, true).await;
    assert_eq!(evicted, ["default/big"]);
    for name in ["small", "pinned"] {
        assert!(
            pods.get(name)
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_none(),
            "{name} untouched"
        );
    }
    assert!(
        allocatable_pass(&c, &evictor, &states, true)
            .await
            .is_empty(),
        "the evicted pod's request counts while it goes"
    );
    assert!(
        allocatable_pass(&c, &evictor, &states, false)
            .await
            .is_empty(),
        "memory settings absent: MemoryAllocatableEvict does nothing"
    );
    api.stop().await;
}
