use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::koordlet::informer::PodMeta;
use crate::os::{Cgroups, Driver, Version};

fn pod_json(uid: &str, qos_label: Option<&str>, kube_qos: &str, cid: &str) -> Value {
    let mut labels = json!({});
    if let Some(q) = qos_label {
        labels["koordinator.sh/qosClass"] = q.into();
    }
    json!({"metadata": {"name": uid, "namespace": "d", "uid": uid, "labels": labels},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running", "qosClass": kube_qos, "containerStatuses": [{"name": "c", "containerID": format!("containerd://{cid}"),
            "image": "x", "imageID": "", "ready": true, "restartCount": 0}]}})
}

struct Fixture {
    _dir: tempfile::TempDir,
    cg: Cgroups,
    states: States,
}

fn fixture(version: Version, policy: Option<&str>, enable: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(dir.path(), version, Driver::Cgroupfs, "");
    let pods: Vec<PodMeta> = [
        pod_json("ls", None, "Burstable", "c1"),
        pod_json("be", Some("BE"), "BestEffort", "c2"),
    ]
    .into_iter()
    .map(|v| PodMeta::new(serde_json::from_value(v).unwrap(), &cg).unwrap())
    .collect();
    let mut dirs = vec![cg.qos_dir(KubeQoS::BestEffort)];
    for p in &pods {
        dirs.push(p.dir.clone());
        dirs.extend(p.containers.iter().map(|c| c.dir.clone()));
    }
    for d in &dirs {
        for (sub, file, value) in [
            ("cpu", "cpu.cfs_quota_us", "-1"),
            ("cpuset", "cpuset.cpus", "0-3"),
        ] {
            let (base, file, value) = match version {
                Version::V1 => (dir.path().join(sub).join(d.as_str()), file, value),
                Version::V2 => (
                    dir.path().join(d.as_str()),
                    if file == "cpu.cfs_quota_us" {
                        "cpu.max"
                    } else {
                        file
                    },
                    if value == "-1" { "max 100000" } else { value },
                ),
            };
            std::fs::create_dir_all(&base).unwrap();
            std::fs::write(base.join(file), value).unwrap();
        }
    }
    let mut slo = json!({"metadata": {"name": "n"}, "spec": {"resourceUsedThresholdWithBE": {"enable": enable, "cpuSuppressThresholdPercent": 65}}});
    if let Some(p) = policy {
        slo["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressPolicy"] = p.into();
    }
    let node = json!({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}});
    let states = States {
        node: Some(Arc::new(serde_json::from_value(node).unwrap())),
        pods: Arc::new(pods),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        node_metric: None,
        slo_view: Default::default(),
    };
    Fixture {
        _dir: dir,
        cg,
        states,
    }
}

fn topo() -> Vec<Cpu> {
    (0..4)
        .map(|i| Cpu {
            id: i,
            core: i / 2,
            socket: 0,
            numa: 0,
        })
        .collect()
}

fn usage() -> Usage {
    Usage {
        node: Some(2500),
        pods: HashMap::from([("ls".to_string(), 1500), ("be".to_string(), 1000)]),
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

#[test]
fn cfs_quota_policy_writes_the_formula_once() {
    for version in [Version::V1, Version::V2] {
        let f = fixture(version, Some("cfsQuota"), true);
        let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
        let mut mem = Memory::default();
        let changes = pass(&f.states, &usage(), &topo(), &ex, &mut mem);
        // S = 4000 × 65 % − 1500 (LS) − 0 (system) = 1100 milli → 110000 µs.
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].new, "110000");
        let be = f.cg.qos_dir(KubeQoS::BestEffort);
        assert!(read(&f.cg.file(Resource::CfsQuota, &be)).starts_with("110000"));
        assert!(
            pass(&f.states, &usage(), &topo(), &ex, &mut mem).is_empty(),
            "nothing changes, nothing is written"
        );
    }
}

#[test]
fn cpuset_policy_shrinks_be_cpus_at_every_level() {
    let f = fixture(Version::V1, None, true);
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let mut mem = Memory::default();
    let changes = pass(&f.states, &usage(), &topo(), &ex, &mut mem);
    let be_pod = &f.states.pods[1];
    for d in [
        f.cg.qos_dir(KubeQoS::BestEffort),
        be_pod.dir.clone(),
        be_pod.containers[0].dir.clone(),
    ] {
        assert_eq!(
            read(&f.cg.file(Resource::CpusetCpus, &d)),
            "0-1",
            "{}",
            d.as_str()
        );
    }
    let ls_pod = &f.states.pods[0];
    assert_eq!(
        read(&f.cg.file(Resource::CpusetCpus, &ls_pod.dir)),
        "0-3",
        "LS pods are not touched"
    );
    assert_eq!(changes.iter().filter(|c| c.new == "0-1").count(), 3);
    assert!(pass(&f.states, &usage(), &topo(), &ex, &mut mem).is_empty());
}

#[test]
fn disabled_restores_once_and_missing_usage_does_nothing() {
    let f = fixture(Version::V1, Some("cfsQuota"), true);
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let mut mem = Memory::default();
    assert!(
        pass(&f.states, &Usage::default(), &topo(), &ex, &mut mem).is_empty(),
        "no node usage yet"
    );
    pass(&f.states, &usage(), &topo(), &ex, &mut mem);
    let off = fixture(Version::V1, Some("cfsQuota"), false);
    let ex_off = Executor::new(off.cg.clone(), Duration::from_secs(60));
    let be = off.cg.qos_dir(KubeQoS::BestEffort);
    std::fs::write(off.cg.file(Resource::CfsQuota, &be), "50000").unwrap();
    let mut mem = Memory::default();
    let restored = pass(&off.states, &usage(), &topo(), &ex_off, &mut mem);
    assert_eq!(restored.len(), 1);
    assert_eq!(read(&off.cg.file(Resource::CfsQuota, &be)), "-1");
    std::fs::write(off.cg.file(Resource::CfsQuota, &be), "50000").unwrap();
    assert!(
        pass(&off.states, &usage(), &topo(), &ex_off, &mut mem).is_empty(),
        "restored once, not every second"
    );
}
