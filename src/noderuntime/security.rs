//! A container's `securityContext` turned into the identity its process gets, as the
//! kubelet and containerd do: `runAsUser`/`runAsGroup` (container over pod), the pod's
//! `supplementalGroups` and `fsGroup`, `runAsNonRoot` refused as the kubelet refuses it,
//! containerd's default capability set with `capabilities.add`/`drop`, `privileged`
//! (every capability), and `allowPrivilegeEscalation: false` (no new privileges).
//! There is no image here, so the image's user is root.

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, SecurityContext};

use crate::os::process::Identity;

/// containerd's default capabilities for a container (its `oci.WithDefaultSpec`).
const DEFAULT_CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// Linux capability names in number order (`include/uapi/linux/capability.h`).
const CAP_NAMES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    /// The kubelet's words (`pkg/kubelet/kuberuntime/security_context_others.go`).
    #[error(
        "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})"
    )]
    ImageRunsAsRoot { pod: String, container: String },
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    RunAsUserRoot { pod: String, container: String },
    #[error("unknown capability {0:?} in securityContext.capabilities")]
    UnknownCapability(String),
    #[error("{field} {value} is out of range: must be between 0 and 2147483647, inclusive")]
    OutOfRange { field: &'static str, value: i64 },
}

fn cap_number(name: &str) -> Result<u32, SecurityError> {
    let bare = name
        .strip_prefix("CAP_")
        .unwrap_or(name)
        .to_ascii_uppercase();
    CAP_NAMES
        .iter()
        .position(|n| *n == bare)
        .map(|i| i as u32)
        .ok_or_else(|| SecurityError::UnknownCapability(name.to_string()))
}

/// A user or group id in kube's range, 0…2^31-1: `u32::MAX` is -1 to `setresuid`,
/// which leaves the id unchanged — a "non-root" container would run as root.
fn id(field: &'static str, value: i64) -> Result<u32, SecurityError> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v <= i32::MAX as u32)
        .ok_or(SecurityError::OutOfRange { field, value })
}

/// containerd's default set with the container's additions and drops ("ALL" in either).
fn capabilities(sc: Option<&SecurityContext>, all: u64) -> Result<u64, SecurityError> {
    let caps = sc.and_then(|s| s.capabilities.as_ref());
    let names = |l: Option<&Vec<String>>| l.cloned().unwrap_or_default();
    let (add, drop) = (
        names(caps.and_then(|c| c.add.as_ref())),
        names(caps.and_then(|c| c.drop.as_ref())),
    );
    let mut set = 0u64;
    for n in DEFAULT_CAPS {
        set |= 1 << cap_number(n)?;
    }
    // As containerd: drops apply to the defaults, then additions (so `drop: [ALL],
    // add: [NET_BIND_SERVICE]` keeps exactly that one).
    for d in &drop {
        if d.eq_ignore_ascii_case("ALL") {
            set = 0;
        } else {
            set &= !(1 << cap_number(d)?);
        }
    }
    for a in &add {
        if a.eq_ignore_ascii_case("ALL") {
            set = all;
        } else {
            set |= 1 << cap_number(a)?;
        }
    }
    Ok(set & all)
}

/// The identity of `c`'s process in `pod`; `available` are the capabilities koord itself
/// may hand on ("every capability" means these).
pub fn identity(pod: &Pod, c: &Container, available: u64) -> Result<Identity, SecurityError> {
    let pod_sc: Option<&PodSecurityContext> =
        pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let run_as_user = sc
        .and_then(|s| s.run_as_user)
        .or(pod_sc.and_then(|s| s.run_as_user));
    let run_as_group = sc
        .and_then(|s| s.run_as_group)
        .or(pod_sc.and_then(|s| s.run_as_group));
    let non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or(pod_sc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    let names = || {
        (
            pod.metadata.name.clone().unwrap_or_default(),
            c.name.clone(),
        )
    };
    if non_root {
        match run_as_user {
            None => {
                let (pod, container) = names();
                return Err(SecurityError::ImageRunsAsRoot { pod, container });
            }
            Some(0) => {
                let (pod, container) = names();
                return Err(SecurityError::RunAsUserRoot { pod, container });
            }
            Some(_) => {}
        }
    }
    let uid = id("runAsUser", run_as_user.unwrap_or(0))?;
    // A numeric user without a passwd entry gets group 0, as containerd gives it.
    let gid = id("runAsGroup", run_as_group.unwrap_or(0))?;
    let mut groups = vec![gid];
    for g in pod_sc
        .and_then(|s| s.supplemental_groups.clone())
        .unwrap_or_default()
        .into_iter()
        .chain(pod_sc.and_then(|s| s.fs_group))
    {
        let g = id("supplementalGroups", g)?;
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let all = available;
    let privileged = sc.and_then(|s| s.privileged).unwrap_or(false);
    let capabilities = if privileged {
        all
    } else {
        capabilities(sc, all)?
    };
    let no_new_privs = !privileged && sc.and_then(|s| s.allow_privilege_escalation) == Some(false);
    Ok(Identity {
        uid,
        gid,
        groups,
        capabilities,
        no_new_privs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn case(pod_sc: serde_json::Value, sc: serde_json::Value) -> Result<Identity, SecurityError> {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"securityContext": pod_sc, "containers": [{"name": "c", "securityContext": sc}]}}))
        .unwrap();
        let c = pod.spec.as_ref().unwrap().containers[0].clone();
        identity(&pod, &c, (1u64 << 41) - 1)
    }

    fn bit(name: &str) -> u64 {
        1 << cap_number(name).unwrap()
    }

    #[test]
    fn users_and_groups_container_over_pod() {
        let id = case(
            json!({"runAsUser": 1000, "runAsGroup": 2000, "supplementalGroups": [3000], "fsGroup": 4000}),
            json!({"runAsUser": 65534}),
        )
        .unwrap();
        assert_eq!((id.uid, id.gid), (65534, 2000));
        assert_eq!(id.groups, vec![2000, 3000, 4000]);
        let root = case(json!({}), json!({})).unwrap();
        assert_eq!((root.uid, root.gid, root.groups.clone()), (0, 0, vec![0]));
        assert!(!root.no_new_privs);
    }

    #[test]
    fn run_as_non_root_is_refused_as_the_kubelet_refuses_it() {
        let err = case(json!({"runAsNonRoot": true}), json!({})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "container has runAsNonRoot and image will run as root (pod: \"p\", container: c)"
        );
        let err = case(json!({}), json!({"runAsNonRoot": true, "runAsUser": 0})).unwrap_err();
        assert!(matches!(err, SecurityError::RunAsUserRoot { .. }), "{err}");
        assert_eq!(
            case(json!({"runAsNonRoot": true, "runAsUser": 65534}), json!({}))
                .unwrap()
                .uid,
            65534
        );
        // The container may lift the pod's requirement.
        assert!(
            case(
                json!({"runAsNonRoot": true}),
                json!({"runAsNonRoot": false})
            )
            .is_ok()
        );
    }

    #[test]
    fn capabilities_default_add_drop_privileged() {
        let d = case(json!({}), json!({})).unwrap().capabilities;
        assert_eq!(d.count_ones(), 14);
        assert!(d & bit("NET_RAW") != 0 && d & bit("SYS_ADMIN") == 0);
        let c = case(
            json!({}),
            json!({"capabilities": {"add": ["NET_ADMIN", "CAP_SYS_TIME"], "drop": ["NET_RAW"]}}),
        )
        .unwrap()
        .capabilities;
        assert!(c & bit("NET_ADMIN") != 0 && c & bit("SYS_TIME") != 0 && c & bit("NET_RAW") == 0);
        let only = case(
            json!({}),
            json!({"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}),
        )
        .unwrap()
        .capabilities;
        assert_eq!(only, bit("NET_BIND_SERVICE"));
        let p = case(
            json!({}),
            json!({"privileged": true, "allowPrivilegeEscalation": false}),
        )
        .unwrap();
        assert_eq!(p.capabilities, (1u64 << 41) - 1);
        assert!(!p.no_new_privs);
        assert!(
            case(json!({}), json!({"allowPrivilegeEscalation": false}))
                .unwrap()
                .no_new_privs
        );
        assert_eq!(
            case(json!({}), json!({"capabilities": {"add": ["FLY"]}})).unwrap_err(),
            SecurityError::UnknownCapability("FLY".into())
        );
        assert!(case(json!({}), json!({"runAsUser": -1})).is_err());
        // -1 to the kernel: setresuid would leave root's uid in place.
        let max = case(
            json!({}),
            json!({"runAsNonRoot": true, "runAsUser": 4294967295u64}),
        );
        assert!(
            matches!(max, Err(SecurityError::OutOfRange { .. })),
            "{max:?}"
        );
        assert!(case(json!({}), json!({"runAsUser": 2147483648u64})).is_err());
        assert_eq!(
            case(json!({}), json!({"runAsUser": 2147483647}))
                .unwrap()
                .uid,
            i32::MAX as u32
        );
    }
}
