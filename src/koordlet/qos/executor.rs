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
        Resource::CpuIdle
        | Resource::MemoryUsePriorityOom
        | Resource::MemoryOomGroup
        | Resource::MemoryPageCacheLimitEnable
        | Resource::MemoryPageCacheLimitSync => Some((0, 1)),
        Resource::MemoryPageCacheLimitSize => Some((0, i64::MAX)),
        Resource::MemoryWmarkRatio => Some((0, 100)),
        Resource::MemoryWmarkScaleFactor => Some((1, 1000)),
        Resource::MemoryWmarkMinAdj => Some((-25, 50)),
        Resource::MemoryPriority => Some((0, 12)),
        Resource::NetClsClassId => Some((0, i64::from(u32::MAX))),
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
    cache: Mutex<Cache>,
    /// The cache's size at which expired entries (pods gone) are dropped.
    prune_at: std::sync::atomic::AtomicUsize,
    force_update: Duration,
    /// Where write durations are recorded.
    pub observed: Option<std::sync::Arc<crate::koordlet::metrics::KoordletMetrics>>,
}

/// Below this many entries the cache is not pruned.
const PRUNE_MIN: usize = 1024;

/// `file:dir` → (value there, when seen). The key of a lookup is built in `key`, reused,
/// so an unchanged value (nearly every update) costs no allocation.
#[derive(Default)]
struct Cache {
    entries: Entries,
    key: String,
}

type Entries = HashMap<String, (Option<String>, Instant)>;

impl Cache {
    fn set_key(&mut self, u: &Update) {
        self.key.clear();
        self.key.push_str(u.resource.v1_name());
        self.key.push(':');
        self.key.push_str(u.dir.as_str());
    }
}

/// What the cache knows of an update's file while fresh.
enum Known {
    /// The cgroup exists without the knob.
    Missing,
    /// The file holds the wanted value.
    Same,
    /// Not cached, expired, or another value.
    Unknown,
}

/// Values compare as numbers or CPU sets, so "0-3" equals "0,1,2,3" and "max" equals -1.
fn normalize(res: Resource, v: &str) -> std::borrow::Cow<'_, str> {
    let v = v.trim();
    if matches!(res, Resource::CpusetCpus | Resource::CpusetMems) {
        return match cpuset::parse(v) {
            Ok(c) => cpuset::format(&c).into(),
            Err(_) => v.into(),
        };
    }
    if v == "max" { "-1".into() } else { v.into() }
}

impl Executor {
    pub fn new(cgroups: Cgroups, force_update: Duration) -> Executor {
        Executor {
            cgroups,
            cache: Mutex::new(Cache::default()),
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the cache knows of `u`'s file against the (normalized) value `want`.
    fn known(&self, u: &Update, want: &str) -> Known {
        let mut cache = self.lock();
        let cache = &mut *cache;
        cache.set_key(u);
        match cache.entries.get(cache.key.as_str()) {
            Some((v, at)) if at.elapsed() < self.force_update => match v {
                None => Known::Missing,
                Some(v) if v == want => Known::Same,
                Some(_) => Known::Unknown,
            },
            _ => Known::Unknown,
        }
    }

    fn remember(&self, u: &Update, value: Option<&str>) {
        let mut cache = self.lock();
        cache.set_key(u);
        let Cache { entries, key } = &mut *cache;
        self.remember_in(entries, key, value);
    }

    /// Updates the entry in place when there is one (no allocation for a known file).
    fn remember_in(&self, entries: &mut Entries, key: &str, value: Option<&str>) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = Instant::now();
        match (entries.get_mut(key), value) {
            (Some((Some(old), at)), Some(v)) => {
                old.clear();
                old.push_str(v);
                *at = now;
            }
            _ => {
                entries.insert(key.to_string(), (value.map(str::to_string), now));
            }
        }
        if entries.len() >= self.prune_at.load(Relaxed) {
            entries.retain(|_, (_, at)| at.elapsed() < self.force_update);
            self.prune_at
                .store((entries.len() * 2).max(PRUNE_MIN), Relaxed);
        }
    }

    /// A file missing from an existing cgroup is a knob this kernel lacks: not asked again
    /// until `force_update` (a cgroup not there yet, a pod starting, is asked every time).
    fn remember_missing(&self, u: &Update) {
        if self
            .cgroups
            .dir_path(u.resource.subsystem(), &u.dir)
            .is_dir()
        {
            self.remember(u, None);
        }
    }

    /// Drops what the cache knows of `u`'s file: the kernel changed it behind the
    /// executor's back (leaving `cpu.idle` resets `cpu.shares`), so the next update reads it.
    pub fn forget(&self, u: &Update) {
        let mut cache = self.lock();
        cache.set_key(u);
        let Cache { entries, key } = &mut *cache;
        entries.remove(key.as_str());
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
        match self.known(u, &want) {
            Known::Missing => return Ok(Outcome::Missing),
            Known::Same => return Ok(Outcome::Unchanged),
            Known::Unknown => {}
        }
        let old = match self.current(u) {
            Ok(v) => normalize(u.resource, &v).into_owned(),
            Err(e) if e.is_not_found() => {
                self.remember_missing(u);
                return Ok(Outcome::Missing);
            }
            Err(e) => return Err(e.into()),
        };
        if old == want {
            self.remember(u, Some(&want));
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
        self.remember(u, Some(&want));
        let change = Change {
            resource: u.resource,
            dir: u.dir.as_str().into(),
            old,
            new: want.into_owned(),
        };
        tracing::info!(resource = ?change.resource, dir = %change.dir, old = %change.old, new = %change.new, "cgroup updated");
        crate::koordlet::audit::record(3, || {
            let file = self.cgroups.file(u.resource, &u.dir);
            crate::koordlet::audit::Event::group(&change.dir)
                .reason("UpdateCgroup")
                .message(format!(
                    "update {} to {} (was {})",
                    file.display(),
                    change.new,
                    change.old
                ))
        });
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
                crate::koordlet::audit::record(3, || {
                    crate::koordlet::audit::Event::node()
                        .reason("UpdateFile")
                        .message(format!("update {shown} to {value}"))
                });
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
            || matches!(
                self.known(u, &normalize(u.resource, &u.value)),
                Known::Missing | Known::Same
            )
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
    /// write the exact values bottom-up. A relaxed value that is the exact one (a quota
    /// lifted to -1) is written in the top-down pass, so children written after it never
    /// exceed their parent.
    pub fn leveled(&self, levels: &[Vec<Update>]) -> Vec<Result<Outcome, ExecError>> {
        for level in levels {
            for u in level {
                if let Some(v) = self.relaxed(u) {
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
