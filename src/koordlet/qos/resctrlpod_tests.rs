//! A pod's schemata from its annotation, and its group made, filled and removed on a
//! stand-in resctrl tree.

use super::*;
use crate::koordlet::informer::PodMeta;
use crate::os::cgroup::{Cgroups, Driver, Version};

fn rdt(ids: &[u32]) -> Rdt<'_> {
    Rdt {
        cbm: "7ff",
        cache_ids: ids,
        amd: false,
        mba: true,
    }
}

#[test]
fn schemata_from_the_annotation() {
    let ids = [0, 1];
    let both = r#"{"llc": {"schemata": {"range": [0, 30]}}, "mb": {"schemata": {"percent": 35}}}"#;
    assert_eq!(
        pod_schemata(both, &rdt(&ids)).unwrap(),
        "L3:0=f;1=f\nMB:0=40;1=40\n",
        "Intel MBA rounds up to tens"
    );
    let per_cache = r#"{"llc": {"schemataPerCache": [{"cacheID": 0, "range": [0, 50]}, {"cacheID": 1, "range": [50, 100]}]}}"#;
    assert_eq!(
        pod_schemata(per_cache, &rdt(&ids)).unwrap(),
        "L3:0=3f;1=7c0\n"
    );
    let partial = r#"{"llc": {"schemataPerCache": [{"cacheID": 0, "range": [0, 50]}]}}"#;
    assert_eq!(
        pod_schemata(partial, &rdt(&ids)).unwrap(),
        "",
        "a cache without a mask: no L3 line (ValidateL3)"
    );
    let amd = Rdt {
        amd: true,
        ..rdt(&ids)
    };
    assert_eq!(
        pod_schemata(r#"{"mb": {"schemata": {"percent": 100}}}"#, &amd).unwrap(),
        "MB:0=2048;1=2048\n"
    );
    let no_mba = Rdt {
        mba: false,
        ..rdt(&ids)
    };
    assert_eq!(
        pod_schemata(r#"{"mb": {"schemata": {"percent": 50}}}"#, &no_mba).unwrap(),
        ""
    );
    let err = pod_schemata("{not json", &rdt(&ids)).unwrap_err();
    assert!(err.contains("node.koordinator.sh/resctrl"), "{err}");
}

/// A host whose CPU has CAT and MBA (resctrl not mounted yet).
fn intel_host(proc_root: &Path, sys_root: &Path) -> Host {
    let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu cat_l3 mba\n";
    std::fs::write(proc_root.join("cpuinfo"), cpuinfo).unwrap();
    Host::new(proc_root, sys_root)
}

fn pod(uid: &str, annotation: Option<&str>, cgroups: &Cgroups) -> PodMeta {
    let mut p = serde_json::json!({
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "qosClass": "Burstable", "containerStatuses": [
            {"name": "c", "containerID": format!("containerd://{uid}-c"), "image": "i", "imageID": "",
             "ready": true, "restartCount": 0, "state": {"running": {}}}]}
    });
    if let Some(a) = annotation {
        p["metadata"]["annotations"] = serde_json::json!({ANNOTATION_RESCTRL: a});
    }
    PodMeta::new(serde_json::from_value(p).unwrap(), cgroups).unwrap()
}

#[test]
fn a_pods_group_is_made_filled_and_removed() {
    let (proc_root, sys_root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = intel_host(proc_root.path(), sys_root.path());
    std::fs::create_dir_all(host.resctrl_root().join("info/L3")).unwrap();
    std::fs::write(host.resctrl_root().join("info/L3/cbm_mask"), "7ff\n").unwrap();
    let cgroups = Cgroups::new(
        sys_root.path().join("cgroup"),
        Version::V1,
        Driver::Cgroupfs,
        "",
    );
    let annotated = pod(
        "u1",
        Some(r#"{"llc": {"schemata": {"range": [0, 30]}}}"#),
        &cgroups,
    );
    let plain = pod("u2", None, &cgroups);
    let tasks = cgroups.file(Resource::Tasks, &annotated.containers[0].dir);
    std::fs::create_dir_all(tasks.parent().unwrap()).unwrap();
    std::fs::write(&tasks, "101\n102\n").unwrap();
    let ex = Executor::new(cgroups.clone(), std::time::Duration::from_secs(60));
    let states = |pods: Vec<PodMeta>| States {
        pods: Arc::new(pods),
        ..States::default()
    };
    let written = pass(&states(vec![annotated.clone(), plain]), &host, &ex).unwrap();
    let group = host.resctrl_root().join("koordlet-u1");
    assert_eq!(
        written,
        [
            ("schemata", "koordlet-u1".to_string()),
            ("tasks", "koordlet-u1".to_string())
        ]
    );
    assert_eq!(
        std::fs::read_to_string(group.join("schemata")).unwrap(),
        "L3:0=f\n"
    );
    assert!(
        !host.resctrl_root().join("koordlet-u2").exists(),
        "no annotation, no group"
    );
    // The stand-in's tasks file keeps the last id written; the kernel's lists them all.
    std::fs::write(group.join("tasks"), "101\n102\n").unwrap();
    assert!(
        pass(&states(vec![annotated]), &host, &ex)
            .unwrap()
            .is_empty(),
        "nothing new"
    );
    let written = pass(&states(vec![]), &host, &ex).unwrap();
    assert_eq!(written, [("removed", "koordlet-u1".to_string())]);
    assert!(!group.exists());
}

/// The container hook makes the pod's group with its schemata before the runtime puts the
/// container in it (NRI's `rdtClass`); without the annotation or resctrl, nothing.
#[test]
fn the_container_hook_readies_the_group() {
    use crate::kernel::hookproto::{ContainerResourceHookRequest, PodSandboxMetadata};
    let (proc_root, sys_root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = intel_host(proc_root.path(), sys_root.path());
    let mut req = ContainerResourceHookRequest {
        pod_meta: Some(PodSandboxMetadata {
            uid: "u9".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(ready_group(&host, &req), Ok(None), "no annotation");
    req.pod_annotations.insert(
        ANNOTATION_RESCTRL.into(),
        r#"{"llc": {"schemata": {"range": [0, 30]}}, "mb": {"schemata": {"percent": 20}}}"#.into(),
    );
    assert_eq!(ready_group(&host, &req), Ok(None), "no resctrl mounted");
    std::fs::create_dir_all(host.resctrl_root().join("info/L3")).unwrap();
    std::fs::write(host.resctrl_root().join("info/L3/cbm_mask"), "7ff\n").unwrap();
    assert_eq!(
        ready_group(&host, &req),
        Ok(Some("koordlet-u9".to_string()))
    );
    let schemata = host.resctrl_root().join("koordlet-u9/schemata");
    assert_eq!(
        std::fs::read_to_string(schemata).unwrap(),
        "L3:0=f\nMB:0=20\n"
    );
}
