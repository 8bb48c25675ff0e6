//! RDMA NICs from a rooted sysfs, as Koordinator's RDMA collector finds them
//! (`pkg/koordlet/metricsadvisor/devices/rdma`, `util/system/rdma.go`): every PCI network
//! function (class 0x02) that is not an SR-IOV VF and has an `infiniband/` device; its
//! minor from the first ibdev name (`mlx5_3` → 3), health from every port's `state`
//! being ACTIVE, and its VFs when SR-IOV is configured.

use std::path::Path;

use super::pci::names;

/// One RDMA physical function.
#[derive(Debug, Clone, PartialEq)]
pub struct RdmaNic {
    pub bus_id: String,
    pub minor: i32,
    pub healthy: bool,
    /// The VFs' PCI addresses, sorted.
    pub vfs: Vec<String>,
}

/// `mlx<N>_<minor>` → minor.
pub fn minor_of(ibdev: &str) -> Option<i32> {
    let rest = ibdev.strip_prefix("mlx")?;
    let (n, minor) = rest.split_once('_')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    minor.parse().ok()
}

fn healthy(sys: &Path, ibdev: &str) -> bool {
    let ports = sys.join("class/infiniband").join(ibdev).join("ports");
    let list = names(&ports);
    !list.is_empty()
        && list.iter().all(|p| {
            std::fs::read_to_string(ports.join(p).join("state")).is_ok_and(|s| s.contains("ACTIVE"))
        })
}

fn vfs(dev: &Path) -> Vec<String> {
    let configured = std::fs::read_to_string(dev.join("sriov_numvfs"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .is_some_and(|n| n > 0);
    if !configured {
        return Vec::new();
    }
    let mut out: Vec<String> = names(dev)
        .into_iter()
        .filter(|n| n.starts_with("virtfn"))
        .filter_map(|n| std::fs::read_link(dev.join(n)).ok())
        .filter_map(|t| Some(t.file_name()?.to_string_lossy().into_owned()))
        .collect();
    out.sort();
    out
}

/// The node's RDMA NICs, ordered by minor; an unreadable sysfs gives none.
pub fn scan(sys: &Path) -> Vec<RdmaNic> {
    let mut out: Vec<RdmaNic> = super::pci::functions(sys)
        .into_iter()
        .filter_map(|f| {
            let (addr, dev) = (f.addr, f.dir);
            let network = f.class.is_some_and(|c| c >> 16 == 0x02);
            if !network || dev.join("physfn").exists() {
                return None;
            }
            let ibdev = names(&dev.join("infiniband")).into_iter().next()?;
            let Some(minor) = minor_of(&ibdev) else {
                tracing::debug!(%addr, %ibdev, "RDMA device name without a minor; skipped");
                return None;
            };
            Some(RdmaNic {
                healthy: healthy(sys, &ibdev),
                vfs: vfs(&dev),
                bus_id: addr,
                minor,
            })
        })
        .collect();
    out.sort_by_key(|n| n.minor);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    /// A PCI function under root `root` with `files`, linked from bus/pci/devices.
    fn function(sys: &Path, root: &str, addr: &str, files: &[(&str, &str)]) -> PathBuf {
        let dev = sys.join("devices").join(root).join(addr);
        std::fs::create_dir_all(&dev).unwrap();
        for (name, text) in files {
            let path = dev.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let bus = sys.join("bus/pci/devices");
        std::fs::create_dir_all(&bus).unwrap();
        symlink(format!("../../../devices/{root}/{addr}"), bus.join(addr)).unwrap();
        dev
    }

    fn port(sys: &Path, ibdev: &str, state: &str) {
        let p = sys.join("class/infiniband").join(ibdev).join("ports/1");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("state"), state).unwrap();
    }

    /// Two mlx5 NICs (one with two VFs, one with its port down), a VF, an Ethernet-only
    /// function and a GPU: only the two physical RDMA functions are reported.
    fn fake_sysfs(sys: &Path) {
        let nic = function(
            sys,
            "pci0000:3a",
            "0000:3b:00.0",
            &[
                ("class", "0x020000\n"),
                ("numa_node", "0\n"),
                ("sriov_numvfs", "2\n"),
            ],
        );
        std::fs::create_dir_all(nic.join("infiniband/mlx5_0")).unwrap();
        for (i, vf) in ["0000:3b:00.3", "0000:3b:00.2"].iter().enumerate() {
            let d = function(sys, "pci0000:3a", vf, &[("class", "0x020000")]);
            std::fs::create_dir_all(d.join(format!("infiniband/mlx5_{}", i + 4))).unwrap();
            symlink("../0000:3b:00.0", d.join("physfn")).unwrap();
            symlink(format!("../{vf}"), nic.join(format!("virtfn{i}"))).unwrap();
        }
        function(sys, "pci0000:3a", "0000:3b:00.1", &[("class", "0x020000")]);
        function(sys, "pci0000:3a", "0000:3c:00.0", &[("class", "0x030200")]);
        let down = function(
            sys,
            "pci0000:5d",
            "0000:5e:00.0",
            &[("class", "0x020700"), ("numa_node", "1")],
        );
        std::fs::create_dir_all(down.join("infiniband/mlx5_1")).unwrap();
        port(sys, "mlx5_0", "4: ACTIVE\n");
        port(sys, "mlx5_1", "1: DOWN\n");
    }

    #[test]
    fn physical_rdma_functions_with_health_and_vfs() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        fake_sysfs(&sys);
        let nics = scan(&sys);
        assert_eq!(
            nics,
            [
                RdmaNic {
                    bus_id: "0000:3b:00.0".into(),
                    minor: 0,
                    healthy: true,
                    vfs: vec!["0000:3b:00.2".into(), "0000:3b:00.3".into()],
                },
                RdmaNic {
                    bus_id: "0000:5e:00.0".into(),
                    minor: 1,
                    healthy: false,
                    vfs: vec![],
                },
            ]
        );
        assert!(scan(&dir.path().join("nothing")).is_empty());
    }

    #[test]
    fn minors_as_koordinator_parses_them() {
        assert_eq!(minor_of("mlx5_1"), Some(1));
        assert_eq!(minor_of("mlx4_12"), Some(12));
        assert_eq!(minor_of("mlx_1"), None);
        assert_eq!(minor_of("rxe0"), None);
        assert_eq!(minor_of("mlx5_x"), None);
    }
}
