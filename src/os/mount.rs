//! Mounting the kernel filesystems the koordlet needs and a host may lack.

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

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_with_a_nul_is_refused_before_the_kernel() {
        let bad = std::path::Path::new("/sys/fs/res\0ctrl");
        let err = super::resctrl(bad).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}
