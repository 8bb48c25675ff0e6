//! Mounting the kernel filesystems the koordlet needs and a host may lack, and the mount
//! namespaces of the node runtime's containers.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Mounts the resctrl filesystem at `root` (`mount -t resctrl resctrl <root>`, relatime,
/// as Koordinator's `MountResctrlSubsystem`). Needs root and a kernel with RDT.
pub fn resctrl(root: &Path) -> std::io::Result<()> {
    let target = CString::new(root.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let name = c"resctrl";
    // SAFETY: every pointer is a NUL-terminated string that outlives the call; no data.
    let rc = unsafe {
        libc::mount(
            name.as_ptr(),
            target.as_ptr(),
            name.as_ptr(),
            libc::MS_RELATIME,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A directory bound read-only onto another in a process's own mount namespace.
#[derive(Debug, Clone)]
pub struct BindMount {
    pub source: CString,
    pub target: CString,
}

impl BindMount {
    pub fn new(source: &Path, target: &Path) -> std::io::Result<BindMount> {
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        };
        Ok(BindMount {
            source: c(source)?,
            target: c(target)?,
        })
    }
}

/// The mount namespace a new process gets.
#[derive(Debug, Default)]
pub enum MountNs {
    /// This process's own.
    #[default]
    Inherit,
    /// A new one, private to the process (the host's later mounts still reach it), with
    /// these read-only bind mounts.
    New(Vec<BindMount>),
    /// That of another process (a descriptor of its `/proc/<pid>/ns/mnt`), then `cwd`
    /// there (entering a namespace moves a process to its root).
    Join {
        ns: std::os::fd::OwnedFd,
        cwd: Option<CString>,
    },
}

fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Enters `ns`. Runs in a forked child before exec: system calls only, no allocation.
///
/// # Safety
/// Call only between fork and exec, while the process still has CAP_SYS_ADMIN.
pub unsafe fn enter(ns: &MountNs) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: every pointer is a NUL-terminated string owned by `ns` or null; the flags
    // ask for no data argument.
    unsafe {
        match ns {
            MountNs::Inherit => Ok(()),
            MountNs::Join { ns, cwd } => {
                check(libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNS))?;
                match cwd {
                    Some(dir) => check(libc::chdir(dir.as_ptr())),
                    None => Ok(()),
                }
            }
            MountNs::New(mounts) => {
                check(libc::unshare(libc::CLONE_NEWNS))?;
                let root = c"/";
                check(libc::mount(
                    none,
                    root.as_ptr(),
                    none,
                    libc::MS_REC | libc::MS_SLAVE,
                    std::ptr::null(),
                ))?;
                for m in mounts {
                    check(libc::mount(
                        m.source.as_ptr(),
                        m.target.as_ptr(),
                        none,
                        libc::MS_BIND,
                        std::ptr::null(),
                    ))?;
                    let ro = libc::MS_BIND
                        | libc::MS_REMOUNT
                        | libc::MS_RDONLY
                        | libc::MS_NOSUID
                        | libc::MS_NODEV;
                    check(libc::mount(
                        none,
                        m.target.as_ptr(),
                        none,
                        ro,
                        std::ptr::null(),
                    ))?;
                }
                Ok(())
            }
        }
    }
}

/// A descriptor of the mount namespace of process `pid`.
pub fn namespace_of(proc_root: &Path, pid: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(proc_root.join(pid.to_string()).join("ns").join("mnt"))?;
    Ok(f.into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_with_a_nul_is_refused_before_the_kernel() {
        let bad = std::path::Path::new("/sys/fs/res\0ctrl");
        let err = super::resctrl(bad).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}
