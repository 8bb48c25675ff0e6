use super::*;

fn tree(version: Version, driver: Driver) -> (tempfile::TempDir, Cgroups) {
    let dir = tempfile::tempdir().unwrap();
    match version {
        Version::V1 => {
            for s in ["cpu", "cpuacct", "cpuset", "memory"] {
                std::fs::create_dir_all(dir.path().join(s)).unwrap();
            }
            std::fs::write(dir.path().join("cpuset/cpuset.cpus"), "0-3").unwrap();
            std::fs::write(dir.path().join("cpuset/cpuset.mems"), "0").unwrap();
        }
        Version::V2 => std::fs::write(
            dir.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids",
        )
        .unwrap(),
    }
    let cg = Cgroups::new(dir.path(), version, driver, "");
    (dir, cg)
}

#[test]
fn layout_for_both_drivers() {
    let fs = Cgroups::new("/r", Version::V1, Driver::Cgroupfs, "");
    assert_eq!(
        fs.pod_dir(KubeQoS::BestEffort, "a-b").as_str(),
        "kubepods/besteffort/poda-b"
    );
    assert_eq!(
        fs.pod_dir(KubeQoS::Guaranteed, "a-b").as_str(),
        "kubepods/poda-b"
    );
    let pod = fs.pod_dir(KubeQoS::Burstable, "u");
    assert_eq!(
        fs.container_dir(&pod, "containerd://abc").unwrap().as_str(),
        "kubepods/burstable/podu/abc"
    );
    let sd = Cgroups::new("/r", Version::V2, Driver::Systemd, "");
    let pod = sd.pod_dir(KubeQoS::BestEffort, "a-b");
    assert_eq!(
        pod.as_str(),
        "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poda_b.slice"
    );
    assert_eq!(
        sd.container_dir(&pod, "containerd://abc")
            .unwrap()
            .0
            .rsplit('/')
            .next(),
        Some("cri-containerd-abc.scope")
    );
    assert_eq!(
        sd.container_dir(&pod, "docker://x")
            .unwrap()
            .0
            .rsplit('/')
            .next(),
        Some("docker-x.scope")
    );
    assert!(sd.container_dir(&pod, "nonsense").is_none());
    let parented = Cgroups::new("/r", Version::V1, Driver::Cgroupfs, "/test-1/");
    assert_eq!(parented.kubepods().as_str(), "test-1/kubepods");
    assert_eq!(
        parented.file(Resource::CpuShares, &parented.kubepods()),
        PathBuf::from("/r/cpu/test-1/kubepods/cpu.shares")
    );
}

#[test]
fn detect_version_and_driver() {
    let (dir, _) = tree(Version::V1, Driver::Cgroupfs);
    std::fs::create_dir_all(dir.path().join("cpu/kubepods.slice")).unwrap();
    let d = Cgroups::detect(dir.path(), "", Driver::Cgroupfs).unwrap();
    assert_eq!((d.version(), d.driver()), (Version::V1, Driver::Systemd));
    let (dir, _) = tree(Version::V2, Driver::Cgroupfs);
    std::fs::create_dir_all(dir.path().join("kubepods")).unwrap();
    let d = Cgroups::detect(dir.path(), "", Driver::Systemd).unwrap();
    assert_eq!((d.version(), d.driver()), (Version::V2, Driver::Cgroupfs));
    let empty = tempfile::tempdir().unwrap();
    assert!(Cgroups::detect(empty.path(), "", Driver::Cgroupfs).is_err());
}

#[test]
fn v2_conversions() {
    let (_dir, cg) = tree(Version::V2, Driver::Cgroupfs);
    let d = cg.kubepods().join("besteffort");
    cg.create(&d).unwrap();
    cg.write(Resource::CpuShares, &d, "1024").unwrap();
    assert_eq!(
        std::fs::read_to_string(cg.file(Resource::CpuShares, &d)).unwrap(),
        "39"
    );
    assert_eq!(
        cg.read_i64(Resource::CpuShares, &d).unwrap(),
        weight_to_shares(39)
    );
    cg.write(Resource::CfsQuota, &d, "-1").unwrap();
    assert_eq!(
        std::fs::read_to_string(cg.file(Resource::CfsQuota, &d)).unwrap(),
        "max"
    );
    std::fs::write(cg.file(Resource::CfsQuota, &d), "50000 100000").unwrap();
    assert_eq!(cg.read_i64(Resource::CfsQuota, &d).unwrap(), 50000);
    assert_eq!(cg.read_i64(Resource::CfsPeriod, &d).unwrap(), 100000);
    std::fs::write(
        cg.file(Resource::CpuacctUsage, &d),
        "usage_usec 1500\nuser_usec 1000\n",
    )
    .unwrap();
    assert_eq!(cg.read_i64(Resource::CpuacctUsage, &d).unwrap(), 1_500_000);
    std::fs::write(cg.file(Resource::MemoryLimit, &d), "max").unwrap();
    assert_eq!(cg.read_i64(Resource::MemoryLimit, &d).unwrap(), -1);
    std::fs::write(
        cg.file(Resource::MemoryOomEvents, &d),
        "low 0\noom 1\noom_kill 2\n",
    )
    .unwrap();
    assert_eq!(cg.oom_kills(&d), 2);
    let enabled = std::fs::read_to_string(_dir.path().join("cgroup.subtree_control")).unwrap();
    assert_eq!(
        enabled, "+cpu +cpuset +memory +io +pids",
        "v2 parents enable controllers for children"
    );
}

#[test]
fn v1_create_inherits_cpuset_and_remove() {
    let (dir, cg) = tree(Version::V1, Driver::Cgroupfs);
    let pod = cg.pod_dir(KubeQoS::Burstable, "u1");
    cg.create(&pod).unwrap();
    assert_eq!(
        std::fs::read_to_string(
            dir.path()
                .join("cpuset/kubepods/burstable/podu1/cpuset.cpus")
        )
        .unwrap(),
        "0-3"
    );
    assert!(dir.path().join("memory/kubepods/burstable/podu1").is_dir());
    assert_eq!(cg.procs_files(&pod).len(), 4);
    std::fs::write(
        dir.path()
            .join("memory/kubepods/burstable/podu1/memory.limit_in_bytes"),
        "9223372036854771712",
    )
    .unwrap();
    assert_eq!(cg.read_i64(Resource::MemoryLimit, &pod).unwrap(), -1);
    cg.remove(&pod).unwrap_err(); // fake tree: the file inside makes rmdir fail, as a busy cgroup would
    std::fs::remove_file(
        dir.path()
            .join("memory/kubepods/burstable/podu1/memory.limit_in_bytes"),
    )
    .unwrap();
    std::fs::remove_file(
        dir.path()
            .join("cpuset/kubepods/burstable/podu1/cpuset.cpus"),
    )
    .unwrap();
    std::fs::remove_file(
        dir.path()
            .join("cpuset/kubepods/burstable/podu1/cpuset.mems"),
    )
    .unwrap();
    cg.remove(&pod).unwrap();
    assert!(!cg.exists(&pod));
    cg.remove(&pod).unwrap();
}

#[test]
fn weight_conversion_round_trips_ends() {
    assert_eq!(shares_to_weight(2), 1);
    assert_eq!(shares_to_weight(262_144), 10_000);
    assert_eq!(weight_to_shares(1), 2);
    assert_eq!(weight_to_shares(10_000), 262_144);
    assert_eq!(
        stat_field("nr_periods 4\nnr_throttled 1", "nr_throttled"),
        Some(1)
    );
}
