//! Starting one container attempt as a host process inside its own cgroup.

use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::resources::{CgroupValues, container_values};
use crate::os::mount::MountNs;
use crate::os::process::{Identity, Spawn, spawn_in_cgroups, start_time};
use crate::os::{CgroupDir, CgroupError, Cgroups, Resource};

pub const RUNTIME_SCHEME: &str = "koord-process";

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "container {0:?} has neither command nor args: koord runs containers as host processes and ignores the image"
    )]
    NoCommand(String),
    /// The name becomes part of a host path (the log file); the API server refuses such
    /// names, so only an object stored by an older koord can carry one.
    #[error("container name {0:?}: {msg}", msg = crate::api::names::DNS_LABEL)]
    BadName(String),
    #[error("cgroup: {0}")]
    Cgroup(#[from] CgroupError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    File(#[from] crate::os::files::FileError),
    /// A runtime hook under `failure-policy: Fail` did not answer.
    #[error("{0}")]
    Hook(String),
    #[error("{0}")]
    Security(#[from] super::security::SecurityError),
    /// A projected volume could not be filled or mounted.
    #[error("{0}")]
    Volume(String),
}

impl LaunchError {
    /// The kubelet's waiting reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            LaunchError::NoCommand(_) | LaunchError::BadName(_) | LaunchError::Security(_) => {
                "CreateContainerConfigError"
            }
            LaunchError::Cgroup(_) | LaunchError::Hook(_) => "CreateContainerError",
            LaunchError::Io(_) | LaunchError::File(_) => "RunContainerError",
            // The kubelet keeps such a pod creating (and reports FailedMount).
            LaunchError::Volume(_) => "ContainerCreating",
        }
    }
}

pub struct Launched {
    pub id: String,
    pub dir: CgroupDir,
    pub child: tokio::process::Child,
    pub pid: i32,
    pub start_time: Option<u64>,
    pub oom_before: u64,
}

/// A containerd-style 64-hex-digit id.
pub fn new_container_id() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// `command` + `args`; without `command`, `args` alone (there is no image entrypoint).
pub fn command_of(c: &Container) -> Result<(OsString, Vec<OsString>), LaunchError> {
    let mut words: Vec<String> = c.command.clone().unwrap_or_default();
    words.extend(c.args.clone().unwrap_or_default());
    let mut it = words.into_iter();
    let program = it
        .next()
        .ok_or_else(|| LaunchError::NoCommand(c.name.clone()))?;
    Ok((program.into(), it.map(OsString::from).collect()))
}

/// The container's environment: the API server's address as the kubelet gives it (the
/// `kubernetes` Service's variables), then literal values and the downward-API fields
/// koord knows.
pub fn env_of(
    c: &Container,
    pod: &Pod,
    node: &str,
    ip: &str,
    api: Option<std::net::SocketAddr>,
) -> Vec<(String, String)> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    // The kubelet's: `spec.hostname` when set (StatefulSet and Indexed Job pods).
    let hostname = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .unwrap_or_else(|| name.clone());
    let mut env = vec![
        (
            "PATH".to_string(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ),
        ("HOSTNAME".to_string(), hostname),
        ("HOME".to_string(), "/root".to_string()),
    ];
    if let Some(a) = api {
        let (host, port) = (a.ip().to_string(), a.port().to_string());
        env.extend([
            ("KUBERNETES_SERVICE_HOST".to_string(), host),
            ("KUBERNETES_SERVICE_PORT".to_string(), port.clone()),
            ("KUBERNETES_SERVICE_PORT_HTTPS".to_string(), port),
            ("KUBERNETES_PORT".to_string(), format!("tcp://{a}")),
        ]);
    }
    for e in c.env.iter().flatten() {
        let value = match (
            &e.value,
            e.value_from.as_ref().and_then(|v| v.field_ref.as_ref()),
        ) {
            (Some(v), _) => Some(v.clone()),
            (None, Some(f)) => match f.field_path.as_str() {
                "metadata.name" => Some(name.clone()),
                "metadata.namespace" => pod.metadata.namespace.clone(),
                "metadata.uid" => pod.metadata.uid.clone(),
                "spec.nodeName" => Some(node.to_string()),
                "status.podIP" | "status.hostIP" => Some(ip.to_string()),
                path => {
                    keyed(path, "metadata.labels", pod.metadata.labels.as_ref()).or_else(|| {
                        keyed(
                            path,
                            "metadata.annotations",
                            pod.metadata.annotations.as_ref(),
                        )
                    })
                }
            },
            (None, None) => Some(String::new()),
        };
        match value {
            Some(v) => {
                env.retain(|(k, _)| k != &e.name);
                env.push((e.name.clone(), v));
            }
            None => {
                tracing::warn!(container = %c.name, var = %e.name, "environment source not supported; skipped")
            }
        }
    }
    env
}

/// `metadata.labels['key']` (or annotations) from `map`: the value, "" when unset.
fn keyed(
    path: &str,
    field: &str,
    map: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<String> {
    let key = path
        .strip_prefix(field)?
        .strip_prefix("['")?
        .strip_suffix("']")?;
    Some(map.and_then(|m| m.get(key)).cloned().unwrap_or_default())
}

/// A user other than root has no /root: HOME is `/` for it (containerd's fallback for a
/// user without a passwd entry), unless the container set HOME itself.
pub fn home_for(env: &mut [(String, String)], uid: u32) {
    if uid == 0 {
        return;
    }
    if let Some(home) = env.iter_mut().find(|(k, v)| k == "HOME" && v == "/root") {
        home.1 = "/".into();
    }
}

/// Writes shares, quota and memory limit to a cgroup.
pub fn apply_values(
    cgroups: &Cgroups,
    dir: &CgroupDir,
    v: &CgroupValues,
) -> Result<(), CgroupError> {
    cgroups.write(Resource::CpuShares, dir, &v.cpu_shares.to_string())?;
    cgroups.write(Resource::CfsQuota, dir, &v.cpu_quota.to_string())?;
    cgroups.write(Resource::MemoryLimit, dir, &v.memory_limit.to_string())?;
    Ok(())
}

pub struct LaunchSpec<'a> {
    pub cgroups: &'a Cgroups,
    pub proc_root: &'a Path,
    pub pod: &'a Pod,
    pub pod_dir: &'a CgroupDir,
    pub container: &'a Container,
    pub log: &'a Path,
    pub node: &'a str,
    pub ip: &'a str,
    /// The API server the containers are told of.
    pub api: Option<std::net::SocketAddr>,
    /// The container's projected volumes, bound read-only in a mount namespace of its own.
    pub mounts: Vec<crate::os::mount::BindMount>,
    /// What the runtime hooks changed (values, cpuset, envs).
    pub hooked: &'a super::hooks::Hooked,
    /// The koord binary to start the container under (`__shim`), and where the shims
    /// write exit statuses.
    pub shim: Option<(&'a Path, &'a Path)>,
}

/// What to start: the container's command as its identity, or the shim (as root, with
/// the descriptor of the exit file it writes) starting the command as that identity.
struct Start {
    program: OsString,
    args: Vec<OsString>,
    identity: Option<Identity>,
    exit_file: Option<std::fs::File>,
}

fn under_shim(
    shim: Option<(&Path, &Path)>,
    id: &str,
    program: OsString,
    args: Vec<OsString>,
    identity: Identity,
) -> Result<Start, LaunchError> {
    let Some((binary, exits)) = shim else {
        return Ok(Start {
            program,
            args,
            identity: Some(identity),
            exit_file: None,
        });
    };
    let file = super::shim::exit_file(exits, id);
    if let Some(dir) = file.parent() {
        crate::os::files::private_dir(dir)?;
    }
    let exit = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&file)?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&exit);
    let mut all = super::shim::args(fd, &identity);
    all.push(program);
    all.extend(args);
    Ok(Start {
        program: binary.as_os_str().to_owned(),
        args: all,
        identity: None,
        exit_file: Some(exit),
    })
}

/// Creates the container's cgroup, applies its limits and starts its process in it.
pub fn launch(s: &LaunchSpec<'_>) -> Result<Launched, LaunchError> {
    if !crate::api::names::dns_label(&s.container.name) {
        return Err(LaunchError::BadName(s.container.name.clone()));
    }
    let (program, args) = command_of(s.container)?;
    let identity = super::security::identity(
        s.pod,
        s.container,
        crate::os::process::available_capabilities(),
    )?;
    let id = new_container_id();
    let dir = s
        .cgroups
        .container_dir(s.pod_dir, &format!("{RUNTIME_SCHEME}://{id}"))
        .unwrap_or_else(|| s.pod_dir.join(&id));
    s.cgroups.create(&dir)?;
    let started = (|| {
        let values = s
            .hooked
            .values
            .unwrap_or_else(|| container_values(s.container));
        apply_values(s.cgroups, &dir, &values)?;
        if let Some(cpus) = &s.hooked.cpuset {
            s.cgroups.write(Resource::CpusetCpus, &dir, cpus)?;
        }
        if let Some(parent) = s.log.parent() {
            crate::os::files::private_dir(parent)?;
        }
        let log = crate::os::files::append_private(s.log)?;
        let mut env = s
            .hooked
            .envs
            .clone()
            .unwrap_or_else(|| env_of(s.container, s.pod, s.node, s.ip, s.api));
        home_for(&mut env, identity.uid);
        let start = under_shim(s.shim, &id, program, args, identity)?;
        let exit_file = start.exit_file;
        let spec = Spawn {
            program: start.program,
            args: start.args,
            env,
            cwd: s
                .container
                .working_dir
                .clone()
                .filter(|w| !w.is_empty())
                .map(Into::into),
            stdin: std::process::Stdio::null(),
            stdout: log.try_clone()?.into(),
            stderr: log.into(),
            cgroup_procs: s.cgroups.procs_files(&dir),
            identity: start.identity,
            keep_fd: exit_file.as_ref().map(std::os::fd::AsRawFd::as_raw_fd),
            mounts: if s.mounts.is_empty() {
                MountNs::Inherit
            } else {
                MountNs::New(s.mounts.clone())
            },
        };
        let oom_before = s.cgroups.oom_kills(&dir);
        let child = spawn_in_cgroups(spec)?;
        drop(exit_file);
        Ok::<_, LaunchError>((child, oom_before))
    })();
    match started {
        Ok((child, oom_before)) => {
            let pid = child.id().map(|p| p as i32).unwrap_or(0);
            Ok(Launched {
                start_time: start_time(s.proc_root, pid),
                id,
                dir,
                child,
                pid,
                oom_before,
            })
        }
        Err(e) => {
            let _ = s.cgroups.remove(&dir);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_and_env() {
        let c: Container = serde_json::from_value(serde_json::json!({"name": "c", "command": ["sh", "-c"], "args": ["echo hi"],
            "env": [{"name": "A", "value": "1"}, {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "PATH", "value": "/bin"},
                    {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}}]})).unwrap();
        let (p, a) = command_of(&c).unwrap();
        assert_eq!(p, "sh");
        assert_eq!(a, vec![OsString::from("-c"), OsString::from("echo hi")]);
        let pod: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "web",
            "annotations": {"batch.kubernetes.io/job-completion-index": "3"}}, "spec": {"hostname": "pi-3", "containers": []}}))
        .unwrap();
        let env = env_of(&c, &pod, "n", "127.0.0.1", None);
        assert!(!env.iter().any(|(k, _)| k.starts_with("KUBERNETES_")));
        let api = "127.0.0.1:6443".parse().ok();
        let with_api = env_of(&c, &pod, "n", "127.0.0.1", api);
        assert!(with_api.contains(&("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into())));
        assert!(with_api.contains(&("KUBERNETES_SERVICE_PORT".into(), "6443".into())));
        assert!(env.contains(&("POD".into(), "web".into())));
        assert!(env.contains(&("JOB_COMPLETION_INDEX".into(), "3".into())));
        assert!(
            env.contains(&("APP".into(), String::new())),
            "unset label: empty"
        );
        assert!(env.contains(&("HOSTNAME".into(), "pi-3".into())));
        assert!(
            env.contains(&("PATH".into(), "/bin".into())),
            "the pod's PATH wins"
        );
        let args_only: Container =
            serde_json::from_value(serde_json::json!({"name": "c", "args": ["sleep", "1"]}))
                .unwrap();
        assert_eq!(command_of(&args_only).unwrap().0, "sleep");
        let none: Container = serde_json::from_value(serde_json::json!({"name": "c"})).unwrap();
        assert!(matches!(command_of(&none), Err(LaunchError::NoCommand(_))));
        assert_eq!(new_container_id().len(), 64);
    }
}
