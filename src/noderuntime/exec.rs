//! `kubectl exec` for pods of this runtime: the command runs as the container's process
//! does, inside the container's cgroup and mount namespace, with the container's
//! environment and working directory, its stdio piped to the caller (the API server's
//! `pods/exec`).

use std::ffi::OsString;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::Ctx;
use super::checkpoint;
use super::container::env_of;
use crate::os::CgroupDir;
use crate::os::mount::MountNs;
use crate::os::process::{Spawn, alive, spawn_in_cgroups};

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("pod {0} is not running on this node")]
    NoPod(String),
    #[error("container {container} is not valid for pod {pod}")]
    NoContainer { pod: String, container: String },
    #[error("container {container} in pod {pod} is not running")]
    NotRunning { pod: String, container: String },
    #[error("no command given")]
    NoCommand,
    #[error("starting {cmd}: {err}")]
    Start { cmd: String, err: std::io::Error },
    #[error("{0}")]
    Security(#[from] super::security::SecurityError),
}

/// The container's mount namespace, when it has one of its own (its projected volumes are
/// there), entered at its working directory.
fn mount_ns(
    proc_root: &std::path::Path,
    pid: i32,
    working_dir: Option<&str>,
) -> Result<MountNs, ExecError> {
    use std::os::unix::fs::MetadataExt;
    let inode = |p: std::path::PathBuf| std::fs::metadata(p).map(|m| (m.dev(), m.ino()));
    let theirs = proc_root.join(pid.to_string()).join("ns").join("mnt");
    let start = |err| ExecError::Start {
        cmd: format!("entering the mount namespace of process {pid}"),
        err,
    };
    if inode(theirs).map_err(start)?
        == inode(proc_root.join("self").join("ns").join("mnt")).map_err(start)?
    {
        return Ok(MountNs::Inherit);
    }
    let cwd = working_dir
        .filter(|w| !w.is_empty())
        .and_then(|w| std::ffi::CString::new(w).ok());
    Ok(MountNs::Join {
        ns: crate::os::mount::namespace_of(proc_root, pid).map_err(start)?,
        cwd,
    })
}

/// A handle on the runtime, given to the API server.
#[derive(Clone)]
pub struct Exec {
    pub(super) ctx: Arc<Ctx>,
}

impl Exec {
    /// Starts `command` in `container` of `pod`, with piped stdin (when asked), stdout and
    /// stderr.
    pub fn spawn(
        &self,
        pod: &Pod,
        container: &str,
        command: &[String],
        stdin: bool,
    ) -> Result<tokio::process::Child, ExecError> {
        let meta = &pod.metadata;
        let pod_name = meta.name.clone().unwrap_or_default();
        let uid = meta.uid.clone().unwrap_or_default();
        let (program, args) = command.split_first().ok_or(ExecError::NoCommand)?;
        let spec = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == container))
            .ok_or_else(|| ExecError::NoContainer {
                pod: pod_name.clone(),
                container: container.into(),
            })?;
        let cp = checkpoint::load_all(&self.ctx.checkpoints())
            .into_iter()
            .find(|cp| cp.uid == uid)
            .ok_or_else(|| ExecError::NoPod(pod_name.clone()))?;
        let running = cp
            .containers
            .iter()
            .find(|c| !c.init && c.name == container)
            .filter(|c| alive(&self.ctx.proc_root, c.pid, c.start_time))
            .ok_or_else(|| ExecError::NotRunning {
                pod: pod_name.clone(),
                container: container.into(),
            })?;
        let piped = std::process::Stdio::piped;
        // The command runs as the container's process does.
        let identity =
            super::security::identity(pod, spec, crate::os::process::available_capabilities())?;
        let api = self.ctx.cfg.api_server;
        let mut env = env_of(spec, pod, &self.ctx.node, &self.ctx.ip, api);
        super::container::home_for(&mut env, identity.uid);
        let spawn = Spawn {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
            env,
            cwd: spec
                .working_dir
                .clone()
                .filter(|w| !w.is_empty())
                .map(Into::into),
            stdin: if stdin {
                piped()
            } else {
                std::process::Stdio::null()
            },
            stdout: piped(),
            stderr: piped(),
            cgroup_procs: self
                .ctx
                .cgroups
                .procs_files(&CgroupDir::new(running.dir.clone())),
            identity: Some(identity),
            keep_fd: None,
            mounts: mount_ns(
                &self.ctx.proc_root,
                running.pid,
                spec.working_dir.as_deref(),
            )?,
        };
        spawn_in_cgroups(spawn).map_err(|err| ExecError::Start {
            cmd: command.join(" "),
            err,
        })
    }
}
