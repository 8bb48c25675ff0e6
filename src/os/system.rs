//! Readers for /proc and /sys under configurable roots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::parse::{self, CpuTicks, ParseError};

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse { path: PathBuf, source: ParseError },
    #[error("{path}: {message}")]
    Content { path: PathBuf, message: String },
}

/// A kernel setting the koordlet may change (sysreconcile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// Relative to the proc root.
    Proc(&'static str),
    /// Relative to the sys root.
    Sys(&'static str),
}

/// One logical CPU: (id, physical core unique on the node, socket, NUMA node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuInfo {
    pub id: u32,
    pub core: u32,
    pub socket: u32,
    pub numa: u32,
}

/// What Koordinator's CPUNormalization reads of a node's CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuBasicInfo {
    pub model: String,
    pub vendor: String,
    pub hyper_thread: bool,
    pub turbo: bool,
}

/// The proc and sys roots (`/proc`, `/sys`, or a DaemonSet's `/host-sys`).
#[derive(Debug, Clone)]
pub struct Host {
    pub proc_root: PathBuf,
    pub sys_root: PathBuf,
}

fn read(path: &Path) -> Result<String, HostError> {
    super::knob::read_small(path).map_err(|source| HostError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a small kernel file and parses it where it lies (`knob::with_small_file`).
fn read_parse<T>(
    path: PathBuf,
    parse: impl FnOnce(&str) -> Result<T, super::parse::ParseError>,
) -> Result<T, HostError> {
    match super::knob::with_small_file(&path, parse) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(HostError::Parse { path, source }),
        Err(source) => Err(HostError::Io { path, source }),
    }
}

/// A field of a NUMA node's meminfo ("Node 0 MemTotal:  16384 kB") in bytes.
fn numa_field(meminfo: &str, key: &str) -> Option<i64> {
    meminfo.lines().find_map(|l| {
        let mut f = l.split_whitespace().skip(2);
        (f.next()?.trim_end_matches(':') == key)
            .then(|| f.next()?.parse::<i64>().ok())
            .flatten()
            .map(|kb| kb * 1024)
    })
}

impl Host {
    pub fn new(proc_root: impl Into<PathBuf>, sys_root: impl Into<PathBuf>) -> Self {
        Host {
            proc_root: proc_root.into(),
            sys_root: sys_root.into(),
        }
    }

    /// `/proc/stat`: total and per-CPU ticks.
    pub fn proc_stat(&self) -> Result<(CpuTicks, Vec<(usize, CpuTicks)>), HostError> {
        read_parse(self.proc_root.join("stat"), parse::proc_stat)
    }

    /// `MemTotal - MemAvailable` of `/proc/meminfo`, in bytes.
    pub fn memory_used(&self) -> Result<u64, HostError> {
        read_parse(self.proc_root.join("meminfo"), super::procfs::memory_used)
    }

    /// `MemTotal - MemFree` of `/proc/meminfo`, in bytes (page cache counted).
    pub fn memory_used_with_cache(&self) -> Result<u64, HostError> {
        read_parse(
            self.proc_root.join("meminfo"),
            super::procfs::memory_used_with_cache,
        )
    }

    /// Koordinator's `cpu-basic-info`: the CPU model and vendor (`/proc/cpuinfo`),
    /// Hyper-Threading (`smt/active`, else more than one thread on a core of `cpus`) and
    /// Turbo (Intel's `intel_pstate/no_turbo` is 0; other vendors: off, as Koordinator).
    pub fn cpu_basic_info(&self, cpus: &[CpuInfo]) -> CpuBasicInfo {
        let info = read(&self.proc_root.join("cpuinfo")).unwrap_or_default();
        let field = |names: &[&str]| {
            info.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| names.contains(&k.trim()))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        let cpu = self.sys_root.join("devices/system/cpu");
        let flag = |rel: &str| read(&cpu.join(rel)).ok().map(|v| v.trim() == "1");
        let mut per_core: std::collections::BTreeMap<(u32, u32), usize> = Default::default();
        for c in cpus {
            *per_core.entry((c.socket, c.core)).or_default() += 1;
        }
        let no_turbo = read(&cpu.join("intel_pstate/no_turbo")).ok();
        CpuBasicInfo {
            model: field(&["model name", "Model Name"]),
            vendor: field(&["vendor_id"]),
            hyper_thread: flag("smt/active").unwrap_or_else(|| per_core.values().any(|n| *n > 1)),
            turbo: no_turbo.is_some_and(|v| v.trim() == "0"),
        }
    }

    /// Online CPUs with their core, socket and NUMA node, from
    /// `<sys>/devices/system/{cpu,node}`. A missing NUMA directory means one node.
    pub fn cpu_topology(&self) -> Result<Vec<CpuInfo>, HostError> {
        let base = self.sys_root.join("devices/system/cpu");
        let online_path = base.join("online");
        let online = crate::api::cpuset::parse(read(&online_path)?.trim()).map_err(|e| {
            HostError::Content {
                path: online_path,
                message: e.to_string(),
            }
        })?;
        let mut numa_of = BTreeMap::new();
        for (n, dir) in self.numa_dirs() {
            let list = read(&dir.join("cpulist"))?;
            for c in crate::api::cpuset::parse(list.trim()).unwrap_or_default() {
                numa_of.insert(c, n);
            }
        }
        let num = |path: PathBuf| -> Result<u32, HostError> {
            let raw = read(&path)?;
            raw.trim().parse().map_err(|_| HostError::Content {
                path,
                message: format!("{:?} is not a number", raw.trim()),
            })
        };
        online
            .into_iter()
            .map(|id| {
                let topo = base.join(format!("cpu{id}/topology"));
                let socket = num(topo.join("physical_package_id"))?;
                let core = num(topo.join("core_id"))?;
                // core_id repeats across sockets; make it unique on the node.
                Ok(CpuInfo {
                    id,
                    core: socket * 100_000 + core,
                    socket,
                    numa: numa_of.get(&id).copied().unwrap_or(0),
                })
            })
            .collect()
    }

    /// Memory in use on each NUMA node in bytes, as Koordinator counts it: MemTotal −
    /// (MemFree + Active(file) + Inactive(file) + SReclaimable), floored at 0.
    pub fn numa_mem_used(&self) -> BTreeMap<u32, i64> {
        self.numa_meminfo(|m| {
            let get = |k: &str| numa_field(m, k).unwrap_or(0);
            let free =
                get("MemFree") + get("Active(file)") + get("Inactive(file)") + get("SReclaimable");
            (get("MemTotal") - free).max(0)
        })
    }

    /// `MemTotal` of each NUMA node in bytes (`devices/system/node/node<N>/meminfo`).
    pub fn numa_mem_total(&self) -> BTreeMap<u32, i64> {
        let totals = self.numa_meminfo(|m| numa_field(m, "MemTotal"));
        totals
            .into_iter()
            .filter_map(|(n, t)| Some((n, t?)))
            .collect()
    }

    /// `devices/system/node/node<N>` directories by N: from `online` (a line read every
    /// second), else from the directory listing (whose 32 KiB buffer glibc allocates anew
    /// for every listing).
    fn numa_dirs(&self) -> Vec<(u32, PathBuf)> {
        let nodes = self.sys_root.join("devices/system/node");
        let online = super::knob::with_small_file(&nodes.join("online"), |s| {
            crate::api::cpuset::parse(s.trim())
        });
        if let Ok(Ok(ids)) = online {
            let dir = |n: u32| nodes.join(format!("node{n}"));
            return ids.into_iter().map(|n| (n, dir(n))).collect();
        }
        std::fs::read_dir(&nodes)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let n = name.to_str()?.strip_prefix("node")?.parse::<u32>().ok()?;
                Some((n, e.path()))
            })
            .collect()
    }

    /// What `f` makes of each readable NUMA node's meminfo, read into a reused buffer
    /// (asked every second).
    fn numa_meminfo<T>(&self, f: impl Fn(&str) -> T) -> BTreeMap<u32, T> {
        let mut out = BTreeMap::new();
        for (n, dir) in self.numa_dirs() {
            if let Ok(v) = super::knob::with_small_file(&dir.join("meminfo"), &f) {
                out.insert(n, v);
            }
        }
        out
    }

    /// A kernel knob under the proc root (`sys/vm/min_free_kbytes`) or the sys root
    /// (`kernel/mm/...`); `None` when the kernel does not have it.
    pub fn read_knob(&self, knob: &Knob) -> Option<String> {
        std::fs::read_to_string(self.knob_path(knob))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Writes a kernel knob; only knobs named in [`Knob`] can be written.
    pub fn write_knob(&self, knob: &Knob, value: &str) -> Result<(), HostError> {
        let path = self.knob_path(knob);
        std::fs::write(&path, value.as_bytes()).map_err(|source| HostError::Io { path, source })
    }

    fn knob_path(&self, knob: &Knob) -> PathBuf {
        match knob {
            Knob::Proc(rel) => self.proc_root.join(rel),
            Knob::Sys(rel) => self.sys_root.join(rel),
        }
    }

    /// (vendor id, CPU flags) of the first processor in `/proc/cpuinfo`.
    pub fn cpu_flags(&self) -> Result<(String, Vec<String>), HostError> {
        let path = self.proc_root.join("cpuinfo");
        super::procfs::cpu_flags(&read(&path)?).map_err(|source| HostError::Parse { path, source })
    }

    /// A PCI device's NUMA node (`numa_node`, -1 when the platform has none) and the PCIe
    /// root complex it hangs off (`pci0000:10`, from where `bus/pci/devices/<bus id>`
    /// points); `None` when sysfs does not have the device.
    pub fn pci_placement(&self, bus_id: &str) -> Option<(i32, String)> {
        let link = self.sys_root.join("bus/pci/devices").join(bus_id);
        let numa = std::fs::read_to_string(link.join("numa_node"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(-1);
        let target = std::fs::read_link(&link).ok()?;
        let root = target
            .components()
            .filter_map(|c| c.as_os_str().to_str())
            .find(|c| c.starts_with("pci"))?
            .to_string();
        Some((numa, root))
    }

    /// Distinct L3 cache ids of the online CPUs.
    pub fn l3_cache_ids(&self) -> Vec<u32> {
        let base = self.sys_root.join("devices/system/cpu");
        let mut ids: Vec<u32> = std::fs::read_dir(&base)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .strip_prefix("cpu")
                    .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
            })
            .filter_map(|e| std::fs::read_to_string(e.path().join("cache/index3/id")).ok())
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// `major:minor` of a block device name (`/dev/sdb` or `sdb`) from `<sys>/block/<dev>/dev`.
    pub fn block_device(&self, name: &str) -> Option<String> {
        let dev = name.trim_start_matches("/dev/");
        if dev.is_empty() || dev.contains('/') || dev.contains("..") {
            return None;
        }
        std::fs::read_to_string(self.sys_root.join("block").join(dev).join("dev"))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// The resctrl filesystem (`<sys>/fs/resctrl`).
    pub fn resctrl_root(&self) -> PathBuf {
        self.sys_root.join("fs/resctrl")
    }

    /// Node-wide pressure files (`/proc/pressure/cpu`, ...).
    pub fn pressure(
        &self,
        resource: &str,
    ) -> Result<(parse::PsiLine, Option<parse::PsiLine>), HostError> {
        let path = self.proc_root.join("pressure").join(resource);
        super::procfs::psi(&read(&path)?).map_err(|source| HostError::Parse { path, source })
    }
}

/// Clock ticks per second (`getconf CLK_TCK`), 100 when unknown.
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf(3) takes an integer name and returns an integer; no memory is shared.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 { v as u64 } else { 100 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_basic_info_from_a_host_tree() {
        let d = tempfile::tempdir().unwrap();
        let (proc_root, sys) = (d.path().join("proc"), d.path().join("sys"));
        let cpu = sys.join("devices/system/cpu");
        std::fs::create_dir_all(cpu.join("intel_pstate")).unwrap();
        std::fs::create_dir_all(&proc_root).unwrap();
        std::fs::write(
            proc_root.join("cpuinfo"),
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon X\n",
        )
        .unwrap();
        std::fs::write(cpu.join("intel_pstate/no_turbo"), "0\n").unwrap();
        let host = Host::new(&proc_root, &sys);
        let two_threads = [
            CpuInfo {
                id: 0,
                core: 0,
                socket: 0,
                numa: 0,
            },
            CpuInfo {
                id: 1,
                core: 0,
                socket: 0,
                numa: 0,
            },
        ];
        let b = host.cpu_basic_info(&two_threads);
        assert_eq!(
            (b.model.as_str(), b.vendor.as_str()),
            ("Xeon X", "GenuineIntel")
        );
        assert!(b.hyper_thread && b.turbo);
        std::fs::create_dir_all(cpu.join("smt")).unwrap();
        std::fs::write(cpu.join("smt/active"), "0\n").unwrap();
        std::fs::write(cpu.join("intel_pstate/no_turbo"), "1\n").unwrap();
        let b = host.cpu_basic_info(&two_threads);
        assert!(!b.hyper_thread && !b.turbo, "smt/active and no_turbo win");
    }
}
