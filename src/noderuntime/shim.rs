//! The container shim (`koord __shim <exit-fd> <program> [args…]`), what containerd-shim
//! is to containerd: it starts the container's program, waits for it and writes its exit
//! status to a file koord opened for it. A process outlives koord only as a child of its
//! shim, so a koord that restarts and re-adopts the container still learns how it ended
//! (a process that is not one's child cannot be waited for).
//!
//! The shim runs inside the container's cgroup as root (it is koord, which a container
//! user may not be allowed to execute) and gives the program the container's identity;
//! it ignores the signals meant for the container (koord signals every process of the
//! cgroup) and exits with the program's status.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;

use crate::os::process::Identity;

/// The argument that selects the shim mode.
pub const ARG: &str = "__shim";

/// Where the exit status of container `id` is kept.
pub fn exit_file(dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    dir.join("exits").join(id)
}

/// The recorded exit code, if the shim wrote one.
pub fn recorded_exit(file: &std::path::Path) -> Option<i32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// The shim's arguments before the program's: the exit file's descriptor and the
/// identity the program runs as.
pub fn args(exit_fd: i32, identity: &Identity) -> Vec<OsString> {
    vec![
        ARG.into(),
        exit_fd.to_string().into(),
        identity.to_arg().into(),
    ]
}

/// Runs the shim; returns the process exit code.
pub fn main(args: &[OsString]) -> i32 {
    let arg = |i: usize| args.get(i).and_then(|a| a.to_str());
    let (Some(fd), Some(identity), Some(program)) = (
        arg(0).and_then(|a| a.parse::<i32>().ok()),
        arg(1).and_then(Identity::from_arg),
        args.get(2),
    ) else {
        eprintln!("koord {ARG}: usage: koord {ARG} <exit-fd> <identity> <program> [args...]");
        return 2;
    };
    let mut exit_file = crate::os::process::adopt_exit_fd(fd);
    let status = crate::os::process::command_as(program, Some(identity))
        .args(&args[3..])
        .status();
    let code = match status {
        Ok(s) => s
            .code()
            .or_else(|| s.signal().map(|sig| 128 + sig))
            .unwrap_or(255),
        Err(e) => {
            eprintln!("koord {ARG}: starting {}: {e}", program.to_string_lossy());
            if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            }
        }
    };
    let _ = exit_file.set_len(0);
    let _ = writeln!(exit_file, "{code}");
    let _ = exit_file.sync_all();
    code
}
