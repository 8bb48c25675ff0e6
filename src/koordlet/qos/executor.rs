//! The resource executor (`pkg/koordlet/resourceexecutor/executor.go`): every cgroup write of the QoS manager goes
//! through here. A write is validated against the file's range, skipped when the value is
//! already there (cached, re-checked on the file at most every `force_update`), recorded
//! as a typed change, and a missing file or cgroup is not an error (a knob missing from
//! an existing cgroup is remembered like a value, so a kernel without `cpu.cfs_burst_us`
//! is not asked every second). Leveled updates relax
//! parents first (cpuset union, larger quota/limits) and write exact values bottom-up, so
//! a child never asks for more than its parent allows.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::api::cpuset;
use crate::os::{CgroupDir, CgroupError, Cgroups, Resource};

/// One intended write, in cgroup v1 semantics (`-1` = unlimited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub resource: Resource,
    pub dir: CgroupDir,
    pub value: String,
}

impl Update {
    pub fn new(resource: Resource, dir: CgroupDir, value: impl Into<String>) -> Update {
        Update {
            resource,
            dir,
            value: value.into(),
        }
    }
}

/// A change actually made (for logs, metrics and events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub resource: Resource,
    pub dir: String,
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Written(Change),
    Unchanged,
    /// The file or the cgroup does not exist (kernel without it, pod gone).
    Missing,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{resource:?} in {dir}: value {value:?} rejected: {reason}")]
    Invalid {
        resource: Resource,
        dir: String,
        value: String,
        reason: String,
    },
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error("writing {path}: {error}")]
    File { path: String, error: String },
}

/// The range a value must be in (`pkg/koordlet/util/system/cgroup_resource.go` validators); `-1` is allowed where it means unlimited.
pub fn validate(res: Resource, value: &str) -> Result<(), String> {
    let v = value.trim();
    if res == Resource::CpusetCpus || res == Resource::CpusetMems {
        return cpuset::parse(v).map(|_| ()).map_err(|e| e.to_string());
    }
    let n: i64 = v.parse().map_err(|_| format!("{v:?} is not an integer"))?;
    let range = match res {
        Resource::CpuShares => Some((2, 262_144)),
        Resource::CfsQuota | Resource::MemoryLimit | Resource::MemoryHigh if n == -1 => None,
        Resource::CfsQuota => Some((1000, i64::MAX)),
        Resource::CfsPeriod => Some((1000, 1_000_000)),
        Resource::CfsBurst
        | Resource::MemoryLimit
        | Resource::MemoryMin
        | Resource::MemoryLow
        | Resource::MemoryHigh => Some((0, i64::MAX)),
        Resource::BvtWarpNs => Some((-1, 2)),
        Resource::CpuIdle | Resource::MemoryUsePriorityOom | Resource::MemoryOomGroup => {
            Some((0, 1))
        }
        Resource::MemoryWmarkRatio => Some((0, 100)),
        Resource::MemoryWmarkScaleFactor => Some((1, 1000)),
        Resource::MemoryWmarkMinAdj => Some((-25, 50)),
        Resource::MemoryPriority => Some((0, 12)),
        _ => return Err(format!("{res:?} is not writable through the executor")),
    };
    match range {
        Some((lo, hi)) if n < lo || n > hi => Err(format!("{n} is outside [{lo}, {hi}]")),
        _ => Ok(()),
    }
}

pub struct Executor {
    cgroups: Cgroups,
    /// Path → (value there, when seen); `None`: the cgroup exists without the file (a
    /// kernel without the knob), which a kernel does not grow later.
    cache: Mutex<HashMap<String, (Option<String>, Instant)>>,
    /// The cache's size at which expired entries (pods gone) are dropped.
    prune_at: std::sync::atomic::AtomicUsize,
    force_update: Duration,
    /// Where write durations are recorded.
    pub observed: Option<std::sync::Arc<crate::koordlet::metrics::KoordletMetrics>>,
}

/// Below this many entries the cache is not pruned.
const PRUNE_MIN: usize = 1024;

fn key(u: &Update) -> String {
    let (file, dir) = (u.resource.v1_name(), u.dir.as_str());
    let mut k = String::with_capacity(file.len() + 1 + dir.len());
    k.push_str(file);
    k.push(':');
    k.push_str(dir);
    k
}

/// Values compare as numbers or CPU sets, so "0-3" equals "0,1,2,3" and "max" equals -1.
fn normalize(res: Resource, v: &str) -> String {
    let v = v.trim();
    if matches!(res, Resource::CpusetCpus | Resource::CpusetMems) {
        return cpuset::parse(v)
            .map(|c| cpuset::format(&c))
            .unwrap_or_else(|_| v.to_string());
    }
    if v == "max" {
        "-1".to_string()
    } else {
        v.to_string()
    }
}

impl Executor {
    pub fn new(cgroups: Cgroups, force_update: Duration) -> Executor {
        Executor {
            cgroups,
            cache: Mutex::new(HashMap::new()),
            prune_at: std::sync::atomic::AtomicUsize::new(PRUNE_MIN),
            force_update,
            observed: None,
        }
    }

    /// `koordlet_resource_update_duration_milliseconds` for one write attempt.
    fn observe(&self, kind: &'static str, ok: bool, start: Instant) {
        if let Some(m) = &self.observed {
            m.ops.updated(kind, ok, start.elapsed());
        }
    }

    pub fn cgroups(&self) -> &Cgroups {
        &self.cgroups
    }

    fn current(&self, u: &Update) -> Result<String, CgroupError> {
        match u.resource {
            Resource::CpusetCpus | Resource::CpusetMems => self.cgroups.read(u.resource, &u.dir),
            _ => self
                .cgroups
                .read_i64(u.resource, &u.dir)
                .map(|v| v.to_string()),
        }
    }

    /// What the cache holds for `key` while fresh: `Some(None)` for a knob the cgroup lacks.
    fn cached(&self, key: &str) -> Option<Option<String>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let (v, at) = cache.get(key)?;
        (at.elapsed() < self.force_update).then(|| v.clone())
    }

    fn remember(&self, key: &str, value: Option<String>) {
        use std::sync::atomic::Ordering::Relaxed;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.insert(key.to_string(), (value, Instant::now()));
        if cache.len() >= self.prune_at.load(Relaxed) {
            cache.retain(|_, (_, at)| at.elapsed() < self.force_update);
            self.prune_at
                .store((cache.len() * 2).max(PRUNE_MIN), Relaxed);
        }
    }

    /// A file missing from an existing cgroup is a knob this kernel lacks: not asked again
    /// until `force_update` (a cgroup not there yet, a pod starting, is asked every time).
    fn remember_missing(&self, u: &Update, key: &str) {
        if self
            .cgroups
            .dir_path(u.resource.subsystem(), &u.dir)
            .is_dir()
        {
            self.remember(key, None);
        }
    }

    /// Writes one value unless it is already there.
    pub fn update(&self, u: &Update) -> Result<Outcome, ExecError> {
        if u.dir.as_str().split('/').any(|c| c == ".." || c == ".") {
            return Err(ExecError::Invalid {
                resource: u.resource,
                dir: u.dir.as_str().into(),
                value: u.value.clone(),
                reason: "the cgroup path leaves the cgroup root".into(),
            });
        }
        validate(u.resource, &u.value).map_err(|reason| ExecError::Invalid {
            resource: u.resource,
            dir: u.dir.as_str().into(),
            value: u.value.clone(),
            reason,
        })?;
        let want = normalize(u.resource, &u.value);
        let k = key(u);
        match self.cached(&k) {
            Some(None) => return Ok(Outcome::Missing),
            Some(Some(v)) if v == want => return Ok(Outcome::Unchanged),
            _ => {}
        }
        let old = match self.current(u) {
            Ok(v) => normalize(u.resource, &v),
            Err(e) if e.is_not_found() => {
                self.remember_missing(u, &k);
                return Ok(Outcome::Missing);
            }
            Err(e) => return Err(e.into()),
        };
        let remember = |v: String| self.remember(&k, Some(v));
        if old == want {
            remember(want);
            return Ok(Outcome::Unchanged);
        }
        let start = Instant::now();
        let written = self.cgroups.write(u.resource, &u.dir, &want);
        // A file or cgroup that is gone is not a failure (Koordinator ignores it too).
        if !matches!(&written, Err(e) if e.is_not_found()) {
            self.observe("cgroup", written.is_ok(), start);
        }
        match written {
            Ok(()) => {}
            Err(e) if e.is_not_found() => return Ok(Outcome::Missing),
            Err(e) => return Err(e.into()),
        }
        remember(want.clone());
        let change = Change {
            resource: u.resource,
            dir: u.dir.as_str().into(),
            old,
            new: want,
        };
        tracing::info!(resource = ?change.resource, dir = %change.dir, old = %change.old, new = %change.new, "cgroup updated");
        Ok(Outcome::Written(change))
    }

    /// Writes a kernel file the cgroup table does not describe (blkio's per-device lines,
    /// resctrl's schemata and tasks) unless `current` — what the file holds as far as this
    /// value is concerned; `None` for append-style files — already equals `value`. Logged
    /// like a cgroup write; a missing file is not an error. True when written.
    pub fn write_file(
        &self,
        path: &std::path::Path,
        value: &str,
        current: Option<&str>,
    ) -> Result<bool, ExecError> {
        let shown = path.display().to_string();
        if !path.is_absolute()
            || path
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(ExecError::File {
                path: shown,
                error: "not an absolute path inside a kernel filesystem".into(),
            });
        }
        if current.is_some_and(|c| c.trim() == value.trim()) {
            return Ok(false);
        }
        let start = Instant::now();
        let written = crate::os::knob::write(path, value);
        let missing = written.as_ref().is_err_and(crate::os::knob::missing);
        if !missing {
            self.observe("default", written.is_ok(), start);
        }
        match written {
            Ok(()) => {
                tracing::info!(file = %shown, old = current.unwrap_or(""), new = %value, "kernel file updated");
                Ok(true)
            }
            Err(e) if crate::os::knob::missing(&e) => Ok(false),
            Err(crate::os::files::FileError::Io(_, e)) => Err(ExecError::File {
                path: shown,
                error: e.to_string(),
            }),
            Err(e) => Err(ExecError::File {
                path: shown,
                error: e.to_string(),
            }),
        }
    }

    /// The relaxed value for pass 1 of a leveled update: what both old and new allow.
    fn relaxed(&self, u: &Update) -> Option<String> {
        let relaxable = matches!(
            u.resource,
            Resource::CpusetCpus
                | Resource::CpusetMems
                | Resource::CfsQuota
                | Resource::MemoryLimit
                | Resource::MemoryHigh
                | Resource::MemoryMin
                | Resource::MemoryLow
        );
        // Known to hold the value already (or to lack the knob): nothing to relax.
        if !relaxable
            || self
                .cached(&key(u))
                .is_some_and(|v| v.is_none_or(|v| v == normalize(u.resource, &u.value)))
        {
            return None;
        }
        let cur = self.current(u).ok()?;
        match u.resource {
            Resource::CpusetCpus | Resource::CpusetMems => {
                let mut all = cpuset::parse(&cur).ok()?;
                all.extend(cpuset::parse(&u.value).ok()?);
                all.sort_unstable();
                all.dedup();
                Some(cpuset::format(&all))
            }
            Resource::CfsQuota
            | Resource::MemoryLimit
            | Resource::MemoryHigh
            | Resource::MemoryMin
            | Resource::MemoryLow => {
                let (c, n): (i64, i64) = (cur.trim().parse().ok()?, u.value.trim().parse().ok()?);
                Some(if c == -1 || n == -1 {
                    "-1".into()
                } else {
                    c.max(n).to_string()
                })
            }
            _ => None,
        }
    }

    /// `levels[0]` is the top (QoS dir), then pods, then containers: relax top-down, then
    /// write the exact values bottom-up.
    pub fn leveled(&self, levels: &[Vec<Update>]) -> Vec<Result<Outcome, ExecError>> {
        for level in levels {
            for u in level {
                if let Some(v) = self.relaxed(u)
                    && v != normalize(u.resource, &u.value)
                {
                    let _ = self.update(&Update {
                        value: v,
                        ..u.clone()
                    });
                }
            }
        }
        levels
            .iter()
            .rev()
            .flat_map(|level| level.iter().map(|u| self.update(u)))
            .collect()
    }
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
