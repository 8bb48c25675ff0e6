//! The node's `Device` object from what the host reports (Koordinator's
//! `states_device_linux.go`): per NVIDIA GPU its uuid, minor, health, the shareable
//! resources `koordinator.sh/gpu-core` = 100, `gpu-memory` = total bytes,
//! `gpu-memory-ratio` = 100, and PCIe/NUMA topology when sysfs knows the device; node
//! labels vendor, model (only when every GPU is the same model) and driver version; per RDMA
//! NIC (gate `RDMADevices`) its PCI address, minor, port health, `koordinator.sh/rdma` = 100
//! and its SR-IOV VFs.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use serde::{Deserialize, Serialize};

use super::gpu_health::{self, Unhealthy};
use super::informer::Informer;
use crate::api::extension::resources::RDMA;
use crate::api::scheduling::device::{
    Device, DeviceInfo, DeviceSpec, DeviceTopology, VirtualFunction, VirtualFunctionGroup,
};
use crate::api::xpu::XpuDevice;
use crate::kernel::Shutdown;
use crate::os::nvml::{Gpu, Nvml};
use crate::os::rdma::RdmaNic;
use crate::os::system::Host;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `koordlet.devices`: where NVML is and how often the Device is refreshed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// NVML, by name (the loader's search path) or path; absent library = no GPUs.
    pub nvml_library: String,
    /// Koordinator's `--node-topology-sync-interval` for the Device (3 s).
    pub sync_interval_seconds: u64,
    /// `--xpu-device-infos-dir`: the device daemon's files; when they list devices, those
    /// are the node's GPUs (NVML is not asked).
    pub xpu_device_infos_dir: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            nvml_library: crate::os::nvml::DEFAULT_LIBRARY.into(),
            sync_interval_seconds: 3,
            xpu_device_infos_dir: "/var/run/koordlet/xpu-device-infos/".into(),
        }
    }
}

pub use crate::api::extension::keys::{
    LABEL_GPU_DRIVER_VERSION, LABEL_GPU_MODEL, LABEL_GPU_VENDOR,
};
pub use crate::api::extension::resources::{GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO};

/// One `type: gpu` entry per GPU, ordered by minor. `placement` maps a PCI bus id to
/// (NUMA node, PCIe root); topology is set only when both are known, as upstream does. A
/// GPU in `unhealthy` (by bus id) has `health: false` and a `Healthy=False` condition.
pub fn gpu_infos(
    gpus: &[Gpu],
    placement: impl Fn(&str) -> Option<(i32, String)>,
    unhealthy: &BTreeMap<String, Unhealthy>,
) -> Vec<DeviceInfo> {
    let mut out: Vec<DeviceInfo> = gpus
        .iter()
        .map(|g| {
            let topology = placement(&g.bus_id)
                .filter(|(numa, pcie)| *numa >= 0 && !pcie.is_empty())
                .map(|(numa, pcie)| DeviceTopology {
                    socket_id: -1,
                    node_id: numa,
                    pcie_id: pcie,
                    bus_id: Some(g.bus_id.clone()),
                });
            DeviceInfo {
                type_: Some("gpu".into()),
                uuid: Some(g.uuid.clone()),
                minor: i32::try_from(g.minor).ok(),
                health: !unhealthy.contains_key(&g.bus_id),
                conditions: unhealthy
                    .get(&g.bus_id)
                    .map(|u| vec![unhealthy_condition(u)]),
                resources: Some(BTreeMap::from([
                    (GPU_CORE.to_string(), Quantity("100".into())),
                    (GPU_MEMORY.to_string(), Quantity(g.memory_total.to_string())),
                    (GPU_MEMORY_RATIO.to_string(), Quantity("100".into())),
                ])),
                topology,
                ..Default::default()
            }
        })
        .collect();
    out.sort_by_key(|d| d.minor);
    out
}

/// `getGPUDeviceConditions` for an unhealthy GPU (healthy ones carry none, as upstream).
fn unhealthy_condition(u: &Unhealthy) -> Condition {
    Condition {
        type_: "Healthy".into(),
        status: "False".into(),
        reason: u.code.clone(),
        message: u.message.clone(),
        last_transition_time: Time(
            u.since
                .parse()
                .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
        ),
        observed_generation: None,
    }
}

/// Upstream's model label: the common product name without `NVIDIA `, spaces as `-`
/// (`A100 SXM4 80GB` → `A100-SXM4-80GB`); `None` when models differ or one is empty.
pub fn gpu_model(gpus: &[Gpu]) -> Option<String> {
    let first = &gpus.first()?.model;
    if first.is_empty() || gpus.iter().any(|g| &g.model != first) {
        return None;
    }
    Some(first.trim_start_matches("NVIDIA ").replace(' ', "-"))
}

/// The node labels the Device carries (vendor, model, driver version); none without GPUs.
pub fn gpu_labels(gpus: &[Gpu], driver: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if gpus.is_empty() {
        return out;
    }
    out.insert(LABEL_GPU_VENDOR.into(), "nvidia".into());
    if let Some(model) = gpu_model(gpus) {
        out.insert(LABEL_GPU_MODEL.into(), model);
    }
    if !driver.is_empty() {
        out.insert(LABEL_GPU_DRIVER_VERSION.into(), driver.into());
    }
    out
}

/// One `type: rdma` entry per NIC (`koordinator.sh/rdma` = 100), its VFs in one group.
pub fn rdma_infos(
    nics: &[RdmaNic],
    placement: impl Fn(&str) -> Option<(i32, String)>,
) -> Vec<DeviceInfo> {
    nics.iter()
        .map(|n| {
            let topology = placement(&n.bus_id).map(|(numa, pcie)| DeviceTopology {
                socket_id: -1,
                node_id: numa,
                pcie_id: pcie,
                bus_id: Some(n.bus_id.clone()),
            });
            let vfs: Vec<VirtualFunction> = n
                .vfs
                .iter()
                .map(|b| VirtualFunction {
                    minor: -1,
                    bus_id: Some(b.clone()),
                })
                .collect();
            DeviceInfo {
                type_: Some("rdma".into()),
                uuid: Some(n.bus_id.clone()),
                minor: Some(n.minor),
                health: n.healthy,
                resources: Some(BTreeMap::from([(RDMA.to_string(), Quantity("100".into()))])),
                topology,
                vf_groups: (!vfs.is_empty()).then(|| {
                    vec![VirtualFunctionGroup {
                        labels: None,
                        vfs: Some(vfs),
                    }]
                }),
                ..Default::default()
            }
        })
        .collect()
}

/// Every device the daemon's files list; a file that does not parse is skipped, named.
pub fn read_xpu_dir(dir: &std::path::Path) -> Vec<XpuDevice> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let parsed = std::fs::read(&f)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Vec<XpuDevice>>(&b).map_err(|e| e.to_string()));
        match parsed {
            Ok(list) => out.extend(list),
            Err(e) => tracing::warn!(file = %f.display(), error = %e, "XPU device file skipped"),
        }
    }
    out
}

/// One `type: gpu` entry per XPU (Koordinator's `buildXPUDevice`): its resources with
/// `gpu-memory-ratio` = 100 added and bare `gpu-core` / `gpu-memory` put under
/// `koordinator.sh/`, health from its status, ordered by uuid.
pub fn xpu_infos(xpus: &[XpuDevice]) -> Vec<DeviceInfo> {
    let mut out: Vec<DeviceInfo> = xpus
        .iter()
        .map(|x| {
            let mut resources = BTreeMap::from([(GPU_MEMORY_RATIO.to_string(), Quantity("100".into()))]);
            for (name, raw) in &x.resources {
                if crate::api::quantity::parse(raw).is_err() {
                    tracing::warn!(uuid = %x.uuid, resource = %name, value = %raw, "XPU resource skipped: not a quantity");
                    continue;
                }
                let name = match name.as_str() {
                    "gpu-core" | "gpu-memory" => format!("koordinator.sh/{name}"),
                    _ => name.clone(),
                };
                resources.insert(name, Quantity(raw.clone()));
            }
            let int = |s: &str| s.parse::<i32>().unwrap_or(-1);
            DeviceInfo {
                type_: Some("gpu".into()),
                uuid: Some(x.uuid.clone()),
                minor: x.minor.parse().ok(),
                health: x.status.as_ref().is_none_or(|s| s.healthy),
                resources: Some(resources),
                topology: x.topology.as_ref().map(|t| DeviceTopology {
                    socket_id: int(&t.socket_id),
                    node_id: int(&t.node_id),
                    pcie_id: t.pcie_id.clone(),
                    bus_id: (!t.bus_id.is_empty()).then(|| t.bus_id.clone()),
                }),
                ..Default::default()
            }
        })
        .collect();
    out.sort_by(|a, b| a.uuid.cmp(&b.uuid));
    out
}

/// What the host has now: GPUs (with the driver version) or the daemon's XPUs, and RDMA
/// NICs.
#[derive(Debug, Default)]
pub struct Found {
    pub gpus: Vec<Gpu>,
    /// GPUs the health watch marked, by bus id.
    pub unhealthy: BTreeMap<String, Unhealthy>,
    pub driver: String,
    pub xpus: Vec<XpuDevice>,
    pub nics: Vec<RdmaNic>,
}

/// The node's Device: GPU then RDMA entries, GPU labels, owned by the Node (deleted with it).
pub fn device_for(node: &Node, found: &Found, host: &Host) -> Device {
    let name = node.metadata.name.clone().unwrap_or_default();
    let (gpus, driver) = (&found.gpus, found.driver.as_str());
    let (mut infos, labels) = match found.xpus.first() {
        Some(first) => {
            let mut labels = BTreeMap::new();
            labels.insert(LABEL_GPU_VENDOR.to_string(), first.vendor.clone());
            labels.insert(LABEL_GPU_MODEL.to_string(), first.model.clone());
            labels.retain(|_, v| !v.is_empty());
            (xpu_infos(&found.xpus), labels)
        }
        None => (
            gpu_infos(gpus, |bus| host.pci_placement(bus), &found.unhealthy),
            gpu_labels(gpus, driver),
        ),
    };
    infos.extend(rdma_infos(&found.nics, |bus| host.pci_placement(bus)));
    let mut d = Device::new(
        &name,
        DeviceSpec {
            devices: Some(infos),
        },
    );
    d.metadata.labels = Some(labels);
    d.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name,
        uid: node.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    d
}

fn same(a: &Device, b: &Device) -> bool {
    a.spec == b.spec && a.metadata.labels == b.metadata.labels
}

/// NVML, when the library is there (one info line when not).
fn open_nvml(library: &str) -> Option<Nvml> {
    match Nvml::open(library) {
        Ok(Some(n)) => Some(n),
        Ok(None) => {
            tracing::info!(%library, "no NVML library: no GPUs to report");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "NVML did not load: no GPUs reported");
            None
        }
    }
}

/// What to look for: GPUs (gate `Accelerators`) and RDMA NICs (gate `RDMADevices`).
#[derive(Debug, Clone, Copy)]
pub struct Kinds {
    pub gpus: bool,
    pub rdma: bool,
}

fn find(nvml: Option<&Nvml>, kinds: Kinds, host: &Host, cfg: &Config) -> Result<Found, String> {
    let mut found = Found::default();
    if kinds.gpus {
        found.xpus = read_xpu_dir(std::path::Path::new(&cfg.xpu_device_infos_dir));
    }
    if let Some(n) = nvml.filter(|_| found.xpus.is_empty()) {
        found.gpus = n.gpus().map_err(|e| e.to_string())?;
        found.driver = n.driver_version().map_err(|e| e.to_string())?;
    }
    if kinds.rdma {
        found.nics = crate::os::rdma::scan(&host.sys_root);
    }
    Ok(found)
}

/// The Device of this node, every `syncIntervalSeconds`, written when it changed and
/// compared with the stored one at least once a minute (what others changed or deleted is
/// put back); nothing is written while the node has neither GPUs nor RDMA NICs.
pub async fn report_loop(
    client: kube::Client,
    informer: Informer,
    host: Host,
    (cfg, kinds): (Config, Kinds),
    shutdown: Shutdown,
) {
    let nvml = kinds.gpus.then(|| open_nvml(&cfg.nvml_library)).flatten();
    let stop_health = Arc::new(AtomicBool::new(false));
    let health = nvml
        .as_ref()
        .map(|_| gpu_health::spawn(cfg.nvml_library.clone(), stop_health.clone()));
    let api: Api<Device> = Api::all(client);
    let every = Duration::from_secs(cfg.sync_interval_seconds.max(1));
    // At least once a minute.
    let mut last = super::upsert::LastWritten::new(60 / cfg.sync_interval_seconds.max(1));
    loop {
        let states = informer.snapshot();
        let mut read = find(nvml.as_ref(), kinds, &host, &cfg);
        if let (Ok(found), Some(h)) = (read.as_mut(), &health) {
            found.unhealthy = h.lock().unwrap_or_else(|p| p.into_inner()).clone();
        }
        match (states.node.as_deref(), read) {
            (Some(node), Ok(found))
                if !found.gpus.is_empty() || !found.xpus.is_empty() || !found.nics.is_empty() =>
            {
                let want = device_for(node, &found, &host);
                if last.due(&want, same) {
                    let keep_status = |have: &Device, next: &mut Device| {
                        next.status = have.status.clone();
                    };
                    let w = super::upsert::write_if_changed(&api, want.clone(), same, keep_status);
                    match w.await {
                        Ok(_) => last.written(want),
                        Err(e) => tracing::debug!(error = %e, "Device not reported yet"),
                    }
                }
            }
            (_, Err(e)) => tracing::debug!(error = %e, "NVML read failed"),
            _ => {}
        }
        if !shutdown.sleep(every).await {
            stop_health.store(true, Ordering::Relaxed);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(minor: u32, model: &str) -> Gpu {
        Gpu {
            uuid: format!("GPU-{minor}"),
            minor,
            model: model.into(),
            memory_total: 16 << 30,
            memory_used: 0,
            util_gpu: 0,
            util_memory: 0,
            bus_id: format!("0000:1{minor}:00.0"),
            processes: Vec::new(),
        }
    }

    #[test]
    fn infos_resources_topology_and_order() {
        let gpus = [
            gpu(1, "NVIDIA A100 SXM4 80GB"),
            gpu(0, "NVIDIA A100 SXM4 80GB"),
        ];
        let placement = |bus: &str| (bus == "0000:10:00.0").then(|| (1, "pci0000:10".to_string()));
        let infos = gpu_infos(&gpus, placement, &BTreeMap::new());
        assert_eq!(infos[0].minor, Some(0));
        assert_eq!(
            infos[0].resources.as_ref().unwrap()[GPU_MEMORY].0,
            (16u64 << 30).to_string()
        );
        assert_eq!(infos[0].resources.as_ref().unwrap()[GPU_CORE].0, "100");
        let t = infos[0].topology.as_ref().unwrap();
        assert_eq!(
            (t.node_id, t.pcie_id.as_str(), t.socket_id),
            (1, "pci0000:10", -1)
        );
        assert!(
            infos[1].topology.is_none(),
            "unknown placement: no topology"
        );
        assert!(
            infos
                .iter()
                .all(|d| d.health && d.type_.as_deref() == Some("gpu") && d.conditions.is_none())
        );
        let sick = BTreeMap::from([(
            "0000:11:00.0".to_string(),
            Unhealthy {
                code: "Xid79".into(),
                message: "Xid error detected on device, error code: 79".into(),
                since: "2026-11-28T00:00:00Z".into(),
            },
        )]);
        let infos = gpu_infos(&gpus, placement, &sick);
        assert!(infos[0].health && infos[0].conditions.is_none());
        assert!(!infos[1].health);
        let c = &infos[1].conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("Healthy", "False", "Xid79")
        );
        assert_eq!(c.last_transition_time.0.to_string(), "2026-11-28T00:00:00Z");
    }

    #[test]
    fn xpu_entries_as_koordinator_builds_them() {
        let raw = serde_json::json!([
            {"vendor": "huawei", "model": "Ascend-910B", "uuid": "b", "minor": "1",
             "resources": {"huawei.com/npu-core": "20", "koordinator.sh/gpu-memory": "64Gi", "bad": "x y"},
             "topology": {"nodeID": "1", "pcieID": "pci0000:80", "busID": "0000:81:00.0"},
             "status": {"healthy": false, "errCode": "E1"}},
            {"vendor": "huawei", "model": "Ascend-910B", "uuid": "a", "minor": "0",
             "resources": {"gpu-core": "100", "gpu-memory": "32Gi"}}
        ]);
        let xpus: Vec<XpuDevice> = serde_json::from_value(raw).unwrap();
        let infos = xpu_infos(&xpus);
        assert_eq!(infos[0].uuid.as_deref(), Some("a"), "ordered by uuid");
        let r = infos[0].resources.as_ref().unwrap();
        assert_eq!(r[GPU_CORE].0, "100", "bare gpu-core under koordinator.sh/");
        assert_eq!(r[GPU_MEMORY].0, "32Gi");
        assert_eq!(r[GPU_MEMORY_RATIO].0, "100");
        assert!(infos[0].health && infos[0].topology.is_none());
        let b = &infos[1];
        assert!(!b.health);
        assert!(!b.resources.as_ref().unwrap().contains_key("bad"));
        let t = b.topology.as_ref().unwrap();
        assert_eq!(
            (t.socket_id, t.node_id, t.pcie_id.as_str()),
            (-1, 1, "pci0000:80")
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ic-device"),
            serde_json::to_vec(&xpus).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.path().join("broken"), "{").unwrap();
        assert_eq!(
            read_xpu_dir(dir.path()).len(),
            2,
            "the broken file is skipped"
        );
        assert!(read_xpu_dir(&dir.path().join("none")).is_empty());
    }

    #[test]
    fn rdma_entries_with_topology_and_vfs() {
        let nics = [
            RdmaNic {
                bus_id: "0000:3b:00.0".into(),
                minor: 0,
                healthy: true,
                vfs: vec!["0000:3b:00.2".into()],
            },
            RdmaNic {
                bus_id: "0000:5e:00.0".into(),
                minor: 1,
                healthy: false,
                vfs: vec![],
            },
        ];
        let placement = |b: &str| (b == "0000:5e:00.0").then(|| (1, "pci0000:5d".to_string()));
        let infos = rdma_infos(&nics, placement);
        let t = infos[1].topology.as_ref().unwrap();
        assert_eq!((t.node_id, t.pcie_id.as_str()), (1, "pci0000:5d"));
        assert!(!infos[1].health && infos[1].vf_groups.is_none());
        let vfs = infos[0].vf_groups.as_ref().unwrap()[0]
            .vfs
            .as_ref()
            .unwrap();
        assert_eq!(
            (vfs[0].bus_id.as_deref(), vfs[0].minor),
            (Some("0000:3b:00.2"), -1)
        );
        let r = infos[0].resources.as_ref().unwrap();
        assert_eq!(r["koordinator.sh/rdma"].0, "100");
        assert_eq!(infos[0].uuid.as_deref(), Some("0000:3b:00.0"));
    }

    #[test]
    fn model_and_labels_as_upstream_writes_them() {
        for (model, want) in [
            ("NVIDIA A100 SXM4 80GB", Some("A100-SXM4-80GB")),
            ("Tesla P100-PCIE-16GB", Some("Tesla-P100-PCIE-16GB")),
            ("GeForce RTX 2080 Ti", Some("GeForce-RTX-2080-Ti")),
            ("", None),
        ] {
            assert_eq!(gpu_model(&[gpu(0, model)]).as_deref(), want, "{model:?}");
        }
        assert_eq!(gpu_model(&[gpu(0, "Tesla T4"), gpu(1, "Tesla P40")]), None);
        let l = gpu_labels(&[gpu(0, "Tesla T4")], "535.104.05");
        assert_eq!(l[LABEL_GPU_VENDOR], "nvidia");
        assert_eq!(l[LABEL_GPU_MODEL], "Tesla-T4");
        assert_eq!(l[LABEL_GPU_DRIVER_VERSION], "535.104.05");
        assert!(gpu_labels(&[], "535").is_empty());
    }
}
