use std::path::Path;

use super::*;
use crate::api::extension::qos::KubeQoS;
use crate::os::{Driver, Version};

fn tree(version: Version, driver: Driver) -> (tempfile::TempDir, Cgroups) {
    let dir = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(dir.path(), version, driver, "");
    let be = cg.qos_dir(KubeQoS::BestEffort);
    let pod = cg.pod_dir(KubeQoS::BestEffort, "u1");
    for d in [&be, &pod] {
        for (sub, files) in [
            ("cpu", vec![("cpu.cfs_quota_us", "-1"), ("cpu.shares", "2")]),
            ("cpuset", vec![("cpuset.cpus", "0-1")]),
        ] {
            let base = match version {
                Version::V1 => dir.path().join(sub).join(d.as_str()),
                Version::V2 => dir.path().join(d.as_str()),
            };
            std::fs::create_dir_all(&base).unwrap();
            for (f, v) in files {
                let (f, v) = match (version, f) {
                    (Version::V2, "cpu.cfs_quota_us") => ("cpu.max", "max 100000"),
                    (Version::V2, "cpu.shares") => ("cpu.weight", "1"),
                    _ => (f, v),
                };
                std::fs::write(base.join(f), v).unwrap();
            }
        }
    }
    (dir, cg)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

#[test]
fn writes_once_and_skips_what_is_already_there() {
    for version in [Version::V1, Version::V2] {
        for driver in [Driver::Cgroupfs, Driver::Systemd] {
            let (_d, cg) = tree(version, driver);
            let ex = Executor::new(cg.clone(), Duration::from_secs(60));
            let be = cg.qos_dir(KubeQoS::BestEffort);
            let u = Update::new(Resource::CfsQuota, be.clone(), "200000");
            assert!(
                matches!(ex.update(&u).unwrap(), Outcome::Written(Change { ref old, ref new, .. }) if old == "-1" && new == "200000")
            );
            let file = cg.file(Resource::CfsQuota, &be);
            // v1 holds the number; v2's cpu.max holds "<quota> <period>".
            let expect = "200000";
            assert!(
                read(&file).starts_with(expect),
                "{version:?} {driver:?}: {}",
                read(&file)
            );
            assert_eq!(ex.update(&u).unwrap(), Outcome::Unchanged, "cached");
            // A fresh executor reads the file and finds the value there.
            let ex2 = Executor::new(cg.clone(), Duration::from_secs(60));
            assert_eq!(ex2.update(&u).unwrap(), Outcome::Unchanged);
            // Unlimited is written as -1 (v1) or max (v2).
            ex.update(&Update::new(Resource::CfsQuota, be.clone(), "-1"))
                .unwrap();
            let raw = read(&file);
            assert!(raw == "-1" || raw.starts_with("max"), "{raw}");
            let shares = Update::new(Resource::CpuShares, be.clone(), "1024");
            assert!(matches!(ex.update(&shares).unwrap(), Outcome::Written(_)));
            let gone = Update::new(Resource::CfsQuota, be.join("pod-gone"), "200000");
            assert_eq!(ex.update(&gone).unwrap(), Outcome::Missing);
        }
    }
}

#[test]
fn ranges_and_paths_are_checked() {
    let (_d, cg) = tree(Version::V1, Driver::Cgroupfs);
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    let be = cg.qos_dir(KubeQoS::BestEffort);
    for (res, v) in [
        (Resource::CpuShares, "1"),
        (Resource::CfsQuota, "500"),
        (Resource::MemoryWmarkMinAdj, "51"),
        (Resource::CpusetCpus, "x"),
        (Resource::CpuShares, "many"),
    ] {
        assert!(
            matches!(
                ex.update(&Update::new(res, be.clone(), v)),
                Err(ExecError::Invalid { .. })
            ),
            "{res:?} {v}"
        );
    }
    let escape = Update::new(
        Resource::CfsQuota,
        CgroupDir::new("kubepods/../../etc"),
        "200000",
    );
    assert!(matches!(ex.update(&escape), Err(ExecError::Invalid { .. })));
    for (res, v) in [(Resource::CfsQuota, "-1"), (Resource::CpusetCpus, "0-3,5")] {
        validate(res, v).unwrap();
    }
}

#[test]
fn leveled_updates_relax_parents_first() {
    for version in [Version::V1, Version::V2] {
        let (_d, cg) = tree(version, Driver::Cgroupfs);
        let ex = Executor::new(cg.clone(), Duration::from_secs(60));
        let be = cg.qos_dir(KubeQoS::BestEffort);
        let pod = cg.pod_dir(KubeQoS::BestEffort, "u1");
        let levels = vec![
            vec![Update::new(Resource::CpusetCpus, be.clone(), "2-3")],
            vec![Update::new(Resource::CpusetCpus, pod.clone(), "2-3")],
        ];
        let results = ex.leveled(&levels);
        assert!(results.iter().all(|r| r.is_ok()));
        assert_eq!(read(&cg.file(Resource::CpusetCpus, &be)), "2-3");
        assert_eq!(read(&cg.file(Resource::CpusetCpus, &pod)), "2-3");
        assert_eq!(
            ex.leveled(&levels)
                .into_iter()
                .map(|r| r.unwrap())
                .collect::<Vec<_>>(),
            vec![Outcome::Unchanged; 2],
            "nothing to do the second time"
        );
    }
}

#[test]
fn kernel_files_outside_the_table_are_written_once_and_only_by_absolute_path() {
    let dir = tempfile::tempdir().unwrap();
    let ex = Executor::new(
        Cgroups::new(dir.path(), Version::V1, Driver::Cgroupfs, ""),
        Duration::from_secs(60),
    );
    let f = dir.path().join("schemata");
    std::fs::write(&f, "L3:0=f\n").unwrap();
    assert!(
        !ex.write_file(&f, "L3:0=f", Some("L3:0=f\n")).unwrap(),
        "unchanged"
    );
    assert!(ex.write_file(&f, "L3:0=3", Some("L3:0=f\n")).unwrap());
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "L3:0=3");
    assert!(
        !ex.write_file(&dir.path().join("gone/x"), "1", None)
            .unwrap(),
        "missing is no error"
    );
    assert!(
        ex.write_file(std::path::Path::new("rel/x"), "1", None)
            .is_err()
    );
    assert!(ex.write_file(&dir.path().join("../x"), "1", None).is_err());
}

#[test]
fn a_knob_the_cgroup_lacks_is_remembered_and_a_cgroup_not_there_yet_is_asked_again() {
    let (_d, cg) = tree(Version::V1, Driver::Cgroupfs);
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    let pod = cg.pod_dir(KubeQoS::BestEffort, "u1");
    let burst = Update::new(Resource::CfsBurst, pod.clone(), "0");
    assert_eq!(ex.update(&burst).unwrap(), Outcome::Missing);
    // The kernel lacks it: the file appearing later (it does not on a real node) is not
    // looked for until `force_update` has passed.
    std::fs::write(cg.file(Resource::CfsBurst, &pod), "100").unwrap();
    assert_eq!(ex.update(&burst).unwrap(), Outcome::Missing);
    let leveled = ex.leveled(&[vec![burst.clone()]]);
    assert!(matches!(leveled.as_slice(), [Ok(Outcome::Missing)]));
    let fresh = Executor::new(cg.clone(), Duration::ZERO);
    assert!(matches!(fresh.update(&burst).unwrap(), Outcome::Written(_)));

    // A pod whose cgroup the runtime has not made yet gets its value once it is there.
    let new_pod = cg.pod_dir(KubeQoS::BestEffort, "u2");
    let quota = Update::new(Resource::CfsQuota, new_pod.clone(), "200000");
    assert_eq!(ex.update(&quota).unwrap(), Outcome::Missing);
    let file = cg.file(Resource::CfsQuota, &new_pod);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "-1").unwrap();
    assert!(matches!(ex.update(&quota).unwrap(), Outcome::Written(_)));
    assert_eq!(read(&file), "200000");
}

#[test]
fn the_cache_drops_what_has_expired_once_it_grows() {
    let (_d, cg) = tree(Version::V1, Driver::Cgroupfs);
    let len = |ex: &Executor| ex.cache.lock().unwrap().entries.len();
    // Nothing expires within a minute: the cache keeps all and prunes again at twice the size.
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    for i in 0..PRUNE_MIN + 10 {
        ex.remember_in(
            &mut ex.lock().entries,
            &format!("cpu.shares:pod{i}"),
            Some("2"),
        );
    }
    assert_eq!(len(&ex), PRUNE_MIN + 10);
    // Every entry expired at once (pods gone): pruned when the cache reaches the mark.
    let ex = Executor::new(cg, Duration::ZERO);
    for i in 0..PRUNE_MIN + 10 {
        ex.remember_in(&mut ex.lock().entries, &format!("cpu.shares:pod{i}"), None);
    }
    assert!(len(&ex) <= 10, "{}", len(&ex));
}
