//! Processes: start a command already inside its cgroups, signal process groups and
//! cgroup members, and identify a PID across restarts (start time from /proc).
//! This is the only module with `unsafe` code outside of perf events.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// What to run.
pub struct Spawn {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub stdin: std::process::Stdio,
    pub stdout: std::process::Stdio,
    pub stderr: std::process::Stdio,
    /// `cgroup.procs` files the process joins before it executes anything.
    pub cgroup_procs: Vec<PathBuf>,
}

/// Starts `spec` in its own process group, inside its cgroups from its first instruction
/// (so memory and CPU are charged there from the start).
pub fn spawn_in_cgroups(spec: Spawn) -> io::Result<tokio::process::Child> {
    let fds: Vec<OwnedFd> = spec
        .cgroup_procs
        .iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(p)
                .map(OwnedFd::from)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        })
        .collect::<io::Result<_>>()?;
    let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let mut cmd = std::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(spec.stdin)
        .stdout(spec.stdout)
        .stderr(spec.stderr)
        .process_group(0);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    // SAFETY: the closure runs in the forked child before exec. It only calls write(2),
    // which is async-signal-safe, on descriptors opened by the parent, and allocates
    // nothing. Writing "0" to cgroup.procs moves the calling process.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &raw {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = tokio::process::Command::from(cmd)
        .kill_on_drop(false)
        .spawn();
    drop(fds);
    child
}

/// Signals a process.
pub fn signal(pid: i32, sig: i32) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal pid <= 0",
        ));
    }
    // SAFETY: kill(2) takes plain integers; a positive pid never addresses a group or
    // every process.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub const SIGTERM: i32 = libc::SIGTERM;
pub const SIGKILL: i32 = libc::SIGKILL;

/// The start time of `pid` in clock ticks since boot (field 22 of `/proc/<pid>/stat`):
/// together with the pid it names one process across PID reuse.
pub fn start_time(proc_root: &Path, pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    parse_start_time(&stat)
}

/// Field 22 of a `/proc/<pid>/stat` line (the command may contain spaces and parens).
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is a live (non-zombie) process with the given start time.
pub fn alive(proc_root: &Path, pid: i32, started: Option<u64>) -> bool {
    let Ok(stat) = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    if matches!(state, Some("Z" | "X")) {
        return false;
    }
    started.is_none_or(|s| parse_start_time(&stat) == Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_from_stat() {
        let stat = "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("garbage"), None);
        let me = std::process::id() as i32;
        assert!(alive(
            Path::new("/proc"),
            me,
            start_time(Path::new("/proc"), me)
        ));
        assert!(!alive(Path::new("/proc"), me, Some(1)));
        assert!(signal(0, SIGTERM).is_err());
    }
}
