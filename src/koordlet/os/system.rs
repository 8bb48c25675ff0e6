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
}

/// The proc and sys roots (`/proc`, `/sys`, or a DaemonSet's `/host-sys`).
#[derive(Debug, Clone)]
pub struct Host {
    pub proc_root: PathBuf,
    pub sys_root: PathBuf,
}

fn read(path: &Path) -> Result<String, HostError> {
    std::fs::read_to_string(path).map_err(|source| HostError::Io {
        path: path.to_path_buf(),
        source,
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
        let path = self.proc_root.join("stat");
        parse::proc_stat(&read(&path)?).map_err(|source| HostError::Parse { path, source })
    }

    /// `/proc/meminfo` in bytes.
    pub fn meminfo(&self) -> Result<BTreeMap<String, u64>, HostError> {
        let path = self.proc_root.join("meminfo");
        parse::meminfo(&read(&path)?).map_err(|source| HostError::Parse { path, source })
    }

    /// Node-wide pressure files (`/proc/pressure/cpu`, ...).
    pub fn pressure(
        &self,
        resource: &str,
    ) -> Result<(parse::PsiLine, Option<parse::PsiLine>), HostError> {
        let path = self.proc_root.join("pressure").join(resource);
        parse::psi(&read(&path)?).map_err(|source| HostError::Parse { path, source })
    }
}

/// Clock ticks per second (`getconf CLK_TCK`), 100 when unknown.
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf(3) takes an integer name and returns an integer; no memory is shared.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 { v as u64 } else { 100 }
}
