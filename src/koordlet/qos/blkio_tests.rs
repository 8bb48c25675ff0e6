use super::*;
use crate::os::{Cgroups, Driver};
use serde_json::json;

fn states(slo: serde_json::Value, pods: Vec<PodMeta>) -> States {
    States {
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        pods: Arc::new(pods),
        ..Default::default()
    }
}

fn no_volumes() -> PodVolumes<'static> {
    PodVolumes {
        kubelet_root: Path::new("/var/lib/kubelet"),
        volume_name: &|_, _| None,
    }
}

/// The blkio directory of `dir` with every file blkio writes, each holding `lines`.
fn blkio_dir(cg: &Cgroups, dir: &crate::os::CgroupDir, lines: &[(&str, &str)]) -> PathBuf {
    let path = cg.dir_path(Subsystem::Blkio, dir);
    std::fs::create_dir_all(&path).unwrap();
    for f in THROTTLE.iter().chain(&[WEIGHT, COST_QOS, COST_MODEL]) {
        std::fs::write(path.join(f), "").unwrap();
    }
    for (f, l) in lines {
        std::fs::write(path.join(f), format!("{l}\n")).unwrap();
    }
    path
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn be_throttles_and_weight_per_device_and_stale_devices_reset() {
    let sys = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sys.path().join("block/sdb")).unwrap();
    std::fs::write(sys.path().join("block/sdb/dev"), "8:16\n").unwrap();
    let host = Host::new("/proc", sys.path());
    let root = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
    let dir = blkio_dir(
        &cg,
        &cg.qos_dir(KubeQoS::BestEffort),
        &[
            ("blkio.throttle.read_iops_device", "8:32 500"),
            (WEIGHT, "default 100"),
        ],
    );
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": true,
        "blocks": [{"name": "/dev/sdb", "type": "device", "ioCfg": {"readIOPS": 100, "writeBPS": 1048576, "ioWeightPercent": 40}}]}}}}});
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    let written = pass(&states(slo, vec![]), None, &host, &ex, &no_volumes());
    for line in [
        "blkio.throttle.read_iops_device 8:16 100",
        "blkio.throttle.write_bps_device 8:16 1048576",
        "blkio.throttle.read_iops_device 8:32 0",
        "blkio.cost.weight 8:16 40",
    ] {
        assert!(written.contains(&line.to_string()), "{line} in {written:?}");
    }
    assert!(
        !written.iter().any(|w| w.contains("default")),
        "the kernel's default line is not a device"
    );
    // A fake file holds the last line written (the kernel keeps one per device): here the
    // stale device's reset.
    assert_eq!(read(&dir, "blkio.throttle.read_iops_device"), "8:32 0");
}

/// Each file holding the device's line already, a round writes nothing.
#[test]
fn lines_already_in_place_are_not_written_again() {
    let root = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
    blkio_dir(&cg, &cg.qos_dir(KubeQoS::BestEffort), &[]);
    let root_dir = blkio_dir(&cg, &crate::os::CgroupDir::new(""), &[]);
    let sys = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sys.path().join("block/sdb")).unwrap();
    std::fs::write(sys.path().join("block/sdb/dev"), "8:16\n").unwrap();
    let host = Host::new("/proc", sys.path());
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {
        "beClass": {"blkioQOS": {"enable": true, "blocks": [{"name": "/dev/sdb", "ioCfg": {"readIOPS": 100}}]}},
        "cgroupRoot": {"blkioQOS": {"enable": true, "blocks": [{"name": "/dev/sdb"}]}}}}});
    let st = states(slo, vec![]);
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    assert_eq!(pass(&st, None, &host, &ex, &no_volumes()).len(), 7);
    assert_eq!(
        read(&root_dir, COST_QOS),
        "8:16 enable=1 ctrl=user rpct=95 rlat=3000 wpct=95 wlat=3000"
    );
    assert_eq!(read(&root_dir, COST_MODEL), "8:16 ctrl=auto");
    // As the kernel shows it back.
    std::fs::write(
        root_dir.join(COST_QOS),
        "8:16 enable=1 ctrl=user rpct=95.00 rlat=3000 wpct=95.00 wlat=3000 min=50.00 max=150.00\n",
    )
    .unwrap();
    assert_eq!(
        pass(&st, None, &host, &ex, &no_volumes()),
        Vec::<String>::new()
    );
}

/// As `updateBlkIOConfig`: one block that resolves to no disk leaves the whole target as it is.
#[test]
fn a_block_on_no_disk_leaves_its_target_alone() {
    let host = Host::new("/nonexistent-proc", "/nonexistent-sys");
    let root = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
    let dir = blkio_dir(
        &cg,
        &cg.qos_dir(KubeQoS::BestEffort),
        &[("blkio.throttle.read_iops_device", "8:32 500")],
    );
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": true,
        "blocks": [{"name": "/dev/ghost", "ioCfg": {"readIOPS": 1}}]}}}}});
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    assert!(pass(&states(slo, vec![]), None, &host, &ex, &no_volumes()).is_empty());
    assert_eq!(
        read(&dir, "blkio.throttle.read_iops_device"),
        "8:32 500",
        "not reset either"
    );
}

fn block(name: &str, kind: &str) -> BlockCfg {
    serde_json::from_value(json!({"name": name, "type": kind})).unwrap()
}

#[test]
fn blocks_resolve_through_the_storage_scan() {
    let mut s = LocalStorageInfo::default();
    s.scan_devices_output(
        "NAME=\"vdb\" TYPE=\"disk\" MAJ:MIN=\"253:16\"\nNAME=\"vdc\" TYPE=\"disk\" MAJ:MIN=\"253:32\"\nNAME=\"vdc3\" TYPE=\"part\" MAJ:MIN=\"253:35\"",
    )
    .unwrap();
    s.scan_volume_groups_output("yoda-pool0 1 /dev/vdc3")
        .unwrap();
    let host = Host::new("/nonexistent-proc", "/nonexistent-sys");
    let number = |b: BlockCfg| disk_number(&b, Some(&s), &host, None);
    assert_eq!(
        number(block("/dev/vdb", "device")).as_deref(),
        Some("253:16")
    );
    assert_eq!(
        number(block("/dev/vdc3", "device")).as_deref(),
        Some("253:32"),
        "a partition throttles its disk"
    );
    assert_eq!(
        number(block("yoda-pool0", "volumegroup")).as_deref(),
        Some("253:32")
    );
    assert_eq!(number(block("nope", "volumegroup")), None);
    assert_eq!(
        number(block("data", "podvolume")),
        None,
        "a pod's block, not the node's"
    );
    assert_eq!(
        disk_number(&block("yoda-pool0", "volumegroup"), None, &host, None),
        None,
        "volume groups need a scan"
    );
}

#[test]
fn settings_compare_as_the_kernel_shows_them() {
    let kernel =
        "enable=1 ctrl=user rpct=95.00 rlat=3000 wpct=95.00 wlat=3000 min=50.00 max=150.00";
    assert!(already(
        "enable=1 ctrl=user rpct=95 rlat=3000 wpct=95 wlat=3000",
        kernel
    ));
    assert!(!already(
        "enable=1 ctrl=user rpct=90 rlat=3000 wpct=95 wlat=3000",
        kernel
    ));
    assert!(!already("enable=0", kernel));
    assert!(already("2048", "2048"));
    assert!(!already("1024", "2048"));
}

const KUBE: &str = "/var/lib/kubelet";

/// Koordinator's `TestBlkIOReconcile_reconcile` fixture: the storage maps, pod0 with a PVC
/// (bound to yoda-87d8625a-…), pod1 running and pod2 pending with a CSI ephemeral volume,
/// each asking `{"readIOPS":1024,"writeIOPS":512}` on volume `html`.
fn go_fixture() -> (LocalStorageInfo, Vec<serde_json::Value>) {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let annotation = r#"{"blocks":[{"name":"html","type":"podvolume","iocfg":{"readIOPS":1024,"writeIOPS":512}}]}"#;
    let pod = |name: &str, uid: &str, volume: serde_json::Value, phase: &str| {
        json!({"metadata": {"name": name, "namespace": "default", "uid": uid,
                "annotations": {"koordinator.sh/blkioQOS": annotation},
                "labels": {"koordinator.sh/qosClass": "BE"}},
            "spec": {"containers": [{"name": "container0"}], "volumes": [volume]},
            "status": {"phase": phase, "qosClass": "BestEffort",
                "containerStatuses": [{"name": "container0", "containerID": "containerd://c0",
                    "image": "x", "imageID": "", "ready": true, "restartCount": 0}]}})
    };
    let pvc = json!({"name": "html", "persistentVolumeClaim": {"claimName": "test-pvc"}});
    let csi = json!({"name": "html", "csi": {"driver": "yoda"}});
    let pods = vec![
        pod("test-pod-0", "uid-0", pvc, "Running"),
        pod("test-pod-1", "uid-1", csi.clone(), "Running"),
        pod("test-pod-2", "uid-2", csi, "Pending"),
    ];
    let mount =
        |uid: &str, vol: &str| format!("{KUBE}/pods/{uid}/volumes/kubernetes.io~csi/{vol}/mount");
    let storage = LocalStorageInfo {
        disk_number: map(&[("/dev/vda", "253:0"), ("/dev/vdb", "253:16")]),
        number_disk: map(&[("253:0", "/dev/vda"), ("253:16", "/dev/vdb")]),
        partition_disk: map(&[("/dev/vda1", "/dev/vda"), ("/dev/vdb1", "/dev/vdb")]),
        vg_disk: map(&[("yoda-pool0", "/dev/vdb")]),
        lv_mapper_vg: map(&[
            (
                "/dev/mapper/yoda--pool0-yoda--87d8625a--dcc9--47bf--a14a--994cf2971193",
                "yoda-pool0",
            ),
            ("/dev/mapper/yoda--pool0-yoda--test1", "yoda-pool0"),
            ("/dev/mapper/yoda--pool0-yoda--test2", "yoda-pool0"),
        ]),
        mount_point_disk: map(&[
            (
                &mount("uid-0", "yoda-87d8625a-dcc9-47bf-a14a-994cf2971193"),
                "/dev/mapper/yoda--pool0-yoda--87d8625a--dcc9--47bf--a14a--994cf2971193",
            ),
            (
                &mount("uid-1", "html"),
                "/dev/mapper/yoda--pool0-yoda--test1",
            ),
            (
                &mount("uid-2", "html"),
                "/dev/mapper/yoda--pool0-yoda--test2",
            ),
        ]),
    };
    (storage, pods)
}

/// Koordinator's reconcile test, with what it leaves in each file: the BE class on the
/// volume group's disk, the root's iocost with the user model, each running pod's volume
/// on the disk under its logical volume; the pending pod untouched.
#[test]
fn reconcile_as_koordinator_be_class_root_and_pod_volumes() {
    let (storage, pods) = go_fixture();
    let root = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
    let pods: Vec<PodMeta> = pods
        .into_iter()
        .map(|p| PodMeta::new(serde_json::from_value(p).unwrap(), &cg).unwrap())
        .collect();
    let root_dir = blkio_dir(
        &cg,
        &crate::os::CgroupDir::new(""),
        &[(COST_QOS, "253:16 enable=1 ctrl=user rlat=2000 wlat=2000")],
    );
    blkio_dir(
        &cg,
        &cg.qos_dir(KubeQoS::BestEffort),
        &[
            (WEIGHT, "253:16 100"),
            ("blkio.throttle.read_iops_device", "253:16 2048"),
            ("blkio.throttle.write_iops_device", "253:16 2048"),
            ("blkio.throttle.read_bps_device", "253:0 2048"),
            ("blkio.throttle.write_bps_device", "253:0 2048"),
        ],
    );
    let pod_dirs: Vec<PathBuf> = pods
        .iter()
        .map(|p| {
            blkio_dir(
                &cg,
                &p.dir,
                &[("blkio.throttle.read_iops_device", "253:16 2048")],
            )
        })
        .collect();
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {
        "lsrClass": {"blkioQOS": {"enable": true, "blocks": [{"name": "/dev/vdc", "type": "device", "ioCfg": {"ioWeightPercent": 100}}]}},
        "beClass": {"blkioQOS": {"enable": true, "blocks": [{"name": "yoda-pool0", "type": "volumegroup",
            "ioCfg": {"ioWeightPercent": 40, "readIOPS": 1024, "writeIOPS": 1024, "readBPS": 1048576, "writeBPS": 1048576}}]}},
        "cgroupRoot": {"blkioQOS": {"enable": true, "blocks": [{"name": "/dev/vdb", "type": "device",
            "ioCfg": {"readLatency": 1000, "writeLatency": 1000, "readLatencyPercent": 90, "writeLatencyPercent": 90,
                "enableUserModel": true, "modelReadBPS": 3324911720u64, "modelWriteBPS": 2765819289u64,
                "modelReadSeqIOPS": 168274, "modelWriteSeqIOPS": 367565, "modelReadRandIOPS": 352545, "modelWriteRandIOPS": 339390}}]}}}}});
    let volume_name = |ns: &str, claim: &str| {
        (ns == "default" && claim == "test-pvc")
            .then(|| "yoda-87d8625a-dcc9-47bf-a14a-994cf2971193".to_string())
    };
    let volumes = PodVolumes {
        kubelet_root: Path::new(KUBE),
        volume_name: &volume_name,
    };
    let host = Host::new("/nonexistent-proc", "/nonexistent-sys");
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    let st = states(slo, pods);
    let written = pass(&st, Some(&storage), &host, &ex, &volumes);
    let times = |line: &str| written.iter().filter(|w| *w == line).count();
    for line in [
        "blkio.cost.weight 253:16 40",
        "blkio.throttle.write_bps_device 253:16 1048576",
        "blkio.throttle.write_bps_device 253:0 0",
        "blkio.cost.qos 253:16 enable=1 ctrl=user rpct=90 rlat=1000 wpct=90 wlat=1000",
        "blkio.cost.model 253:16 ctrl=user rbps=3324911720 rseqiops=168274 rrandiops=352545 wbps=2765819289 wseqiops=367565 wrandiops=339390",
    ] {
        assert_eq!(times(line), 1, "{line} in {written:?}");
    }
    // pod0 (its PVC's volume) and pod1 (its CSI ephemeral volume); not the pending pod2.
    assert_eq!(
        times("blkio.throttle.write_iops_device 253:16 512"),
        2,
        "{written:?}"
    );
    assert_eq!(times("blkio.throttle.read_iops_device 253:16 1024"), 1 + 2);
    for (i, dir) in pod_dirs.iter().enumerate() {
        let want = if i < 2 { "253:16 1024" } else { "253:16 2048" };
        assert_eq!(
            read(dir, "blkio.throttle.read_iops_device"),
            want,
            "pod {i}"
        );
    }
    assert_eq!(
        read(&root_dir, COST_QOS),
        "253:16 enable=1 ctrl=user rpct=90 rlat=1000 wpct=90 wlat=1000"
    );
}

/// A switched-off root puts iocost off on the devices it had; a class with no blkioQOS is
/// not touched.
#[test]
fn the_root_switched_off_disables_iocost_on_its_devices() {
    let root = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
    let root_dir = blkio_dir(
        &cg,
        &crate::os::CgroupDir::new(""),
        &[(COST_QOS, "253:16 enable=1 ctrl=user rpct=95.00 rlat=3000")],
    );
    let be_dir = blkio_dir(
        &cg,
        &cg.qos_dir(KubeQoS::BestEffort),
        &[("blkio.throttle.read_iops_device", "253:16 2048")],
    );
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {"cgroupRoot": {"blkioQOS": {"enable": false}}}}});
    let host = Host::new("/nonexistent-proc", "/nonexistent-sys");
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    let written = pass(&states(slo, vec![]), None, &host, &ex, &no_volumes());
    assert_eq!(written, ["blkio.cost.qos 253:16 enable=0"]);
    assert_eq!(read(&root_dir, COST_QOS), "253:16 enable=0");
    assert_eq!(
        read(&be_dir, "blkio.throttle.read_iops_device"),
        "253:16 2048"
    );
}

#[tokio::test]
async fn the_collector_rescans_each_interval_and_keeps_the_last_good_scan() {
    use crate::koordlet::collectors::node_storage_info::NodeStorageInfo;
    use std::sync::atomic::{AtomicU32, Ordering};
    static CALLS: AtomicU32 = AtomicU32::new(0);
    fn scan() -> Result<LocalStorageInfo, crate::os::storage::StorageError> {
        if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
            let mut s = LocalStorageInfo::default();
            s.scan_devices_output("NAME=\"vda\" TYPE=\"disk\" MAJ:MIN=\"253:0\"")?;
            return Ok(s);
        }
        Err(crate::os::storage::StorageError::Exec {
            program: "lsblk".into(),
            reason: "gone".into(),
        })
    }
    let metrics = crate::koordlet::metrics::KoordletMetrics::default();
    let mut c = NodeStorageInfo::with_scan(std::time::Duration::ZERO, scan);
    let first = c.current(&metrics, "n").await.unwrap();
    assert_eq!(first.number("/dev/vda"), Some("253:0"));
    let second = c.current(&metrics, "n").await.unwrap();
    assert_eq!(second, first, "a failed scan keeps the last good one");
    assert_eq!(
        CALLS.load(Ordering::SeqCst),
        2,
        "rescanned at a zero interval"
    );
    let count = |status: &str| {
        let l = vec![("node", "n".to_string()), ("status", status.to_string())];
        metrics.storage_info_status.get_or_create(&l).get()
    };
    assert_eq!((count("succeeded"), count("failed")), (1, 1));
}
