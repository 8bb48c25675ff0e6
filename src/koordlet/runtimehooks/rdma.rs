//! RDMADeviceInject (`pkg/koordlet/runtimehooks/hooks/rdma`): a container whose pod was
//! given RDMA devices (`scheduling.koordinator.sh/device-allocated`, `{"rdma": [{"id":
//! "<PCI address>", "extension": {"vfs": [{"busID": …}]}}]}`) gets `/dev/infiniband/rdma_cm`
//! and the uverbs device of each allocated function (the VFs when there are, else the
//! device itself), found under `/sys/bus/pci/devices/<address>/infiniband_verbs/`.
//!
//! Koordinator injects these only over NRI; its proxy protocol has no devices. koord sends
//! them in `container_devices`, a field of its own in the hook answer (an unknown field that
//! Koordinator's proxy ignores), which koord's proxy adds to CreateContainer's devices.

use std::path::PathBuf;

use crate::api::extension::keys::ANNOTATION_DEVICE_ALLOCATED;
use crate::kernel::hookproto::LinuxDevice;

pub const IB_DEV_DIR: &str = "/dev/infiniband";
pub const RDMA_CM: &str = "rdma_cm";

/// Where the host's sysfs and /dev are seen from the koordlet.
#[derive(Debug, Clone)]
pub struct Roots {
    pub sys: PathBuf,
    pub dev: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sys: "/sys".into(),
            dev: "/dev".into(),
        }
    }
}

/// The PCI addresses whose uverbs devices the pod was given.
fn addresses(allocated: &serde_json::Value) -> Vec<String> {
    let Some(devs) = allocated.get("rdma").and_then(|d| d.as_array()) else {
        return Vec::new();
    };
    let text = |v: Option<&serde_json::Value>| v.and_then(|s| s.as_str()).map(str::to_string);
    devs.iter()
        .flat_map(|d| {
            let vfs: Vec<String> = d
                .pointer("/extension/vfs")
                .and_then(|v| v.as_array())
                .map(|vfs| vfs.iter().filter_map(|vf| text(vf.get("busID"))).collect())
                .unwrap_or_default();
            if vfs.is_empty() {
                text(d.get("id")).into_iter().collect()
            } else {
                vfs
            }
        })
        .collect()
}

fn char_device(roots: &Roots, name: &str) -> Result<LinuxDevice, String> {
    let host = roots.dev.join("infiniband").join(name);
    let rdev = crate::os::knob::char_device(&host).map_err(|e| e.to_string())?;
    Ok(LinuxDevice {
        path: format!("{IB_DEV_DIR}/{name}"),
        r#type: "c".into(),
        major: libc::major(rdev) as i64,
        minor: libc::minor(rdev) as i64,
        file_mode: 0o666,
    })
}

fn uverbs(roots: &Roots, address: &str) -> Result<String, String> {
    if address.contains('/') || address.contains("..") {
        return Err(format!("PCI address {address:?} is not one"));
    }
    let dir: PathBuf = roots
        .sys
        .join("bus/pci/devices")
        .join(address)
        .join("infiniband_verbs");
    crate::os::knob::names(&dir)
        .into_iter()
        .next()
        .ok_or_else(|| format!("{} is empty or unreadable", dir.display()))
}

/// The devices a container of a pod with these annotations gets; none without an RDMA
/// allocation. An allocation whose devices are missing is an error (the proxy's failure
/// policy decides), as in Koordinator.
pub fn devices(
    annotations: &std::collections::HashMap<String, String>,
    roots: &Roots,
) -> Result<Vec<LinuxDevice>, String> {
    let Some(raw) = annotations.get(ANNOTATION_DEVICE_ALLOCATED) else {
        return Ok(Vec::new());
    };
    let allocated: serde_json::Value = serde_json::from_str(raw)
        .map_err(|e| format!("annotation {ANNOTATION_DEVICE_ALLOCATED}: {e}"))?;
    let addrs = addresses(&allocated);
    if addrs.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = vec![char_device(roots, RDMA_CM)?];
    for a in addrs {
        let name = uverbs(roots, &a)?;
        out.push(char_device(roots, &name)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vfs_win_over_the_device_and_devices_come_with_rdma_cm() {
        let a = serde_json::json!({"rdma": [
            {"minor": 0, "id": "0000:1f:00.0"},
            {"minor": 1, "id": "0000:2f:00.0", "extension": {"vfs": [{"busID": "0000:2f:00.2"}]}}],
            "gpu": [{"minor": 0}]});
        assert_eq!(addresses(&a), ["0000:1f:00.0", "0000:2f:00.2"]);

        let dir = tempfile::tempdir().unwrap();
        let roots = Roots {
            sys: dir.path().join("sys"),
            dev: dir.path().join("dev"),
        };
        for (addr, uv) in [("0000:1f:00.0", "uverbs0"), ("0000:2f:00.2", "uverbs3")] {
            let d = roots
                .sys
                .join("bus/pci/devices")
                .join(addr)
                .join("infiniband_verbs");
            std::fs::create_dir_all(d.join(uv)).unwrap();
        }
        // Stand-ins for the device nodes: links to /dev/null (a character device, 1:3).
        std::fs::create_dir_all(roots.dev.join("infiniband")).unwrap();
        for n in ["rdma_cm", "uverbs0", "uverbs3"] {
            std::os::unix::fs::symlink("/dev/null", roots.dev.join("infiniband").join(n)).unwrap();
        }
        let ann = [(ANNOTATION_DEVICE_ALLOCATED.to_string(), a.to_string())].into();
        let got = devices(&ann, &roots).unwrap();
        let paths: Vec<&str> = got.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/dev/infiniband/rdma_cm",
                "/dev/infiniband/uverbs0",
                "/dev/infiniband/uverbs3"
            ]
        );
        assert!(
            got.iter()
                .all(|d| d.r#type == "c" && (d.major, d.minor) == (1, 3) && d.file_mode == 0o666)
        );

        std::fs::remove_file(roots.dev.join("infiniband/uverbs3")).unwrap();
        let err = devices(&ann, &roots).unwrap_err();
        assert!(err.contains("uverbs3"), "{err}");
        let none = [(
            ANNOTATION_DEVICE_ALLOCATED.to_string(),
            r#"{"gpu":[{"minor":0}]}"#.to_string(),
        )]
        .into();
        assert!(devices(&none, &roots).unwrap().is_empty());
    }
}
