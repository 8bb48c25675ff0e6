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
    /// Who the process runs as; `None`: as this process does.
    pub identity: Option<Identity>,
    /// A descriptor of this process the child keeps across exec (at the same number).
    pub keep_fd: Option<i32>,
    /// The mount namespace it runs in.
    pub mounts: crate::os::mount::MountNs,
}

/// A process's user, groups and capabilities, as a container runtime sets them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// Capabilities kept (bit n = capability n); every other one leaves the bounding set,
    /// and a root process's permitted, effective and inheritable sets hold exactly these.
    pub capabilities: u64,
    /// `PR_SET_NO_NEW_PRIVS`: setuid binaries and file capabilities grant nothing.
    pub no_new_privs: bool,
}

impl Identity {
    /// One argument: `uid:gid:g1,g2:caps-hex:no-new-privs` (how koord hands it to its shim).
    pub fn to_arg(&self) -> String {
        let groups: Vec<String> = self.groups.iter().map(u32::to_string).collect();
        format!(
            "{}:{}:{}:{:x}:{}",
            self.uid,
            self.gid,
            groups.join(","),
            self.capabilities,
            u8::from(self.no_new_privs)
        )
    }

    pub fn from_arg(s: &str) -> Option<Identity> {
        let parts: Vec<&str> = s.split(':').collect();
        let [uid, gid, groups, caps, nnp] = parts.as_slice() else {
            return None;
        };
        let groups = groups
            .split(',')
            .filter(|g| !g.is_empty())
            .map(str::parse)
            .collect::<Result<Vec<u32>, _>>()
            .ok()?;
        Some(Identity {
            uid: uid.parse().ok()?,
            gid: gid.parse().ok()?,
            groups,
            capabilities: u64::from_str_radix(caps, 16).ok()?,
            no_new_privs: *nnp == "1",
        })
    }
}

/// A command that runs as `id` (applied between fork and exec).
pub fn command_as(program: &std::ffi::OsStr, id: Option<Identity>) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    if let Some(id) = id {
        let last_cap = last_capability();
        // SAFETY: become_identity makes only async-signal-safe system calls on memory the
        // closure owns, and allocates nothing.
        unsafe {
            cmd.pre_exec(move || become_identity(&id, last_cap));
        }
    }
    cmd
}

/// A command that runs with `root` as its root directory (`chroot` then `chdir("/")`,
/// applied between fork and exec), so koord can run a host tool from a container that
/// mounts the host at `/hostfs` without a `chroot` binary of its own.
pub fn command_in_root(program: &str, root: &Path) -> io::Result<std::process::Command> {
    use std::os::unix::ffi::OsStrExt;
    let root = std::ffi::CString::new(root.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "root path holds a NUL"))?;
    let mut cmd = std::process::Command::new(program);
    // SAFETY: chroot and chdir are async-signal-safe and read only the CString the closure
    // owns (made before the fork); nothing is allocated in the child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::chroot(root.as_ptr()) < 0 || libc::chdir(c"/".as_ptr()) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(cmd)
}

/// What a bounded run of a command printed.
#[derive(Debug)]
pub struct Ran {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` to its end, or kills it at `timeout`; reads at most `max` bytes of each of
/// its outputs (the rest is drained and dropped, so the tool never blocks on a full pipe).
pub fn output_bounded(
    mut cmd: std::process::Command,
    timeout: std::time::Duration,
    max: u64,
) -> io::Result<Ran> {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.by_ref().take(max).read_to_end(&mut buf);
                let _ = io::copy(&mut p, &mut io::sink());
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("still running after {timeout:?}; killed"),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    Ok(Ran {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// Every capability this kernel knows (`/proc/sys/kernel/cap_last_cap`).
pub fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
        .min(63)
}

/// The capabilities this process may hand on (its permitted set): a child can be given
/// no more, so "every capability" means these (koord may itself run in a container).
pub fn available_capabilities() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    parse_cap_line(&status, "CapPrm:").unwrap_or(0)
}

/// A `CapXxx:` line of `/proc/<pid>/status` (hexadecimal).
pub fn parse_cap_line(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix(key))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

/// Becomes `id`, in the order that keeps the right to do each step: bounding set first
/// (needs CAP_SETPCAP), then groups, gid and uid, then the remaining sets. Runs in the
/// forked child: only async-signal-safe system calls, no allocation.
///
/// # Safety
/// Call only between fork and exec.
unsafe fn become_identity(id: &Identity, last_cap: u32) -> io::Result<()> {
    let check = |rc: i64| {
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY (all calls below): plain integers or pointers to memory owned by `id` and
    // this frame, valid for the duration of each call.
    unsafe {
        for cap in 0..=last_cap {
            if id.capabilities & (1u64 << cap) == 0 {
                check(libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) as i64)?;
            }
        }
        check(libc::setgroups(id.groups.len(), id.groups.as_ptr()) as i64)?;
        check(libc::setresgid(id.gid, id.gid, id.gid) as i64)?;
        check(libc::setresuid(id.uid, id.uid, id.uid) as i64)?;
        if id.uid == 0 {
            let header = CapHeader {
                version: CAP_VERSION_3,
                pid: 0,
            };
            let words = [id.capabilities as u32, (id.capabilities >> 32) as u32];
            let data = words.map(|w| CapData {
                effective: w,
                permitted: w,
                inheritable: w,
            });
            check(libc::syscall(libc::SYS_capset, &header, data.as_ptr()))?;
        }
        if id.no_new_privs {
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as i64)?;
        }
    }
    Ok(())
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
    let identity = spec.identity.clone();
    let last_cap = last_capability();
    let fd_limit = crate::os::tuning::nofile_soft_limit().min(1 << 20) as i32;
    let keep_fd = spec.keep_fd;
    let mounts = spec.mounts;
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
    // which is async-signal-safe, on descriptors opened by the parent, then the mount
    // namespace's and `become_identity`'s system calls, and allocates nothing. Writing "0"
    // to cgroup.procs moves the calling process; it happens first, while the child is
    // still root.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &raw {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            crate::os::mount::enter(&mounts)?;
            if let Some(id) = &identity {
                become_identity(id, last_cap)?;
            }
            close_inherited_at_exec(fd_limit);
            if let Some(fd) = keep_fd
                && libc::fcntl(fd, libc::F_SETFD, 0) < 0
            {
                return Err(io::Error::last_os_error());
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

/// Marks every descriptor above stdio close-on-exec, as runc does: whatever koord holds
/// (or inherited from whoever started it) never reaches a container. Runs in the forked
/// child; std's own exec-error pipe is close-on-exec already.
///
/// # Safety
/// Call only between fork and exec.
unsafe fn close_inherited_at_exec(fd_limit: i32) {
    // SAFETY: close_range and fcntl take plain integers; no memory is passed.
    unsafe {
        let all = libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if all == 0 {
            return;
        }
        // Kernels before 5.11: one descriptor at a time.
        for fd in 3..fd_limit {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
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

/// Whether `pid` is a live (non-zombie) process with the given start time. Only a
/// missing `/proc/<pid>` means gone: failing to read it (out of descriptors or memory)
/// says nothing of the process, so the kernel is asked without a descriptor (`kill 0`);
/// the start time cannot be compared then, and the pid is trusted — declaring a running
/// container dead would start it twice.
pub fn alive(proc_root: &Path, pid: i32, started: Option<u64>) -> bool {
    let stat = match std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
        Err(_) => return exists(pid),
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    if matches!(state, Some("Z" | "X")) {
        return false;
    }
    started.is_none_or(|s| parse_start_time(&stat) == Some(s))
}

/// Whether a process `pid` exists, by `kill(pid, 0)` (EPERM: it does, not ours).
fn exists(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks the pid; no memory is passed.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The shim's side of a container launch: takes ownership of the exit-status descriptor
/// `fd` (close-on-exec) and installs a do-nothing handler for the termination signals, so
/// the shim outlives a signal meant for the program, while the program (a handler, unlike
/// SIG_IGN, is reset at exec) gets the default dispositions.
pub fn adopt_exit_fd(fd: i32) -> std::fs::File {
    use std::os::fd::FromRawFd;
    extern "C" fn ignore(_: libc::c_int) {}
    // SAFETY: `fd` was opened by koord for this shim and is owned by it from here on;
    // the handler does nothing, and a handler (unlike SIG_IGN) is reset at exec, so the
    // program gets the default dispositions.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        for sig in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::signal(sig, ignore as *const () as libc::sighandler_t);
        }
        std::fs::File::from_raw_fd(fd)
    }
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
        // A stat that cannot be read (here a directory; EMFILE in the field) is not death.
        let fake = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(fake.path().join(me.to_string()).join("stat")).unwrap();
        assert!(
            alive(fake.path(), me, Some(1)),
            "unreadable: asked the kernel"
        );
        let gone = i32::MAX - 1;
        std::fs::create_dir_all(fake.path().join(gone.to_string()).join("stat")).unwrap();
        assert!(
            !alive(fake.path(), gone, None),
            "the kernel knows no such pid"
        );
        assert!(!alive(fake.path(), 12345678, None), "no /proc entry: gone");
        assert!(signal(0, SIGTERM).is_err());
        let id = Identity {
            uid: 65534,
            gid: 7,
            groups: vec![7, 4000],
            capabilities: 0xa80425fb,
            no_new_privs: true,
        };
        assert_eq!(Identity::from_arg(&id.to_arg()), Some(id.clone()));
        let root = Identity {
            groups: vec![],
            ..id
        };
        assert_eq!(Identity::from_arg(&root.to_arg()), Some(root));
        assert_eq!(Identity::from_arg("1:2"), None);
        assert_eq!(
            parse_cap_line("CapInh:\t0\nCapPrm:\t000001fffeffffff\n", "CapPrm:"),
            Some(0x1fffeffffff)
        );
    }
}
