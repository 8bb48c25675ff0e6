//! PCI functions of a rooted sysfs (`bus/pci/devices/<address>`), read by the RDMA scan
//! and the device daemon.

use std::path::{Path, PathBuf};

/// One PCI function: its address, its sysfs directory and the ids it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    pub addr: String,
    pub dir: PathBuf,
    pub vendor: Option<u32>,
    pub device: Option<u32>,
    pub class: Option<u32>,
}

/// The entries of `dir`, sorted; an unreadable directory has none.
pub fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// A sysfs id file (`0x19e5`).
fn hex(path: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

/// Every PCI function, in address order.
pub fn functions(sys: &Path) -> Vec<Function> {
    let base = sys.join("bus/pci/devices");
    names(&base)
        .into_iter()
        .map(|addr| {
            let dir = base.join(&addr);
            Function {
                vendor: hex(&dir.join("vendor")),
                device: hex(&dir.join("device")),
                class: hex(&dir.join("class")),
                addr,
                dir,
            }
        })
        .collect()
}
