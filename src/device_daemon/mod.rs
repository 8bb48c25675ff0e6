//! `koord device-scan`: Koordinator's koord-device-daemon (`pkg/device-daemon`). It finds
//! the accelerators of the vendors Koordinator's daemon knows — Huawei Ascend (PCI vendor
//! 0x19e5), Cambricon MLU (0xcabc), Baidu Kunlun (0x1d22), MetaX (0x9999) — on the PCI bus
//! of a rooted sysfs, and writes them, atomically, to the file the koordlet reads
//! (`/var/run/koordlet/xpu-device-infos/ic-device`). Like Koordinator's it neither labels
//! nodes nor reports NVIDIA GPUs (the koordlet reads those through NVML).
//!
//! For each vendor found it runs the vendor's tool inside the host's root, as Koordinator's
//! daemon does (`npu-smi`, `cnmon`, `xpu_smi`, `mx-smi`), for model names, memory, AI
//! cores, UUIDs and health; where the tool is missing or fails, that vendor's devices are
//! reported as the PCI bus shows them (the PCI device id as the model, healthy), and the
//! log says why.

pub mod config;
pub mod tools;
pub mod vendors;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::api::xpu::{XpuDevice, XpuStatus, XpuTopology};
use crate::os::system::Host;

/// The resources each device of a vendor carries: (name, quantity).
type Resources = &'static [(&'static str, &'static str)];

/// (PCI vendor id, vendor name, resources each device carries).
const VENDORS: [(u32, &str, Resources); 4] = [
    (0x19e5, "huawei", &[("huawei.com/npu-dvpp", "100")]),
    (0xcabc, "cambricon", &[("koordinator.sh/gpu-core", "100")]),
    (0x1d22, "kunlun", &[("koordinator.sh/gpu-core", "100")]),
    (0x9999, "metax", &[("koordinator.sh/gpu-core", "100")]),
];

/// Huawei's management controllers on the PCI bus, not NPUs (Koordinator's
/// `HUAWEIProductExcludeNPUList`).
const HUAWEI_NOT_NPU: [u32; 2] = [0x1710, 0x1711];

/// PCI bridges (class 0x0604) are a vendor's switches, not its accelerators.
const BRIDGE_CLASS: u32 = 0x0604;

/// The accelerators on the PCI bus, numbered per vendor in bus order.
pub fn scan(sys: &Path) -> Vec<XpuDevice> {
    let host = Host::new("/proc", sys);
    let mut seen: std::collections::BTreeMap<&str, u32> = Default::default();
    let mut out = Vec::new();
    for f in crate::os::pci::functions(sys) {
        let Some((_, vendor, resources)) = VENDORS.iter().find(|(id, ..)| Some(*id) == f.vendor)
        else {
            continue;
        };
        if f.class.is_some_and(|c| c >> 8 == BRIDGE_CLASS)
            || (*vendor == "huawei" && f.device.is_some_and(|d| HUAWEI_NOT_NPU.contains(&d)))
        {
            continue;
        }
        let addr = f.addr;
        let minor = seen.entry(vendor).or_default();
        let (numa, pcie) = host.pci_placement(&addr).unwrap_or((-1, String::new()));
        out.push(XpuDevice {
            vendor: vendor.to_string(),
            model: f.device.map_or_else(String::new, |d| format!("{d:04x}")),
            uuid: addr.clone(),
            minor: minor.to_string(),
            resources: resources
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            topology: Some(XpuTopology {
                node_id: if numa >= 0 {
                    numa.to_string()
                } else {
                    String::new()
                },
                pcie_id: pcie,
                bus_id: addr,
                ..Default::default()
            }),
            status: Some(XpuStatus {
                healthy: true,
                ..Default::default()
            }),
        });
        *minor += 1;
    }
    out
}

/// Writes the list as Koordinator does (a JSON array, 2-space indent) through a temporary
/// file and a rename, so the koordlet never reads half a file; private to root.
pub fn write(path: &Path, devices: &[XpuDevice]) -> Result<(), crate::os::files::FileError> {
    use crate::os::files;
    if path.as_os_str().is_empty() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| files::FileError::Io(dir.to_path_buf(), e))?;
    let text = serde_json::to_string_pretty(devices)
        .map_err(|e| files::FileError::Io(path.to_path_buf(), std::io::Error::other(e)))?;
    files::write_atomic(path, text.as_bytes(), 0o600, files::Sync::Durable)
}

/// `koord device-scan` arguments (Koordinator's koord-device-daemon flags; each also from
/// its `KDD_*` environment variable or the config file).
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Scan once, write the file and exit (the file stays)
    #[arg(long, env = "KDD_ONESHOT", num_args = 0..=1, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub oneshot: Option<bool>,
    /// Time between scans (Go duration; default 900s)
    #[arg(long, env = "KDD_SLEEP_INTERVAL")]
    pub sleep_interval: Option<String>,
    /// Where the koordlet reads the devices (default
    /// /var/run/koordlet/xpu-device-infos/ic-device; also PRINTS_OUTPUT_FILE); empty: write
    /// nothing
    #[arg(long, env = "KDD_PRINTS_OUTPUT_FILE")]
    pub prints_output_file: Option<PathBuf>,
    /// A YAML or JSON file with the settings under flags.kdd (also CONFIG_FILE); flags and
    /// environment win over it
    #[arg(long, env = "KDD_CONFIG_FILE")]
    pub config_file: Option<PathBuf>,
    /// Accepted for compatibility; unused, as in Koordinator
    #[arg(long, env = "KDD_NO_TIMESTAMP", num_args = 0..=1, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub no_timestamp: Option<bool>,
    /// The host's sysfs as seen from here
    #[arg(long, default_value = "/sys")]
    pub sys_root: PathBuf,
    /// The host's root as seen from here; the vendors' tools run inside it (`/`, or a
    /// directory that does not exist: from this process's PATH)
    #[arg(long, default_value = "/hostfs")]
    pub host_root: PathBuf,
    /// Where the host's device nodes are (`davinci<N>`)
    #[arg(long, default_value = "/dev")]
    pub dev_root: PathBuf,
    /// klog's verbosity, as the chart passes it: accepted, unused (koord logs at
    /// `--log-level`)
    #[arg(long = "v", hide = true, value_name = "LEVEL")]
    pub klog_v: Option<String>,
}

/// The PCI bus's devices with each vendor's tool's facts over them; a device a tool
/// reports gets its NUMA node and root complex from sysfs, by its bus id.
pub fn scan_with_tools(sys: &Path, tools: &tools::Tools) -> (Vec<XpuDevice>, Vec<String>) {
    let host = Host::new("/proc", sys);
    let (mut devices, notes) = tools::with_vendor_facts(scan(sys), tools);
    for t in devices.iter_mut().filter_map(|d| d.topology.as_mut()) {
        if t.bus_id.is_empty() {
            continue;
        }
        if let Some((numa, pcie)) = host.pci_placement(&t.bus_id) {
            if t.node_id.is_empty() && numa >= 0 {
                t.node_id = numa.to_string();
            }
            if t.pcie_id.is_empty() {
                t.pcie_id = pcie;
            }
        }
    }
    (devices, notes)
}

fn scan_and_write(sys: &Path, tools: &tools::Tools, output: &Path) -> Result<usize, String> {
    let (devices, notes) = scan_with_tools(sys, tools);
    for n in notes {
        eprintln!("koord device-scan: {n}");
    }
    write(output, &devices).map_err(|e| format!("{}: {e}", output.display()))?;
    Ok(devices.len())
}

/// Runs the daemon: scan, write, sleep; SIGHUP scans at once; SIGTERM/SIGINT remove the
/// file (it would go stale) and exit.
pub fn main(a: &Args) -> std::process::ExitCode {
    let given = config::Given {
        oneshot: a.oneshot,
        sleep_interval: a.sleep_interval.clone(),
        prints_output_file: a.prints_output_file.clone(),
        config_file: a.config_file.clone(),
    };
    let s = match config::settings(&given, |k| std::env::var(k).ok()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("koord device-scan: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let report = |r: Result<usize, String>| match r {
        Ok(n) => eprintln!("koord device-scan: {n} device(s) written"),
        Err(e) => eprintln!("koord device-scan: {e}"),
    };
    let tools = tools::Tools {
        host_root: a.host_root.clone(),
        dev: a.dev_root.clone(),
    };
    let scan_once = || scan_and_write(&a.sys_root, &tools, &s.prints_output_file);
    if s.oneshot {
        let r = scan_once();
        let ok = r.is_ok();
        report(r);
        return if ok {
            std::process::ExitCode::SUCCESS
        } else {
            std::process::ExitCode::FAILURE
        };
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("koord device-scan: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    rt.block_on(run_loop(&scan_once, s.sleep_interval, report));
    let _ = std::fs::remove_file(&s.prints_output_file);
    std::process::ExitCode::SUCCESS
}

async fn run_loop(
    scan_once: &dyn Fn() -> Result<usize, String>,
    every: Duration,
    report: impl Fn(Result<usize, String>),
) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        eprintln!("koord device-scan: cannot install signal handlers");
        return;
    };
    loop {
        report(scan_once());
        tokio::select! {
            _ = term.recv() => return,
            _ = int.recv() => return,
            _ = hup.recv() => {}
            _ = tokio::time::sleep(every) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn function(sys: &Path, addr: &str, vendor: &str, device: &str, class: &str) {
        let dev = sys.join("devices/pci0000:00").join(addr);
        std::fs::create_dir_all(&dev).unwrap();
        for (f, v) in [
            ("vendor", vendor),
            ("device", device),
            ("class", class),
            ("numa_node", "1"),
        ] {
            std::fs::write(dev.join(f), format!("{v}\n")).unwrap();
        }
        let bus = sys.join("bus/pci/devices");
        std::fs::create_dir_all(&bus).unwrap();
        symlink(
            format!("../../../devices/pci0000:00/{addr}"),
            bus.join(addr),
        )
        .unwrap();
    }

    #[test]
    fn known_vendors_found_bridges_and_others_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        function(sys, "0000:01:00.0", "0x19e5", "0xd801", "0x120000");
        function(sys, "0000:02:00.0", "0x19e5", "0xd802", "0x120000");
        function(sys, "0000:03:00.0", "0x19e5", "0x1234", "0x060400");
        function(sys, "0000:04:00.0", "0xcabc", "0x0270", "0x120000");
        function(sys, "0000:05:00.0", "0x10de", "0x20b2", "0x030200");
        function(sys, "0000:06:00.0", "0x19e5", "0x1710", "0x088000");
        let found = scan(sys);
        let got: Vec<(&str, &str, &str)> = found
            .iter()
            .map(|d| (d.vendor.as_str(), d.minor.as_str(), d.uuid.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("huawei", "0", "0000:01:00.0"),
                ("huawei", "1", "0000:02:00.0"),
                ("cambricon", "0", "0000:04:00.0"),
            ]
        );
        assert_eq!(found[1].model, "d802");
        let t = found[0].topology.as_ref().unwrap();
        assert_eq!(
            (t.node_id.as_str(), t.pcie_id.as_str()),
            ("1", "pci0000:00")
        );
        assert_eq!(found[2].resources["koordinator.sh/gpu-core"], "100");
    }

    #[test]
    fn written_atomically_and_read_back_by_the_koordlet_format() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xpu/ic-device");
        let dev = XpuDevice {
            vendor: "metax".into(),
            uuid: "0000:07:00.0".into(),
            minor: "0".into(),
            ..Default::default()
        };
        write(&path, std::slice::from_ref(&dev)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("[\n  {"), "2-space JSON array: {text}");
        let back: Vec<XpuDevice> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, [dev]);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1,
            "no temp left"
        );
        write(Path::new(""), &[]).unwrap();
    }
}
