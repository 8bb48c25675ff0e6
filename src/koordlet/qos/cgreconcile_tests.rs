use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::os::{CgroupDir, Driver, Version};

fn pod(
    uid: &str,
    qos_label: &str,
    kube: &str,
    req: &str,
    lim: Option<&str>,
    ann: Option<&str>,
) -> PodMeta {
    let (rname, be) = if qos_label == "BE" {
        ("kubernetes.io/batch-memory", true)
    } else {
        ("memory", false)
    };
    let _ = be;
    let mut limits = json!({});
    if let Some(l) = lim {
        limits[rname] = l.into();
    }
    let mut meta = json!({"name": uid, "namespace": "d", "uid": uid, "labels": {"koordinator.sh/qosClass": qos_label}});
    if let Some(a) = ann {
        meta["annotations"] = json!({"koordinator.sh/memoryQOS": a});
    }
    let p = json!({"metadata": meta, "spec": {"containers": [{"name": "c", "resources": {"requests": {rname: req}, "limits": limits}}]},
        "status": {"qosClass": kube, "containerStatuses": [{"name": "c", "containerID": format!("containerd://{uid}c"), "image": "x", "imageID": "", "ready": true, "restartCount": 0}]}});
    PodMeta::new(serde_json::from_value(p).unwrap(), &cg()).unwrap()
}

fn cg() -> Cgroups {
    Cgroups::new("/r", Version::V1, Driver::Cgroupfs, "")
}

fn states(ls: Value, pods: Vec<PodMeta>) -> States {
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {"lsClass": {"memoryQOS": ls}}}});
    let node = json!({"metadata": {"name": "n"}, "status": {"allocatable": {"memory": "8Gi"}}});
    States {
        node: Some(Arc::new(serde_json::from_value(node).unwrap())),
        pods: Arc::new(pods),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        node_metric: None,
        slo_view: Default::default(),
    }
}

fn value(levels: &[Vec<Update>], res: Resource, dir: &CgroupDir) -> Option<String> {
    levels
        .iter()
        .flatten()
        .find(|u| u.resource == res && &u.dir == dir)
        .map(|u| u.value.clone())
}

#[test]
fn formulas() {
    let q = MemoryQOS {
        min_limit_percent: Some(50),
        low_limit_percent: Some(20),
        throttling_percent: Some(80),
        ..none()
    };
    // min 512 Mi, low raised to min, high = 1 Gi + 80 % of 1 Gi, page aligned.
    assert_eq!(
        min_low_high(&q, 1 << 30, 2 << 30),
        (
            512 << 20,
            512 << 20,
            (1 << 30) + ((1i64 << 30) * 80 / 100) / 4096 * 4096
        )
    );
    assert_eq!(
        min_low_high(&none(), 1 << 30, 2 << 30),
        (0, 0, -1),
        "off: nothing protected, no throttling"
    );
}

#[test]
fn enabled_class_sets_pods_containers_and_qos_sums() {
    let ls = pod("ls", "LS", "Burstable", "1Gi", Some("2Gi"), None);
    let ls2 = pod(
        "ls2",
        "LS",
        "Burstable",
        "512Mi",
        None,
        Some("{\"policy\": \"none\"}"),
    );
    let be = pod("be", "BE", "BestEffort", "1Gi", None, None);
    let s = states(
        json!({"enable": true, "minLimitPercent": 100, "lowLimitPercent": 100, "throttlingPercent": 50}),
        vec![ls.clone(), ls2.clone(), be.clone()],
    );
    let l = updates(&s, &cg());
    assert_eq!(
        value(&l, Resource::MemoryMin, &ls.containers[0].dir).as_deref(),
        Some("1073741824")
    );
    assert_eq!(
        value(&l, Resource::MemoryHigh, &ls.containers[0].dir).as_deref(),
        Some("1610612736"),
        "1 Gi + 50 % of 1 Gi"
    );
    assert_eq!(
        value(&l, Resource::MemoryMin, &ls2.dir).as_deref(),
        Some("0"),
        "annotation policy none"
    );
    assert_eq!(
        value(&l, Resource::MemoryMin, &be.dir).as_deref(),
        Some("0"),
        "BE class not enabled"
    );
    let cgs = cg();
    assert_eq!(
        value(&l, Resource::MemoryMin, &cgs.qos_dir(KubeQoS::Burstable)).as_deref(),
        Some("1073741824")
    );
    assert_eq!(
        value(&l, Resource::MemoryMin, &cgs.kubepods()).as_deref(),
        Some("1073741824"),
        "root = Σ all pods"
    );
    assert_eq!(
        value(&l, Resource::MemoryWmarkRatio, &ls.dir).as_deref(),
        Some("0")
    );
    let auto_pod = pod(
        "a",
        "LS",
        "Burstable",
        "1Gi",
        None,
        Some("{\"policy\": \"auto\"}"),
    );
    let s = states(json!({"enable": false}), vec![auto_pod.clone()]);
    assert_eq!(
        value(
            &updates(&s, &cg()),
            Resource::MemoryWmarkRatio,
            &auto_pod.dir
        )
        .as_deref(),
        Some("95"),
        "auto = compiled class values"
    );
}

#[test]
fn the_class_page_cache_limit_reaches_its_pods() {
    let ls = pod("p", "LS", "Burstable", "1Gi", Some("2Gi"), None);
    let cfg = json!({"enable": true, "pageCacheLimitPercent": 50, "pageCacheReclaimSync": true});
    let l = updates(&states(cfg, vec![ls.clone()]), &cg());
    let get = |r| value(&l, r, &ls.dir);
    assert_eq!(
        get(Resource::MemoryPageCacheLimitEnable).as_deref(),
        Some("1")
    );
    assert_eq!(
        get(Resource::MemoryPageCacheLimitSize).as_deref(),
        Some("1073741824"),
        "50 % of the 2 Gi limit"
    );
    assert_eq!(
        get(Resource::MemoryPageCacheLimitSync).as_deref(),
        Some("1")
    );
    let off = updates(&states(json!({"enable": false}), vec![ls.clone()]), &cg());
    assert_eq!(
        value(&off, Resource::MemoryPageCacheLimitSize, &ls.dir),
        None
    );
}
