//! Koordinator's `pkg/koordlet/util/storageinfo_test.go`, case for case (its outputs are
//! indented by tabs, as in the Go source), and blkio's lookups
//! (`blkio_reconcile.go`: getDiskByDevice / ByVG / ByMountPoint).

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const LSBLK: &str = r#"NAME="vdd" TYPE="disk" MAJ:MIN="253:48"
					NAME="vdb" TYPE="disk" MAJ:MIN="253:16"
					NAME="vde" TYPE="disk" MAJ:MIN="253:64"
					NAME="vdc" TYPE="disk" MAJ:MIN="253:32"
					NAME="vdc2" TYPE="part" MAJ:MIN="253:34"
					NAME="vdc3" TYPE="part" MAJ:MIN="253:35"
					NAME="yoda--pool0-yoda--2c52d97f--eab6--4ac5--ba8b--242f399470e1" TYPE="lvm" MAJ:MIN="252:1"
					NAME="yoda--pool0-yoda--3d505e88--9d62--4a69--9fba--092402e4264b" TYPE="lvm" MAJ:MIN="252:4"
					NAME="yoda--pool0-yoda--28f38aba--c76e--4dd3--be00--449451393b9d" TYPE="lvm" MAJ:MIN="252:2"
					NAME="yoda--pool0-yoda--15199981--7229--45e9--b3a0--b5b30a6a162b" TYPE="lvm" MAJ:MIN="252:0"
					NAME="yoda--pool0-yoda--23da3223--0d5d--42a4--8235--1f0442b37af2" TYPE="lvm" MAJ:MIN="252:5"
					NAME="yoda--pool0-yoda--87d8625a--dcc9--47bf--a14a--994cf2971193" TYPE="lvm" MAJ:MIN="252:3"
					NAME="vdc1" TYPE="part" MAJ:MIN="253:33"
					NAME="vda" TYPE="disk" MAJ:MIN="253:0"
					NAME="vda1" TYPE="part" MAJ:MIN="253:1""#;

const VGS: &str = "hunbu        2 /dev/vdd
					hunbu        2 /dev/vde
					yoda-pool0   1 /dev/vdc3
					yoda-pool1   1 /dev/vdb";

const LVS: &str = "yoda-15199981-7229-45e9-b3a0-b5b30a6a162b yoda-pool0
					yoda-23da3223-0d5d-42a4-8235-1f0442b37af2 yoda-pool0
					yoda-28f38aba-c76e-4dd3-be00-449451393b9d yoda-pool0
					yoda-2c52d97f-eab6-4ac5-ba8b-242f399470e1 yoda-pool0
					yoda-3d505e88-9d62-4a69-9fba-092402e4264b yoda-pool0
					yoda-87d8625a-dcc9-47bf-a14a-994cf2971193 yoda-pool0";

const POD_MOUNT: &str = "/var/lib/kubelet/pods/d806ee8d-fe28-4995-a836-d2356d44ec5f/volumes/kubernetes.io~csi/yoda-2c52d97f-eab6-4ac5-ba8b-242f399470e1/mount";
const POD_LV: &str = "/dev/mapper/yoda--pool0-yoda--2c52d97f--eab6--4ac5--ba8b--242f399470e1";

fn findmnt() -> String {
    format!(
        r#"TARGET="/" SOURCE="/dev/vda1"
					TARGET="/var/lib/etcd" SOURCE="/dev/vdb"
					TARGET="/var/lib/docker" SOURCE="/dev/vdc1"
					TARGET="/var/lib/kubelet" SOURCE="/dev/vdc2"
					TARGET="{POD_MOUNT}" SOURCE="{POD_LV}""#
    )
}

#[test]
fn test_local_storage_info_scan_devices_output() {
    let mut s = LocalStorageInfo::default();
    s.scan_devices_output(LSBLK).unwrap();
    let want = LocalStorageInfo {
        disk_number: map(&[
            ("/dev/vda", "253:0"),
            ("/dev/vdb", "253:16"),
            ("/dev/vdc", "253:32"),
            ("/dev/vdd", "253:48"),
            ("/dev/vde", "253:64"),
        ]),
        number_disk: map(&[
            ("253:0", "/dev/vda"),
            ("253:16", "/dev/vdb"),
            ("253:32", "/dev/vdc"),
            ("253:48", "/dev/vdd"),
            ("253:64", "/dev/vde"),
        ]),
        partition_disk: map(&[
            ("/dev/vda1", "/dev/vda"),
            ("/dev/vdc1", "/dev/vdc"),
            ("/dev/vdc2", "/dev/vdc"),
            ("/dev/vdc3", "/dev/vdc"),
        ]),
        ..Default::default()
    };
    assert_eq!(s, want);
}

#[test]
fn test_local_storage_info_scan_volume_groups_output() {
    let mut s = LocalStorageInfo {
        partition_disk: map(&[("/dev/vdc3", "/dev/vdc")]),
        disk_number: map(&[
            ("/dev/vda", "253:0"),
            ("/dev/vdb", "253:16"),
            ("/dev/vdc", "253:32"),
            ("/dev/vdd", "253:48"),
            ("/dev/vde", "253:64"),
        ]),
        ..Default::default()
    };
    s.scan_volume_groups_output(VGS).unwrap();
    assert_eq!(
        s.vg_disk,
        map(&[("yoda-pool0", "/dev/vdc"), ("yoda-pool1", "/dev/vdb")]),
        "groups on two physical volumes (hunbu) are skipped"
    );
}

#[test]
fn test_local_storage_info_scan_logical_volumes_output() {
    let mut s = LocalStorageInfo::default();
    s.scan_logical_volumes_output(LVS).unwrap();
    let ids = [
        "2c52d97f--eab6--4ac5--ba8b--242f399470e1",
        "3d505e88--9d62--4a69--9fba--092402e4264b",
        "28f38aba--c76e--4dd3--be00--449451393b9d",
        "15199981--7229--45e9--b3a0--b5b30a6a162b",
        "23da3223--0d5d--42a4--8235--1f0442b37af2",
        "87d8625a--dcc9--47bf--a14a--994cf2971193",
    ];
    let want: BTreeMap<String, String> = ids
        .iter()
        .map(|id| {
            (
                format!("/dev/mapper/yoda--pool0-yoda--{id}"),
                "yoda-pool0".into(),
            )
        })
        .collect();
    assert_eq!(s.lv_mapper_vg, want);
}

#[test]
fn test_local_storage_info_scan_mount_point_output() {
    let mut s = LocalStorageInfo::default();
    s.scan_mount_point_output(&findmnt()).unwrap();
    assert_eq!(
        s.mount_point_disk,
        map(&[
            ("/", "/dev/vda1"),
            ("/var/lib/etcd", "/dev/vdb"),
            ("/var/lib/docker", "/dev/vdc1"),
            ("/var/lib/kubelet", "/dev/vdc2"),
            (POD_MOUNT, POD_LV),
        ])
    );
}

#[test]
fn malformed_lines_are_refused_naming_the_program_and_line() {
    let mut s = LocalStorageInfo::default();
    let err = s
        .scan_devices_output(r#"NAME="vda" TYPE="disk""#)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"output of lsblk is not correct: "NAME=\"vda\" TYPE=\"disk\"""#
    );
    assert!(s.scan_volume_groups_output("vg 1").is_err());
    assert!(s.scan_logical_volumes_output("lv").is_err());
    assert!(s.scan_mount_point_output("TARGET=\"/\"").is_err());
    assert!(
        s.scan_devices_output("\n\n").is_ok(),
        "blank lines are nothing"
    );
}

#[test]
fn blocks_resolve_to_the_disk_under_them() {
    let mut s = LocalStorageInfo::default();
    s.scan_devices_output(LSBLK).unwrap();
    s.scan_volume_groups_output(VGS).unwrap();
    s.scan_logical_volumes_output(LVS).unwrap();
    s.scan_mount_point_output(&findmnt()).unwrap();
    let number = |disk: Option<&str>| disk.and_then(|d| s.number(d)).map(str::to_string);
    assert_eq!(number(s.disk_of_device("/dev/vdb")), Some("253:16".into()));
    assert_eq!(number(s.disk_of_device("/dev/vdc3")), Some("253:32".into()));
    assert_eq!(number(s.disk_of_device("/dev/sdz")), None);
    assert_eq!(
        number(s.disk_of_volume_group("yoda-pool0")),
        Some("253:32".into())
    );
    assert_eq!(number(s.disk_of_volume_group("hunbu")), None);
    assert_eq!(
        number(s.disk_of_mount_point(POD_MOUNT)),
        Some("253:32".into())
    );
    assert_eq!(
        number(s.disk_of_mount_point("/var/lib/etcd")),
        Some("253:16".into())
    );
    assert_eq!(number(s.disk_of_mount_point("/")), Some("253:0".into()));
}

#[test]
fn a_partition_number_that_is_not_major_minor_maps_to_no_disk() {
    assert_eq!(disk_number_of("253:35").as_deref(), Some("253:32"));
    assert_eq!(disk_number_of("259:1").as_deref(), Some("259:0"));
    assert_eq!(disk_number_of("x:1"), None);
    assert_eq!(disk_number_of("253"), None);
}

#[test]
fn scans_this_machine_with_or_without_lvm_tools() {
    let has = |p: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
    };
    if !has("lsblk") || !has("findmnt") {
        eprintln!("skipped: lsblk or findmnt is not installed");
        return;
    }
    let s = LocalStorageInfo::scan().unwrap();
    for (disk, number) in &s.disk_number {
        assert!(disk.starts_with("/dev/"), "{disk}");
        assert_eq!(s.number_disk.get(number), Some(disk));
    }
    assert!(
        s.mount_point_disk.contains_key("/"),
        "{:?}",
        s.mount_point_disk
    );
}
