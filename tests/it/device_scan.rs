//! `koord device-scan` with the vendors' tools: stand-in `npu-smi` scripts answer as the
//! real tool does, from the process's PATH and, as root, inside a host root the daemon
//! enters (Koordinator's `chroot /hostfs`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::koord_bin;

const NPU_SMI: &str = r#"#!/bin/sh
case "$*" in
"info -m") printf '%s\n' \
  "        NPU ID    Chip ID    Chip Logic ID    Chip Name" \
  "        1         0          0                Ascend 910B3" \
  "        1         1          -                Mcu" ;;
"info -l") printf '%s\n' "Total Count : 1" "" "NPU ID : 1" "Product Name : IT21PDDA01" ;;
"info -t memory -i 1") printf '%s\n' "DDR Capacity(MB) : 0" "HBM Capacity(MB) : 65536" ;;
"info -t common -i 1") printf '%s\n' "Aicore Count : 20" ;;
"info -t board -i 1") printf '%s\n' "PCIe Bus Info : 0000:C1:00.0" "Chip Fault : 0" ;;
*) echo "Command or option is not found"; exit 255 ;;
esac
"#;

/// A PCI function under a fake sysfs, on root complex `pci0000:c0`, NUMA node 1.
fn pci_function(sys: &Path, addr: &str, vendor: &str) {
    let dev = sys.join("devices/pci0000:c0").join(addr);
    std::fs::create_dir_all(&dev).unwrap();
    for (f, v) in [
        ("vendor", vendor),
        ("device", "0xd801"),
        ("class", "0x120000"),
        ("numa_node", "1"),
    ] {
        std::fs::write(dev.join(f), v).unwrap();
    }
    let bus = sys.join("bus/pci/devices");
    std::fs::create_dir_all(&bus).unwrap();
    std::os::unix::fs::symlink(
        format!("../../../devices/pci0000:c0/{addr}"),
        bus.join(addr),
    )
    .unwrap();
}

fn tool(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs `koord device-scan --oneshot` and returns the devices written and its stderr.
fn scan(root: &Path, host_root: &Path, path_env: &str) -> (serde_json::Value, String) {
    let out_file = root.join("out/ic-device");
    let out = std::process::Command::new(koord_bin())
        .args(["device-scan", "--oneshot", "--sys-root"])
        .arg(root.join("sys"))
        .arg("--dev-root")
        .arg(root.join("dev"))
        .arg("--host-root")
        .arg(host_root)
        .arg("--prints-output-file")
        .arg(&out_file)
        .env("PATH", path_env)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let text = std::fs::read_to_string(&out_file).unwrap();
    (serde_json::from_str(&text).unwrap(), stderr)
}

fn fake_node() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    pci_function(&dir.path().join("sys"), "0000:c1:00.0", "0x19e5");
    pci_function(&dir.path().join("sys"), "0000:c2:00.0", "0x1d22");
    std::fs::create_dir_all(dir.path().join("dev")).unwrap();
    std::fs::write(dir.path().join("dev/davinci0"), "").unwrap();
    dir
}

fn assert_npu_from_tool(devices: &serde_json::Value) {
    let npu = &devices[0];
    assert_eq!(npu["vendor"], "huawei");
    assert_eq!(npu["model"], "Ascend-910B3");
    assert_eq!(npu["uuid"], "npu-1-0");
    assert_eq!(npu["resources"]["koordinator.sh/gpu-memory"], "65536Mi");
    assert_eq!(npu["resources"]["huawei.com/npu-core"], "20");
    assert_eq!(npu["topology"]["busID"], "0000:c1:00.0");
    assert_eq!(
        npu["topology"]["nodeID"], "1",
        "NUMA node from sysfs by bus id"
    );
    assert_eq!(npu["topology"]["pcieID"], "pci0000:c0");
    assert_eq!(npu["status"]["healthy"], true);
}

/// The tool from PATH (no host root mounted): Ascend from npu-smi; Kunlun, whose tool is
/// absent, from the PCI bus, and the log says why.
#[test]
fn device_scan_reads_npu_smi_from_path() {
    let dir = fake_node();
    let bin = dir.path().join("bin");
    tool(&bin, "npu-smi", NPU_SMI);
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let (devices, stderr) = scan(dir.path(), &dir.path().join("no-hostfs"), &path);
    assert_npu_from_tool(&devices);
    assert_eq!(devices[1]["vendor"], "kunlun");
    assert_eq!(devices[1]["uuid"], "0000:c2:00.0");
    assert!(
        stderr.contains("kunlun: xpu_smi: not installed; the PCI bus's facts kept"),
        "{stderr}"
    );
}

/// The files a dynamically linked `/bin/sh` needs, by `ldd`.
fn shell_files() -> Option<Vec<PathBuf>> {
    let sh = std::fs::canonicalize("/bin/sh").ok()?;
    let out = std::process::Command::new("ldd").arg(&sh).output().ok()?;
    let mut files = vec![sh];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(path) = line.split_whitespace().find(|w| w.starts_with('/')) {
            files.push(PathBuf::from(path));
        }
    }
    Some(files)
}

/// As root, the tool runs inside the host root (`/hostfs` in Koordinator's DaemonSet):
/// the stand-in exists only there, with a shell of its own.
#[test]
fn device_scan_runs_the_tool_inside_the_host_root() {
    if koord::os::files::euid() != 0 {
        eprintln!("skipped: entering a host root needs root");
        return;
    }
    let Some(files) = shell_files() else {
        eprintln!("skipped: no ldd to find /bin/sh's libraries");
        return;
    };
    let dir = fake_node();
    let hostfs = dir.path().join("hostfs");
    for f in &files {
        let to = hostfs.join(f.strip_prefix("/").unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(f, &to).unwrap();
    }
    std::fs::create_dir_all(hostfs.join("bin")).unwrap();
    std::fs::copy(&files[0], hostfs.join("bin/sh")).unwrap();
    tool(&hostfs.join("usr/local/bin"), "npu-smi", NPU_SMI);
    let (devices, stderr) = scan(dir.path(), &hostfs, "/usr/local/bin:/usr/bin:/bin");
    assert_npu_from_tool(&devices);
    assert!(
        stderr.contains("1 device(s)") || stderr.contains("2 device(s)"),
        "{stderr}"
    );
}
