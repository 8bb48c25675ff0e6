//! A CPU-burning child process in a test-owned cgroup, for the real-cgroup tests, and its
//! cleanup by PID and rmdir.
#![allow(dead_code)]

use std::time::Duration;

use koord::os::process::{SIGKILL, Spawn, signal, spawn_in_cgroups};
use koord::os::system::clock_ticks;
use koord::os::{CgroupDir, Cgroups, Driver};

use super::marker;

/// Whether real cgroup tests can run here (root and a hierarchy at /sys/fs/cgroup).
pub fn can_run() -> bool {
    super::is_root()
        && (std::path::Path::new("/sys/fs/cgroup/cpu").exists()
            || std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists())
}

/// The host's cgroups with kubepods under a test-owned parent `koord-test-<pid>-<what>`.
pub fn cgroups(what: &str) -> Cgroups {
    let parent = format!("koord-test-{}-{what}", std::process::id());
    let root = std::path::Path::new("/sys/fs/cgroup");
    let detected = Cgroups::detect(root, &parent, Driver::Cgroupfs).unwrap();
    Cgroups::new(root, detected.version(), Driver::Cgroupfs, &parent)
}

/// utime + stime of a process, in seconds of CPU.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / clock_ticks() as f64
}

/// Starts `while :; do :; done` in `dir` (created first).
pub fn start(cgroups: &Cgroups, dir: &CgroupDir) -> tokio::process::Child {
    cgroups.create(dir).unwrap();
    let log = tempfile::tempfile().unwrap();
    spawn_in_cgroups(Spawn {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            format!("while :; do :; done # {}", marker()).into(),
        ],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: None,
        stdin: std::process::Stdio::null(),
        stdout: log.try_clone().unwrap().into(),
        stderr: log.into(),
        cgroup_procs: cgroups.procs_files(dir),
        identity: None,
        keep_fd: None,
        mounts: Default::default(),
    })
    .unwrap()
}

/// Kills the burner by PID, waits for the cgroup to empty, removes `dir` and its parents.
pub async fn stop(cgroups: &Cgroups, mut child: tokio::process::Child, dir: &CgroupDir) {
    if let Some(pid) = child.id() {
        signal(pid as i32, SIGKILL).unwrap();
    }
    let _ = child.wait().await;
    for _ in 0..50 {
        if cgroups.procs(dir).unwrap_or_default().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut d = Some(dir.clone());
    while let Some(x) = d {
        cgroups.remove(&x).unwrap();
        d = x.parent();
    }
}
