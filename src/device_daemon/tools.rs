//! Running the vendors' tools on the host, as Koordinator's daemon does (`chroot /hostfs
//! <tool>`), and putting what they say over what the PCI bus says.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::api::xpu::XpuDevice;

/// A tool that has not answered in this long is killed and its vendor reported from the
/// PCI bus.
const TIMEOUT: Duration = Duration::from_secs(30);
/// More output than this from one query is not a device listing.
const MAX_OUTPUT: u64 = 1 << 20;

/// Where the host's tools and device nodes are.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The host's root as mounted here (Koordinator's `/hostfs`); the tools run inside it.
    /// `/` or a directory that does not exist: they run from this process's `PATH`.
    pub host_root: PathBuf,
    /// Where `/dev/davinci<N>` are.
    pub dev: PathBuf,
}

impl Tools {
    /// Runs `tool args…` and returns its standard output; a failure says which tool, how it
    /// ended and what it printed.
    pub fn run(&self, tool: &str, args: &[&str]) -> Result<String, String> {
        let shown = format!("{tool} {}", args.join(" "));
        let mut cmd = match self.chroot() {
            Some(root) => crate::os::process::command_in_root(tool, root)
                .map_err(|e| format!("{shown}: {e}"))?,
            None => std::process::Command::new(tool),
        };
        cmd.args(args);
        let ran =
            crate::os::process::output_bounded(cmd, TIMEOUT, MAX_OUTPUT).map_err(|e| {
                match e.kind() {
                    std::io::ErrorKind::NotFound => format!("{tool}: not installed"),
                    _ => format!("{shown}: {e}"),
                }
            })?;
        if !ran.status.success() {
            // Koordinator reads the combined output for its fallbacks; so do the callers.
            let said = format!("{}{}", ran.stdout.trim(), ran.stderr.trim());
            return Err(format!("{shown}: {}: {said}", ran.status));
        }
        Ok(ran.stdout)
    }

    fn chroot(&self) -> Option<&Path> {
        let root = self.host_root.as_path();
        (root != Path::new("/") && !root.as_os_str().is_empty() && root.is_dir()).then_some(root)
    }
}

/// Each vendor's devices as its tool reports them, in place of the PCI bus's entries for
/// that vendor; where a tool is missing or fails, the PCI entries stay and `notes` says
/// why.
pub fn with_vendor_facts(pci: Vec<XpuDevice>, tools: &Tools) -> (Vec<XpuDevice>, Vec<String>) {
    let mut vendors: Vec<String> = Vec::new();
    for d in &pci {
        if !vendors.contains(&d.vendor) {
            vendors.push(d.vendor.clone());
        }
    }
    let minors = super::vendors::davinci_minors(&tools.dev);
    let run = |tool: &str, args: &[&str]| tools.run(tool, args);
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for vendor in vendors {
        let from_bus = pci.iter().filter(|d| d.vendor == vendor).cloned();
        match super::vendors::devices(&vendor, &run, &minors) {
            Ok(found) if !found.is_empty() => out.extend(found),
            Ok(_) => {
                notes.push(format!(
                    "{vendor}: its tool lists no devices; the PCI bus's kept"
                ));
                out.extend(from_bus);
            }
            Err(e) => {
                notes.push(format!("{vendor}: {e}; the PCI bus's facts kept"));
                out.extend(from_bus);
            }
        }
    }
    (out, notes)
}
