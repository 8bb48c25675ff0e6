//! cgroup v1 and v2 behind one interface: kubelet-style directory layout for both drivers,
//! logical resources mapped to v1/v2 file names with Koordinator's value conversions.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::api::extension::qos::KubeQoS;

mod numa_stat;
mod resource;
pub use resource::Resource;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    #[default]
    Cgroupfs,
    Systemd,
}

/// v1 hierarchies koord uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subsystem {
    Cpu,
    Cpuacct,
    Cpuset,
    Memory,
    Blkio,
    Pids,
    PerfEvent,
    NetCls,
}

impl Subsystem {
    pub const ALL: [Subsystem; 8] = [
        Subsystem::Cpu,
        Subsystem::Cpuacct,
        Subsystem::Cpuset,
        Subsystem::Memory,
        Subsystem::Blkio,
        Subsystem::Pids,
        Subsystem::PerfEvent,
        Subsystem::NetCls,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Subsystem::Cpu => "cpu",
            Subsystem::Cpuacct => "cpuacct",
            Subsystem::Cpuset => "cpuset",
            Subsystem::Memory => "memory",
            Subsystem::Blkio => "blkio",
            Subsystem::Pids => "pids",
            Subsystem::PerfEvent => "perf_event",
            Subsystem::NetCls => "net_cls",
        }
    }
}

/// A cgroup directory relative to the hierarchy root, without leading slash
/// (`kubepods/besteffort/pod<uid>`). Shared, not copied: the QoS strategies name the
/// same pod and container directories in every update they build, every second.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CgroupDir(std::sync::Arc<str>);

impl CgroupDir {
    pub fn new(s: impl AsRef<str>) -> Self {
        CgroupDir(s.as_ref().trim_matches('/').into())
    }

    pub fn join(&self, child: &str) -> CgroupDir {
        if self.0.is_empty() {
            CgroupDir::new(child)
        } else {
            CgroupDir(format!("{}/{}", self.0, child.trim_matches('/')).into())
        }
    }

    pub fn parent(&self) -> Option<CgroupDir> {
        self.0.rsplit_once('/').map(|(p, _)| CgroupDir(p.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: unexpected content {content:?}")]
    Parse { path: PathBuf, content: String },
    #[error("no cgroup hierarchy at {0} (neither v1 subsystems nor a v2 cgroup.controllers)")]
    NoHierarchy(PathBuf),
}

impl CgroupError {
    /// The file or directory does not exist (the kernel lacks it, or the cgroup is gone).
    pub fn is_not_found(&self) -> bool {
        matches!(self, CgroupError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// v1 cpu.shares → v2 cpu.weight.
pub fn shares_to_weight(shares: i64) -> i64 {
    let s = shares.clamp(2, 262_144);
    1 + (s - 2) * 9999 / 262_142
}

/// v2 cpu.weight → v1 cpu.shares.
pub fn weight_to_shares(weight: i64) -> i64 {
    let w = weight.clamp(1, 10_000);
    (w - 1) * 262_142 / 9999 + 2
}

/// v1 reads at or above this mean "no limit".
const V1_UNLIMITED: i64 = 0x7FFF_FFFF_FFFF_F000;

/// The cgroup filesystem under one root, with the kubelet's layout.
#[derive(Debug, Clone)]
pub struct Cgroups {
    root: PathBuf,
    version: Version,
    driver: Driver,
    /// The kubelet's `--cgroup-root` (`""` for `/`): kubepods lives under it.
    parent: String,
}

impl Cgroups {
    pub fn new(root: impl Into<PathBuf>, version: Version, driver: Driver, parent: &str) -> Self {
        Cgroups {
            root: root.into(),
            version,
            driver,
            parent: parent.trim_matches('/').to_string(),
        }
    }

    /// v2 when `<root>/cgroup.controllers` exists, v1 when `<root>/cpu` does. The driver is
    /// systemd when a `kubepods.slice` exists, cgroupfs when `kubepods` does, else `hint`.
    pub fn detect(root: &Path, parent: &str, hint: Driver) -> Result<Cgroups, CgroupError> {
        let version = if root.join("cgroup.controllers").exists() {
            Version::V2
        } else if root.join("cpu").is_dir() {
            Version::V1
        } else {
            return Err(CgroupError::NoHierarchy(root.to_path_buf()));
        };
        let base = match version {
            Version::V1 => root.join("cpu"),
            Version::V2 => root.to_path_buf(),
        }
        .join(parent.trim_matches('/'));
        let driver = if base.join("kubepods.slice").is_dir() {
            Driver::Systemd
        } else if base.join("kubepods").is_dir() {
            Driver::Cgroupfs
        } else {
            hint
        };
        Ok(Cgroups::new(root, version, driver, parent))
    }

    pub fn version(&self) -> Version {
        self.version
    }

    pub fn driver(&self) -> Driver {
        self.driver
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn under_parent(&self, dir: &str) -> CgroupDir {
        CgroupDir::new(if self.parent.is_empty() {
            dir.to_string()
        } else {
            format!("{}/{dir}", self.parent)
        })
    }

    /// The kubepods root (also the Guaranteed QoS directory).
    pub fn kubepods(&self) -> CgroupDir {
        match self.driver {
            Driver::Cgroupfs => self.under_parent("kubepods"),
            Driver::Systemd => self.under_parent("kubepods.slice"),
        }
    }

    pub fn qos_dir(&self, qos: KubeQoS) -> CgroupDir {
        let root = self.kubepods();
        match (self.driver, qos) {
            (_, KubeQoS::Guaranteed) => root,
            (Driver::Cgroupfs, KubeQoS::Burstable) => root.join("burstable"),
            (Driver::Cgroupfs, KubeQoS::BestEffort) => root.join("besteffort"),
            (Driver::Systemd, KubeQoS::Burstable) => root.join("kubepods-burstable.slice"),
            (Driver::Systemd, KubeQoS::BestEffort) => root.join("kubepods-besteffort.slice"),
        }
    }

    pub fn pod_dir(&self, qos: KubeQoS, uid: &str) -> CgroupDir {
        let name = match self.driver {
            Driver::Cgroupfs => format!("pod{uid}"),
            Driver::Systemd => {
                let prefix = match qos {
                    KubeQoS::Guaranteed => "kubepods",
                    KubeQoS::Burstable => "kubepods-burstable",
                    KubeQoS::BestEffort => "kubepods-besteffort",
                };
                format!("{prefix}-pod{}.slice", uid.replace('-', "_"))
            }
        };
        self.qos_dir(qos).join(&name)
    }

    /// A container's directory from its status `containerID` (`containerd://abc`).
    pub fn container_dir(&self, pod: &CgroupDir, container_id: &str) -> Option<CgroupDir> {
        let (runtime, id) = container_id.split_once("://")?;
        if id.is_empty() {
            return None;
        }
        let name = match self.driver {
            Driver::Cgroupfs => id.to_string(),
            Driver::Systemd => match runtime {
                "containerd" => format!("cri-containerd-{id}.scope"),
                "docker" => format!("docker-{id}.scope"),
                "cri-o" => format!("crio-{id}.scope"),
                "pouch" => format!("pouch-{id}.scope"),
                other => format!("{other}-{id}.scope"),
            },
        };
        Some(pod.join(&name))
    }

    /// The directory of `dir` in a subsystem's hierarchy (v2: the unified one).
    pub fn dir_path(&self, sub: Subsystem, dir: &CgroupDir) -> PathBuf {
        self.path_of(sub, dir, None)
    }

    pub fn file(&self, res: Resource, dir: &CgroupDir) -> PathBuf {
        let (sub, name) = self.file_name(res);
        self.path_of(sub, dir, Some(name))
    }

    fn file_name(&self, res: Resource) -> (Subsystem, &'static str) {
        let (sub, v1, v2) = res.files();
        match self.version {
            Version::V1 => (sub, v1),
            Version::V2 => (sub, v2),
        }
    }

    /// Hands `f` the path of `res` in `dir`, built in a buffer the thread reuses: every
    /// cgroup read builds one, hundreds a second, and a fresh allocation each time kept
    /// the allocator moving through new memory.
    fn with_file<R>(&self, res: Resource, dir: &CgroupDir, f: impl FnOnce(&Path) -> R) -> R {
        thread_local! {
            static PATH: std::cell::RefCell<PathBuf> = std::cell::RefCell::new(PathBuf::new());
        }
        let (sub, name) = self.file_name(res);
        PATH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => {
                buf.as_mut_os_string().clear();
                self.fill_path(&mut buf, sub, dir, Some(name));
                f(&buf)
            }
            // `f` builds another path itself: that one gets a buffer of its own.
            Err(_) => f(&self.path_of(sub, dir, Some(name))),
        })
    }

    /// `root[/subsystem]/dir[/file]` in one allocation: built for every cgroup file read,
    /// hundreds a second, where chained joins were a tenth of the koordlet's instructions.
    fn path_of(&self, sub: Subsystem, dir: &CgroupDir, file: Option<&str>) -> PathBuf {
        let v1 = self.version == Version::V1;
        let cap = self.root.as_os_str().len()
            + if v1 { sub.name().len() + 1 } else { 0 }
            + dir.0.len()
            + file.map_or(0, |f| f.len() + 1)
            + 1;
        let mut p = PathBuf::with_capacity(cap);
        self.fill_path(&mut p, sub, dir, file);
        p
    }

    fn fill_path(&self, p: &mut PathBuf, sub: Subsystem, dir: &CgroupDir, file: Option<&str>) {
        p.push(&self.root);
        if self.version == Version::V1 {
            p.push(sub.name());
        }
        p.push(&*dir.0);
        if let Some(f) = file {
            p.push(f);
        }
    }

    /// The raw file content, trimmed.
    pub fn read(&self, res: Resource, dir: &CgroupDir) -> Result<String, CgroupError> {
        self.read_with(res, dir, str::to_string)
    }

    /// Hands `f` the file's text, trimmed, without keeping it (`knob::with_small_file`).
    pub fn read_with<R>(
        &self,
        res: Resource,
        dir: &CgroupDir,
        f: impl FnOnce(&str) -> R,
    ) -> Result<R, CgroupError> {
        self.with_file(res, dir, |path| {
            crate::os::knob::with_small_file(path, |s| f(s.trim())).map_err(io_err(path))
        })
    }

    /// A numeric resource in v1 semantics (shares, quota with -1 for none, bytes with -1
    /// for no limit, cpuacct nanoseconds).
    pub fn read_i64(&self, res: Resource, dir: &CgroupDir) -> Result<i64, CgroupError> {
        self.with_file(res, dir, |path| {
            crate::os::knob::with_small_file(path, |raw| self.parse_i64(res, path, raw.trim()))
                .map_err(io_err(path))?
        })
    }

    fn parse_i64(&self, res: Resource, path: &Path, raw: &str) -> Result<i64, CgroupError> {
        let bad = || CgroupError::Parse {
            path: path.to_path_buf(),
            content: raw.to_string(),
        };
        let num = |s: &str| -> Result<i64, CgroupError> {
            if s == "max" {
                Ok(-1)
            } else {
                s.parse().map_err(|_| bad())
            }
        };
        match (self.version, res) {
            (Version::V2, Resource::CpuShares) => Ok(weight_to_shares(num(raw)?)),
            (Version::V2, Resource::CfsQuota) => {
                num(raw.split_whitespace().next().ok_or_else(bad)?)
            }
            (Version::V2, Resource::CfsPeriod) => {
                num(raw.split_whitespace().nth(1).ok_or_else(bad)?)
            }
            (Version::V2, Resource::CpuacctUsage) => {
                Ok(stat_field(raw, "usage_usec").ok_or_else(bad)? * 1000)
            }
            (Version::V1, Resource::MemoryLimit) => {
                Ok(num(raw).map(|v| if v >= V1_UNLIMITED { -1 } else { v })?)
            }
            _ => num(raw),
        }
    }

    /// Writes a value given in v1 semantics, converting for v2.
    pub fn write(&self, res: Resource, dir: &CgroupDir, value: &str) -> Result<(), CgroupError> {
        let path = self.file(res, dir);
        let converted = match (self.version, res) {
            (Version::V2, Resource::CpuShares) => {
                let shares: i64 = value.trim().parse().map_err(|_| CgroupError::Parse {
                    path: path.clone(),
                    content: value.into(),
                })?;
                shares_to_weight(shares).to_string()
            }
            (Version::V2, Resource::CfsQuota | Resource::MemoryLimit | Resource::MemoryHigh)
                if value.trim() == "-1" =>
            {
                "max".to_string()
            }
            (Version::V2, Resource::CfsPeriod) => {
                let quota = self
                    .read(Resource::CfsQuota, dir)?
                    .split_whitespace()
                    .next()
                    .unwrap_or("max")
                    .to_string();
                format!("{quota} {}", value.trim())
            }
            _ => value.trim().to_string(),
        };
        std::fs::write(&path, converted.as_bytes()).map_err(io_err(&path))
    }

    /// Hierarchies that exist under the root (v2: just the unified one, as `Cpu`).
    pub fn subsystems(&self) -> Vec<Subsystem> {
        match self.version {
            Version::V1 => Subsystem::ALL
                .into_iter()
                .filter(|s| self.root.join(s.name()).is_dir())
                .collect(),
            Version::V2 => vec![Subsystem::Cpu],
        }
    }

    pub fn exists(&self, dir: &CgroupDir) -> bool {
        self.dir_path(Subsystem::Cpu, dir).is_dir()
    }

    /// Creates `dir` (and missing parents) in every hierarchy. New v1 cpusets inherit
    /// their parent's CPUs and memory nodes (they start empty, which would refuse tasks);
    /// v2 parents get the controllers enabled for their children.
    pub fn create(&self, dir: &CgroupDir) -> Result<(), CgroupError> {
        let mut chain = vec![dir.clone()];
        while let Some(p) = chain.last().and_then(CgroupDir::parent) {
            chain.push(p);
        }
        chain.reverse();
        for d in &chain {
            for sub in self.subsystems() {
                let path = self.dir_path(sub, d);
                if path.is_dir() {
                    continue;
                }
                if self.version == Version::V2
                    && let Some(parent) = path.parent()
                {
                    self.enable_controllers(parent);
                }
                std::fs::create_dir(&path).map_err(io_err(&path))?;
                if self.version == Version::V1 && sub == Subsystem::Cpuset {
                    self.inherit_cpuset(&path)?;
                }
            }
        }
        Ok(())
    }

    fn inherit_cpuset(&self, path: &Path) -> Result<(), CgroupError> {
        let Some(parent) = path.parent() else {
            return Ok(());
        };
        for f in ["cpuset.cpus", "cpuset.mems"] {
            let value = std::fs::read_to_string(parent.join(f)).unwrap_or_default();
            if !value.trim().is_empty() {
                let target = path.join(f);
                std::fs::write(&target, value.trim()).map_err(io_err(&target))?;
            }
        }
        Ok(())
    }

    fn enable_controllers(&self, dir: &Path) {
        let available = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        let wanted: Vec<String> = ["cpu", "cpuset", "memory", "io", "pids"]
            .iter()
            .filter(|c| available.split_whitespace().any(|a| a == **c))
            .map(|c| format!("+{c}"))
            .collect();
        if !wanted.is_empty() {
            let _ = std::fs::write(dir.join("cgroup.subtree_control"), wanted.join(" "));
        }
    }

    /// Removes `dir` from every hierarchy (it must hold no processes). Missing is fine.
    pub fn remove(&self, dir: &CgroupDir) -> Result<(), CgroupError> {
        for sub in self.subsystems() {
            let path = self.dir_path(sub, dir);
            match std::fs::remove_dir(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CgroupError::Io { path, source: e }),
            }
        }
        Ok(())
    }

    /// Processes in `dir` (not its children).
    pub fn procs(&self, dir: &CgroupDir) -> Result<Vec<i32>, CgroupError> {
        Ok(self
            .read(Resource::Procs, dir)?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect())
    }

    /// `cgroup.procs` of `dir` in every hierarchy: writing a pid to each moves it there.
    pub fn procs_files(&self, dir: &CgroupDir) -> Vec<PathBuf> {
        self.subsystems()
            .into_iter()
            .map(|s| self.dir_path(s, dir).join("cgroup.procs"))
            .collect()
    }

    /// Child directory names of `dir` (in the cpu hierarchy).
    pub fn children(&self, dir: &CgroupDir) -> Vec<String> {
        std::fs::read_dir(self.dir_path(Subsystem::Cpu, dir))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `oom_kill` counter of a memory cgroup (v1 `memory.oom_control`, v2
    /// `memory.events`); 0 when unavailable.
    pub fn oom_kills(&self, dir: &CgroupDir) -> u64 {
        self.read(Resource::MemoryOomEvents, dir)
            .ok()
            .and_then(|s| stat_field(&s, "oom_kill"))
            .unwrap_or(0)
            .max(0) as u64
    }
}

/// A `key value` field of a flat stat file.
pub fn stat_field(content: &str, key: &str) -> Option<i64> {
    content.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key))
            .then(|| it.next()?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests;
