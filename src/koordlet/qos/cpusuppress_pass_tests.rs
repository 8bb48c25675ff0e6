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
        host_apps: HashMap::new(),
    }
}

/// One round with Koordinator's defaults (no static kubelet policy, no BECPUManager).
fn round(states: &States, ex: &Executor, mem: &mut Memory) -> Vec<Change> {
    pass(states, &usage(), &topo(), ex, mem, NodePolicy::default())
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
        let changes = round(&f.states, &ex, &mut mem);
        // S = 4000 × 65 % − 1500 (LS) − 0 (system) = 1100 milli → 110000 µs.
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].new, "110000");
        let be = f.cg.qos_dir(KubeQoS::BestEffort);
        assert!(read(&f.cg.file(Resource::CfsQuota, &be)).starts_with("110000"));
        assert!(
            round(&f.states, &ex, &mut mem).is_empty(),
            "nothing changes, nothing is written"
        );
    }
}

#[test]
fn cpuset_policy_shrinks_be_cpus_at_every_level() {
    let f = fixture(Version::V1, None, true);
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let mut mem = Memory::default();
    let changes = round(&f.states, &ex, &mut mem);
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
    assert!(round(&f.states, &ex, &mut mem).is_empty());
}

#[test]
fn disabled_restores_once_and_missing_usage_does_nothing() {
    let f = fixture(Version::V1, Some("cfsQuota"), true);
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let mut mem = Memory::default();
    assert!(
        pass(
            &f.states,
            &Usage::default(),
            &topo(),
            &ex,
            &mut mem,
            NodePolicy::default()
        )
        .is_empty(),
        "no node usage yet"
    );
    round(&f.states, &ex, &mut mem);
    let off = fixture(Version::V1, Some("cfsQuota"), false);
    let ex_off = Executor::new(off.cg.clone(), Duration::from_secs(60));
    let be = off.cg.qos_dir(KubeQoS::BestEffort);
    std::fs::write(off.cg.file(Resource::CfsQuota, &be), "50000").unwrap();
    let mut mem = Memory::default();
    let restored = round(&off.states, &ex_off, &mut mem);
    assert_eq!(restored.len(), 1);
    assert_eq!(read(&off.cg.file(Resource::CfsQuota, &be)), "-1");
    std::fs::write(off.cg.file(Resource::CfsQuota, &be), "50000").unwrap();
    assert!(
        round(&off.states, &ex_off, &mut mem).is_empty(),
        "restored once, not every second"
    );
}

/// Koordinator's `applyCPUSetWithStaticPolicy`: under the kubelet's static CPU manager the
/// QoS and pod levels keep the BE pool and only containers get the suppressed CPUs.
#[test]
fn static_kubelet_policy_suppresses_containers_only() {
    let f = fixture(Version::V1, None, true);
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let mut mem = Memory::default();
    let policy = NodePolicy {
        kubelet_static: true,
        ..Default::default()
    };
    pass(&f.states, &usage(), &topo(), &ex, &mut mem, policy);
    let be_pod = &f.states.pods[1];
    let at = |d: &crate::os::CgroupDir| read(&f.cg.file(Resource::CpusetCpus, d));
    assert_eq!(at(&f.cg.qos_dir(KubeQoS::BestEffort)), "0-3");
    assert_eq!(at(&be_pod.dir), "0-3");
    assert_eq!(at(&be_pod.containers[0].dir), "0-1");
}

/// `adjustByCPUSet` and `calcBECPUSet`: the node's reserved CPUs and its exclusive
/// system-QoS CPUs are never BE CPUs, suppressed or restored; a non-exclusive system set is.
#[test]
fn reserved_and_exclusive_system_cpus_are_never_be_cpus() {
    let node = |exclusive: bool| {
        let system = format!("{{\"cpuset\":\"1\",\"cpusetExclusive\":{exclusive}}}");
        let node = json!({"metadata": {"name": "n", "annotations": {
                "node.koordinator.sh/reservation": "{\"reservedCPUs\":\"0\"}",
                "node.koordinator.sh/system-qos-resource": system}},
            "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}});
        Some(Arc::new(serde_json::from_value(node).unwrap()))
    };
    // One round on a fresh tree; the BE QoS dir's cpuset after it.
    let round = |enable: bool, exclusive: bool| {
        let f = fixture(Version::V1, None, enable);
        let mut states = f.states.clone();
        states.node = node(exclusive);
        let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
        let mut mem = Memory::default();
        round(&states, &ex, &mut mem);
        read(
            &f.cg
                .file(Resource::CpusetCpus, &f.cg.qos_dir(KubeQoS::BestEffort)),
        )
    };
    // Without them the pick is the first whole core, 0-1 (`cpuset_policy_shrinks_…`).
    assert_eq!(round(true, true), "2-3", "suppressed");
    assert_eq!(round(false, true), "2-3", "restored, system CPUs exclusive");
    assert_eq!(round(false, false), "1-3", "restored, system CPUs shared");
}

/// Koordinator's `suppressBECPU` beside BECPUManager: no suppression whatever the NodeSLO;
/// the quota and the BE pool come back each round, except on the containers of BE pods the
/// scheduler bound to a NUMA node (the cpuset hook's).
#[test]
fn be_cpu_manager_restores_the_pool_but_not_numa_bound_containers() {
    let f = fixture(Version::V1, None, true);
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let mut mem = Memory::default();
    round(&f.states, &ex, &mut mem);
    let be_qos = f.cg.qos_dir(KubeQoS::BestEffort);
    std::fs::write(f.cg.file(Resource::CfsQuota, &be_qos), "50000").unwrap();
    // A fresh executor: the last one remembers writing -1 and trusts it for a minute.
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let mut bound = f.states.clone();
    let mut pods = (*bound.pods).clone();
    let mut pod = (*pods[1].pod).clone();
    pod.metadata.annotations = Some(std::collections::BTreeMap::from([(
        "scheduling.koordinator.sh/resource-status".to_string(),
        r#"{"numaNodeResources":[{"node":0}]}"#.to_string(),
    )]));
    pods[1].pod = Arc::new(pod);
    bound.pods = Arc::new(pods);
    let policy = NodePolicy {
        be_cpu_manager: true,
        ..Default::default()
    };
    pass(&bound, &usage(), &topo(), &ex, &mut mem, policy);
    let be_pod = &f.states.pods[1];
    let at = |d: &crate::os::CgroupDir| read(&f.cg.file(Resource::CpusetCpus, d));
    assert_eq!(read(&f.cg.file(Resource::CfsQuota, &be_qos)), "-1");
    assert_eq!(at(&be_qos), "0-3");
    assert_eq!(at(&be_pod.dir), "0-3");
    assert_eq!(
        at(&be_pod.containers[0].dir),
        "0-1",
        "NUMA-bound: the hook's"
    );
    pass(&f.states, &usage(), &topo(), &ex, &mut mem, policy);
    assert_eq!(at(&be_pod.containers[0].dir), "0-3", "unbound: the pool");
}

/// cgroup v1 refuses a parent quota below a child's: under the cfsQuota policy the BE pod
/// and container quotas are lifted before the besteffort level is lowered.
#[test]
fn cfs_quota_lifts_be_children_before_lowering_the_level() {
    let f = fixture(Version::V1, Some("cfsQuota"), true);
    let be_pod = &f.states.pods[1];
    let file = |d: &crate::os::CgroupDir| f.cg.file(Resource::CfsQuota, d);
    std::fs::write(file(&be_pod.dir), "400000").unwrap();
    std::fs::write(file(&be_pod.containers[0].dir), "400000").unwrap();
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let changes = round(&f.states, &ex, &mut Memory::default());
    let qos = f.cg.qos_dir(KubeQoS::BestEffort);
    let last = changes.last().map(|c| (c.dir.as_str(), c.new.as_str()));
    assert_eq!(
        last,
        Some((qos.as_str(), "110000")),
        "the level is written last"
    );
    for d in [&be_pod.dir, &be_pod.containers[0].dir] {
        assert_eq!(f.cg.read_i64(Resource::CfsQuota, d).unwrap(), -1, "{d:?}");
    }
}

/// A threshold raised while BE sits at the quota floor gives the CPU back within a few
/// rounds (at most 10 % of the node a round), and the series says what was applied.
#[test]
fn cfs_quota_recovers_after_the_threshold_is_raised() {
    let mut f = fixture(Version::V1, Some("cfsQuota"), true);
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let qos = f.cg.qos_dir(KubeQoS::BestEffort);
    std::fs::write(f.cg.file(Resource::CfsQuota, &qos), MIN_QUOTA.to_string()).unwrap();
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceUsedThresholdWithBE": {
        "enable": true, "cpuSuppressPolicy": "cfsQuota", "cpuSuppressThresholdPercent": 100}}});
    f.states.node_slo = Some(Arc::new(serde_json::from_value(slo).unwrap()));
    let mut mem = Memory::default();
    let mut quotas = Vec::new();
    for _ in 0..8 {
        round(&f.states, &ex, &mut mem);
        quotas.push(f.cg.read_i64(Resource::CfsQuota, &qos).unwrap());
    }
    // S = 4000 − 1500 = 2500 milli → 250000 µs, in steps of 40000 (10 % of 4 CPUs).
    assert_eq!(
        quotas,
        [42000, 82000, 122000, 162000, 202000, 242000, 250000, 250000]
    );
    assert_eq!(mem.applied_cores, Some(2.5), "the quota applied, in cores");
}

/// koord's `cpuIdle` policy: besteffort runs as SCHED_IDLE while it is on; switched off,
/// the level leaves idle and gets the kubelet's 2 shares back (the kernel resets them).
#[test]
fn cpu_idle_policy_sets_and_restores_the_besteffort_level() {
    let f = fixture(Version::V1, Some("cpuIdle"), true);
    let qos = f.cg.qos_dir(KubeQoS::BestEffort);
    let dir = f.cg.dir_path(Resource::CpuIdle.subsystem(), &qos);
    std::fs::write(dir.join("cpu.idle"), "0").unwrap();
    std::fs::write(dir.join("cpu.shares"), "2").unwrap();
    let ex = Executor::new(f.cg.clone(), Duration::from_secs(60));
    let mut mem = Memory::default();
    round(&f.states, &ex, &mut mem);
    assert_eq!(read(&dir.join("cpu.idle")), "1");
    assert_eq!(
        mem.applied_cores,
        Some(2.0),
        "the cpuset policy's count still applies"
    );
    std::fs::write(dir.join("cpu.shares"), "1024").unwrap();
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceUsedThresholdWithBE": {
        "enable": true, "cpuSuppressPolicy": "cpuset"}}});
    let states = States {
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        slo_view: Default::default(),
        ..f.states.clone()
    };
    round(&states, &ex, &mut mem);
    assert_eq!(read(&dir.join("cpu.idle")), "0");
    assert_eq!(read(&dir.join("cpu.shares")), "2");
}
