//! The real dlopen path of `os::nvml` against the NVML stand-in (`tests/nvml/fake_nvml.c`),
//! compiled here with the machine's C compiler.

use koord::os::nvml::{Nvml, sysfs_bus_id};

pub use crate::common::nvml::{fake_nvml, fake_nvml_with};

#[test]
fn stand_in_gpus_come_through_dlopen() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = fake_nvml(dir.path(), 4) else {
        return;
    };
    let nvml = Nvml::open(lib.to_str().unwrap())
        .unwrap()
        .expect("library present");
    assert_eq!(nvml.driver_version().unwrap(), "535.104.05");
    let gpus = nvml.gpus().unwrap();
    assert_eq!(gpus.len(), 4);
    assert_eq!(gpus[3].minor, 3);
    assert_eq!(gpus[3].uuid, "GPU-00000000-0000-0000-0000-000000000003");
    assert_eq!(gpus[0].model, "NVIDIA A100-SXM4-80GB");
    assert_eq!(gpus[0].memory_total, 80 << 30);
    assert_eq!(gpus[1].memory_used, 2 << 30);
    assert_eq!(gpus[2].util_gpu, 20);
    assert_eq!(gpus[1].bus_id, "0000:11:00.0");
}

#[test]
fn no_library_means_no_gpus() {
    assert!(
        Nvml::open("/nonexistent/libnvidia-ml.so.1")
            .unwrap()
            .is_none()
    );
    assert!(Nvml::open("libkoord-no-such-nvml.so.1").unwrap().is_none());
    assert_eq!(sysfs_bus_id("00000000:1A:00.0"), "0000:1a:00.0");
    assert_eq!(sysfs_bus_id("0000:1a:00.0"), "0000:1a:00.0");
}

/// A fake sysfs where the stand-in's first GPU (bus 0000:10:00.0) sits on NUMA node 1
/// under root complex pci0000:10; the Device entries built from NVML carry that topology.
#[test]
fn device_infos_from_the_stand_in_and_a_fake_sysfs() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = fake_nvml(dir.path(), 2) else {
        return;
    };
    let sys = dir.path().join("sys");
    let dev = sys.join("devices/pci0000:10/0000:10:00.0");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("numa_node"), "1\n").unwrap();
    let links = sys.join("bus/pci/devices");
    std::fs::create_dir_all(&links).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:10/0000:10:00.0",
        links.join("0000:10:00.0"),
    )
    .unwrap();
    let host = koord::os::system::Host::new(dir.path().join("proc"), &sys);
    assert_eq!(
        host.pci_placement("0000:10:00.0"),
        Some((1, "pci0000:10".to_string()))
    );
    assert_eq!(host.pci_placement("0000:11:00.0"), None);

    let nvml = Nvml::open(lib.to_str().unwrap()).unwrap().unwrap();
    let gpus = nvml.gpus().unwrap();
    let infos =
        koord::koordlet::devices::gpu_infos(&gpus, |b| host.pci_placement(b), &Default::default());
    assert_eq!(infos.len(), 2);
    let t = infos[0].topology.as_ref().expect("GPU 0's topology");
    assert_eq!((t.node_id, t.pcie_id.as_str()), (1, "pci0000:10"));
    assert!(infos[1].topology.is_none());
    let labels = koord::koordlet::devices::gpu_labels(&gpus, &nvml.driver_version().unwrap());
    assert_eq!(labels["node.koordinator.sh/gpu-model"], "A100-SXM4-80GB");
}

/// The real koordlet, gate Accelerators on (Koordinator's flag syntax), NVML = the
/// stand-in: the Device of its node appears with both GPUs, the labels and a Node owner.
#[test]
fn koordlet_reports_the_device_of_its_node() {
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = fake_nvml(dir.path(), 2) else {
        return;
    };
    let (rt, mut api, mut koord, d) = koordlet_device(dir.path(), lib.to_str().unwrap(), None);
    let infos = d.spec.devices.clone().unwrap_or_default();
    assert_eq!(infos.len(), 2, "{d:?}");
    assert_eq!(
        infos[1].uuid.as_deref(),
        Some("GPU-00000000-0000-0000-0000-000000000001")
    );
    let labels = d.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["node.koordinator.sh/gpu-vendor"], "nvidia");
    assert_eq!(labels["node.koordinator.sh/gpu-model"], "A100-SXM4-80GB");
    assert_eq!(
        labels["node.koordinator.sh/gpu-driver-version"],
        "535.104.05"
    );
    let owner = &d.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", "sim-node-0")
    );
    koord.signal("TERM");
    koord.wait_exit(Duration::from_secs(30)).expect("exit");
    rt.block_on(api.stop());
}

/// NVML's Xid events through dlopen: every GPU registers; an Xid on one GPU names it, an
/// event on no one GPU has no bus id; a GPU too old for events is listed as such.
#[test]
fn xid_events_come_through_the_event_set() {
    let dir = tempfile::tempdir().unwrap();
    let xid = dir.path().join("xid");
    let define = format!("FAKE_NVML_XID_FILE=\"{}\"", xid.display());
    let Some(lib) = fake_nvml_with(dir.path(), 2, &[define]) else {
        return;
    };
    let nvml = Nvml::open(lib.to_str().unwrap()).unwrap().unwrap();
    let watch = nvml.watch_xids().unwrap().expect("the stand-in has events");
    assert!(watch.unsupported.is_empty());
    assert_eq!(watch.wait(50).unwrap(), None, "nothing yet");
    std::fs::write(&xid, "1 79\n").unwrap();
    let e = watch.wait(2_000).unwrap().expect("the Xid");
    assert_eq!((e.bus_id.as_deref(), e.xid), (Some("0000:11:00.0"), 79));
    std::fs::write(&xid, "-1 48\n").unwrap();
    let e = watch.wait(2_000).unwrap().expect("the Xid");
    assert_eq!((e.bus_id, e.xid), (None, 48));
    drop(watch);

    let old = tempfile::tempdir().unwrap();
    let define = "FAKE_NVML_NO_EVENTS".to_string();
    let Some(lib) = fake_nvml_with(old.path(), 2, &[define]) else {
        return;
    };
    let nvml = Nvml::open(lib.to_str().unwrap()).unwrap().unwrap();
    let watch = nvml.watch_xids().unwrap().unwrap();
    assert_eq!(watch.unsupported, ["0000:10:00.0", "0000:11:00.0"]);
}

/// The real koordlet with the stand-in: an Xid 79 on GPU 1 turns its Device entry
/// unhealthy with Koordinator's `Healthy=False` condition; GPU 0 stays healthy.
#[test]
fn an_xid_makes_the_koordlet_report_its_gpu_unhealthy() {
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let xid = dir.path().join("xid");
    let define = format!("FAKE_NVML_XID_FILE=\"{}\"", xid.display());
    let Some(lib) = fake_nvml_with(dir.path(), 2, &[define]) else {
        return;
    };
    let (rt, mut api, mut koord, d) = koordlet_device(dir.path(), lib.to_str().unwrap(), None);
    let infos = d.spec.devices.clone().unwrap_or_default();
    assert!(infos.iter().all(|i| i.health), "{infos:?}");
    std::fs::write(&xid, "1 79\n").unwrap();
    let devices: kube::Api<koord::api::scheduling::device::Device> =
        kube::Api::all(api.client.clone());
    // 60 s: once (of many CI runs) a loaded machine took more than 20 s here.
    let sick = rt.block_on(async {
        for _ in 0..300 {
            let d = devices.get("sim-node-0").await.unwrap();
            let infos = d.spec.devices.unwrap_or_default();
            if infos.iter().any(|i| !i.health) {
                return infos;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("GPU 1 never reported unhealthy\n{}", koord.logs());
    });
    assert!(sick[0].health && sick[0].conditions.is_none());
    assert!(!sick[1].health);
    let c = &sick[1].conditions.as_ref().unwrap()[0];
    assert_eq!(
        (
            c.type_.as_str(),
            c.status.as_str(),
            c.reason.as_str(),
            c.message.as_str()
        ),
        (
            "Healthy",
            "False",
            "Xid79",
            "Xid error detected on device, error code: 79"
        )
    );
    koord.signal("TERM");
    koord.wait_exit(Duration::from_secs(30)).expect("exit");
    rt.block_on(api.stop());
}

/// `koord device-scan --oneshot` over a fake PCI bus writes the daemon's file; a koordlet
/// (Koordinator's `-xpu-device-infos-dir` flag) reports those XPUs as the node's GPUs.
#[test]
fn device_scan_feeds_the_koordlet() {
    use crate::common::koord_bin;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("sys");
    for (addr, device) in [("0000:81:00.0", "0xd801"), ("0000:82:00.0", "0xd801")] {
        let dev = sys.join("devices/pci0000:80").join(addr);
        std::fs::create_dir_all(&dev).unwrap();
        for (f, v) in [
            ("vendor", "0x19e5"),
            ("device", device),
            ("class", "0x120000"),
            ("numa_node", "0"),
        ] {
            std::fs::write(dev.join(f), v).unwrap();
        }
        let bus = sys.join("bus/pci/devices");
        std::fs::create_dir_all(&bus).unwrap();
        std::os::unix::fs::symlink(
            format!("../../../devices/pci0000:80/{addr}"),
            bus.join(addr),
        )
        .unwrap();
    }
    let xpu_dir = dir.path().join("xpu-device-infos");
    let out = std::process::Command::new(koord_bin())
        .args(["device-scan", "--oneshot", "--sys-root"])
        .arg(&sys)
        .arg("--prints-output-file")
        .arg(xpu_dir.join("ic-device"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 device(s) written"));

    let (rt, mut api, mut koord, d) =
        koordlet_device(dir.path(), "/nonexistent/libnvidia-ml.so.1", Some(&xpu_dir));
    let infos = d.spec.devices.clone().unwrap_or_default();
    assert_eq!(infos.len(), 2, "{d:?}");
    assert_eq!(infos[0].uuid.as_deref(), Some("0000:81:00.0"));
    assert_eq!(infos[1].minor, Some(1));
    assert_eq!(
        infos[0].topology.as_ref().map(|t| t.pcie_id.as_str()),
        Some("pci0000:80")
    );
    let labels = d.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["node.koordinator.sh/gpu-vendor"], "huawei");
    assert_eq!(labels["node.koordinator.sh/gpu-model"], "d801");
    koord.signal("TERM");
    koord.wait_exit(Duration::from_secs(30)).expect("exit");
    rt.block_on(api.stop());
}

/// A Device someone deletes is reported again within a minute, though what the koordlet
/// finds has not changed.
#[test]
fn a_deleted_device_is_reported_again() {
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let xpu_dir = dir.path().join("xpu-device-infos");
    std::fs::create_dir_all(&xpu_dir).unwrap();
    let one = r#"[{"vendor": "huawei", "model": "Ascend-910B3", "uuid": "npu-1-0", "minor": "0",
        "resources": {"koordinator.sh/gpu-memory": "64Gi"}, "status": {"healthy": true}}]"#;
    std::fs::write(xpu_dir.join("ic-device"), one).unwrap();
    let (rt, mut api, mut koord, d) =
        koordlet_device(dir.path(), "/nonexistent/libnvidia-ml.so.1", Some(&xpu_dir));
    assert_eq!(d.spec.devices.unwrap_or_default().len(), 1);
    let devices: kube::Api<koord::api::scheduling::device::Device> =
        kube::Api::all(api.client.clone());
    let back = rt.block_on(async {
        devices
            .delete("sim-node-0", &Default::default())
            .await
            .unwrap();
        for _ in 0..450 {
            if let Ok(Some(d)) = devices.get_opt("sim-node-0").await {
                return Some(d);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    });
    let back = back.unwrap_or_else(|| panic!("the Device never came back\n{}", koord.logs()));
    assert_eq!(
        back.spec.devices.unwrap_or_default()[0].uuid.as_deref(),
        Some("npu-1-0")
    );
    koord.signal("TERM");
    koord.wait_exit(Duration::from_secs(30)).expect("exit");
    rt.block_on(api.stop());
}

/// The daemon's loop: the file appears, and SIGTERM removes it (it would go stale).
#[test]
fn device_scan_daemon_removes_its_file_on_exit() {
    use crate::common::{Koord, wait_until};
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("xpu/ic-device");
    let mut daemon = Koord::start(
        &[
            "device-scan",
            "--sleep-interval=1s",
            &format!("--sys-root={}", dir.path().join("no-sys").display()),
            &format!("--prints-output-file={}", file.display()),
        ],
        &[],
        dir.path(),
    );
    assert!(
        wait_until(Duration::from_secs(20), || file.exists()),
        "{}",
        daemon.logs()
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "[]");
    daemon.signal("TERM");
    let status = daemon.wait_exit(Duration::from_secs(20)).expect("exit");
    assert!(status.success(), "{}", daemon.logs());
    assert!(!file.exists(), "the file outlived the daemon");
}

/// A koordlet (gate Accelerators, NVML from `nvml`, the daemon's files from `xpu_dir`) for
/// sim-node-0 of two fake nodes, and the first Device it reports.
fn koordlet_device(
    dir: &std::path::Path,
    nvml: &str,
    xpu_dir: Option<&std::path::Path>,
) -> (
    tokio::runtime::Runtime,
    crate::common::TestApi,
    crate::common::Koord,
    koord::api::scheduling::device::Device,
) {
    use crate::common::{Koord, free_port, kubeconfig};
    use std::time::Duration;

    let rt = tokio::runtime::Runtime::new().unwrap();
    let port = free_port();
    let api = rt.block_on(crate::quota::two_nodes(port));
    let kc = kubeconfig(dir, port);
    let mut args = vec![
        "--role=koordlet".to_string(),
        format!("--kubeconfig={}", kc.display()),
        format!("--admin-addr=127.0.0.1:{}", free_port()),
        format!("--data-dir={}", dir.join("data").display()),
        "--node-name=sim-node-0".into(),
        "-feature-gates=Accelerators=true".into(),
        format!("-runtime-hooks-addr={}/koordlet.sock", dir.display()),
    ];
    if let Some(x) = xpu_dir {
        args.push(format!("-xpu-device-infos-dir={}", x.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let koord = Koord::start(
        &args,
        &[
            ("KOORD_KOORDLET__DEVICES__NVML_LIBRARY", nvml),
            ("KOORD_KOORDLET__DEVICES__SYNC_INTERVAL_SECONDS", "1"),
        ],
        dir,
    );
    let devices: kube::Api<koord::api::scheduling::device::Device> =
        kube::Api::all(api.client.clone());
    let got = rt.block_on(async {
        for _ in 0..150 {
            if let Ok(Some(d)) = devices.get_opt("sim-node-0").await {
                return Some(d);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    });
    let d = got.unwrap_or_else(|| panic!("no Device reported:\n{}", koord.logs()));
    (rt, api, koord, d)
}

/// Per-process accounting: the stand-in puts processes on its GPUs; the GPU collector
/// sums them per container and pod by the pids in their cgroups (Koordinator's
/// `getPodGPUUsage`), and processes of no pod count for none.
#[test]
fn pod_and_container_gpu_usage_from_per_process_accounting() {
    use koord::koordlet::collectors::gpu::{GpuUsage, owner_key};
    use koord::koordlet::collectors::{CollectEnv, Collector, Shared};
    use koord::koordlet::informer::{PodMeta, States};
    use koord::koordlet::store::MetricKind;
    use koord::os::cgroup::{Cgroups, Driver, Resource, Version};
    let dir = tempfile::tempdir().unwrap();
    // GPU 0: pid 4242 (8 GiB, 35 %); GPU 1: pids 4242 and 4243 (1 GiB, 10 % each) and
    // 999, which is no pod's.
    let procs = "0:4242:8589934592:35,1:4242:1073741824:10,1:4243:1073741824:10,1:999:5:5";
    let Some(lib) = fake_nvml_with(dir.path(), 2, &[format!("FAKE_NVML_PROCS=\"{procs}\"")]) else {
        return;
    };
    let nvml = Nvml::open(lib.to_str().unwrap()).unwrap().unwrap();
    assert_eq!(nvml.gpus().unwrap()[1].processes.len(), 3);
    drop(nvml);
    let cgroups = Cgroups::new(dir.path().join("cgroup"), Version::V1, Driver::Cgroupfs, "");
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "train", "namespace": "default", "uid": "u-train"},
        "spec": {"containers": [{"name": "main", "image": "i"}, {"name": "side", "image": "i"}]},
        "status": {"phase": "Running", "qosClass": "Burstable", "containerStatuses": [
            {"name": "main", "containerID": "containerd://c-main", "image": "i", "imageID": "",
             "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "side", "containerID": "containerd://c-side", "image": "i", "imageID": "",
             "ready": true, "restartCount": 0, "state": {"running": {}}}]}
    }))
    .unwrap();
    let meta = PodMeta::new(pod, &cgroups).unwrap();
    for (c, pids) in meta.containers.iter().zip(["4242\n", "4243\n"]) {
        let f = cgroups.file(Resource::Procs, &c.dir);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, pids).unwrap();
    }
    let states = States {
        pods: std::sync::Arc::new(vec![meta]),
        ..States::default()
    };
    let host = koord::os::system::Host::new(dir.path().join("proc"), dir.path().join("sys"));
    let env = CollectEnv {
        host: &host,
        cgroups: &cgroups,
        states: &states,
        now_ms: 1_000,
        mono_ns: 1,
        clk_tck: 100,
    };
    let mut collector = GpuUsage::new(lib.to_str().unwrap(), std::time::Duration::from_secs(1));
    let mut out = Vec::new();
    collector
        .collect(&env, &mut Shared::default(), &mut out)
        .unwrap();
    let value = |kind, owner: (&'static str, &str), minor, uuid: &str| {
        let k = owner_key(kind, owner, minor, uuid);
        out.iter().find(|(key, _)| *key == k).map(|(_, p)| p.value)
    };
    let (g0, g1) = (
        "GPU-00000000-0000-0000-0000-000000000000",
        "GPU-00000000-0000-0000-0000-000000000001",
    );
    let pod = ("pod_uid", "u-train");
    assert_eq!(value(MetricKind::PodGpuCoreUsage, pod, 0, g0), Some(35.0));
    assert_eq!(
        value(MetricKind::PodGpuMemoryUsage, pod, 0, g0),
        Some((8u64 << 30) as f64)
    );
    assert_eq!(
        value(MetricKind::PodGpuCoreUsage, pod, 1, g1),
        Some(20.0),
        "both containers"
    );
    assert_eq!(
        value(MetricKind::PodGpuMemoryUsage, pod, 1, g1),
        Some((2u64 << 30) as f64)
    );
    let side = ("container_id", "c-side");
    assert_eq!(
        value(MetricKind::ContainerGpuCoreUsage, side, 1, g1),
        Some(10.0)
    );
    assert_eq!(
        value(MetricKind::ContainerGpuCoreUsage, side, 0, g0),
        None,
        "not on GPU 0"
    );
}

/// Koordinator's daemon settings from the environment and its config file: `KDD_ONESHOT`
/// and `KDD_CONFIG_FILE` (whose `printsOutputFile` is used), no flag given.
#[test]
fn device_scan_reads_kdd_environment_and_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("from-file/ic-device");
    let cfg = dir.path().join("kdd.yaml");
    std::fs::write(
        &cfg,
        format!(
            "version: v1\nflags:\n  kdd:\n    printsOutputFile: {}\n",
            out_file.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(crate::common::koord_bin())
        .args(["device-scan", "--sys-root"])
        .arg(dir.path().join("no-sys"))
        .env("KDD_ONESHOT", "1")
        .env("KDD_CONFIG_FILE", &cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out_file).unwrap().trim(), "[]");
}
