//! Linux core scheduling (`prctl(PR_SCHED_CORE, …)`, kernel ≥ 5.14 with CONFIG_SCHED_CORE):
//! tasks share an SMT core only with tasks holding the same cookie. Koordinator's
//! `pkg/koordlet/util/system/core_sched*.go` semantics: cookies are created for a thread
//! group and copied from one task to others through the calling thread, so every copy runs
//! on a thread of its own and the koordlet's threads keep the default cookie (0).

use std::io;

const PR_SCHED_CORE: libc::c_int = 62;
const GET: libc::c_ulong = 0;
const CREATE: libc::c_ulong = 1;
const SHARE_TO: libc::c_ulong = 2;
const SHARE_FROM: libc::c_ulong = 3;
const PIDTYPE_PID: libc::c_ulong = 0;
const PIDTYPE_TGID: libc::c_ulong = 1;

/// The cookie operations the CoreSched hook needs; a trait so tests can stand in for a
/// kernel without core scheduling.
pub trait CookieOps: Send + Sync {
    /// The cookie of task `pid` (0: the default, shared with everything).
    fn get(&self, pid: u32) -> io::Result<u64>;
    /// A new cookie for the whole thread group of `pid`.
    fn create(&self, pid: u32) -> io::Result<()>;
    /// Gives the thread groups `to` the cookie of task `from`, or the default cookie when
    /// `from` is `None`. Returns the pids that failed.
    fn share(&self, from: Option<u32>, to: &[u32]) -> Vec<(u32, io::Error)>;
}

fn prctl(
    cmd: libc::c_ulong,
    pid: u32,
    scope: libc::c_ulong,
    addr: libc::c_ulong,
) -> io::Result<()> {
    // SAFETY: PR_SCHED_CORE reads no memory and writes only a u64 at `addr`, which the
    // caller points at a live u64 (GET) or leaves 0.
    let r = unsafe { libc::prctl(PR_SCHED_CORE, cmd, pid as libc::c_ulong, scope, addr) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The kernel's core scheduling.
pub struct Prctl;

impl CookieOps for Prctl {
    fn get(&self, pid: u32) -> io::Result<u64> {
        let mut cookie: u64 = 0;
        prctl(
            GET,
            pid,
            PIDTYPE_PID,
            &mut cookie as *mut u64 as libc::c_ulong,
        )?;
        Ok(cookie)
    }

    fn create(&self, pid: u32) -> io::Result<()> {
        prctl(CREATE, pid, PIDTYPE_TGID, 0)
    }

    fn share(&self, from: Option<u32>, to: &[u32]) -> Vec<(u32, io::Error)> {
        // A fresh thread inherits the spawning thread's cookie, the default one; taking
        // another cookie there leaves the koordlet's own threads untouched.
        std::thread::scope(|s| {
            s.spawn(|| {
                if let Some(f) = from
                    && let Err(e) = prctl(SHARE_FROM, f, PIDTYPE_PID, 0)
                {
                    return to
                        .iter()
                        .map(|p| (*p, io::Error::new(e.kind(), format!("share from {f}: {e}"))))
                        .collect();
                }
                to.iter()
                    .filter_map(|p| prctl(SHARE_TO, *p, PIDTYPE_TGID, 0).err().map(|e| (*p, e)))
                    .collect()
            })
            .join()
            .unwrap_or_else(|_| vec![])
        })
    }
}

/// Whether this kernel does core scheduling: switched on through `kernel.sched_core` where
/// that sysctl exists, then probed on the calling thread. `Err` says why not.
pub fn enable(proc_root: &std::path::Path) -> Result<(), String> {
    let sysctl = proc_root.join("sys/kernel/sched_core");
    if let Ok(v) = std::fs::read_to_string(&sysctl)
        && v.trim() == "0"
        && let Err(e) = std::fs::write(&sysctl, "1")
    {
        return Err(format!("{} is 0 and cannot be set: {e}", sysctl.display()));
    }
    // Core scheduling and Anolis's group identity exclude each other; Koordinator turns the
    // latter off before making cookies.
    let gi = proc_root.join("sys/kernel/sched_group_identity_enabled");
    if gi.exists() {
        std::fs::write(&gi, "0").map_err(|e| format!("{}: {e}", gi.display()))?;
    }
    Prctl.get(0).map(|_| ()).map_err(|e| {
        format!("prctl(PR_SCHED_CORE) is refused ({e}); the kernel lacks CONFIG_SCHED_CORE or SMT")
    })
}
