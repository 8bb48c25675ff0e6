//! The embedded node runtime honours `securityContext` (root only; CI is root): the user,
//! groups and capabilities a container asks for are what its process has, and
//! `runAsNonRoot` without a user is refused with the kubelet's words.

use std::time::Duration;

use serde_json::{Value, json};

use super::noderuntime::{config, phase, pod, setup_with, status};

/// A pod whose container prints its ids and capability sets, with `sc` as its
/// container securityContext and `pod_sc` as the pod's.
fn probe(name: &str, pod_sc: Value, sc: Value) -> Value {
    let mut p = pod(
        name,
        "Never",
        "id -u; id -g; id -G; grep -E '^Cap(Eff|Bnd)|^NoNewPrivs' /proc/self/status",
        json!({}),
    );
    p["spec"]["securityContext"] = pod_sc;
    p["spec"]["containers"][0]["securityContext"] = sc;
    p
}

fn field<'a>(logs: &'a str, key: &str) -> &'a str {
    logs.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
        .unwrap_or_else(|| panic!("{key} in {logs}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_run_as_their_security_context_says() {
    // Under koord's shim, as the embedded binary runs them: the shim starts as root and
    // hands the identity on.
    let mut cfg = config("secctx", false);
    cfg.shim = Some(crate::common::koord_bin());
    let Some(rt) = setup_with(cfg).await else {
        return;
    };
    let cases = [
        (
            "nonroot",
            json!({"runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "supplementalGroups": [4000]}),
            json!({}),
        ),
        (
            "defaults",
            json!({}),
            json!({"allowPrivilegeEscalation": false}),
        ),
        (
            "narrow",
            json!({}),
            json!({"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}),
        ),
        ("privileged", json!({}), json!({"privileged": true})),
    ];
    for (name, pod_sc, sc) in &cases {
        rt.create(probe(name, pod_sc.clone(), sc.clone())).await;
    }
    let mut out = std::collections::HashMap::new();
    for (name, _, _) in &cases {
        rt.wait(name, "Succeeded", Duration::from_secs(20), |p| {
            phase(p) == "Succeeded"
        })
        .await;
        out.insert(
            *name,
            rt.pods.logs(name, &Default::default()).await.unwrap(),
        );
    }
    let nonroot = &out["nonroot"];
    let ids: Vec<&str> = nonroot.lines().take(3).collect();
    assert_eq!(ids, ["65534", "65534", "65534 4000"], "{nonroot}");
    assert_eq!(field(nonroot, "CapEff:"), "0000000000000000", "{nonroot}");
    assert_eq!(field(nonroot, "CapBnd:"), "00000000a80425fb", "{nonroot}");

    // Root without privileges gets containerd's default set, not the host's full one.
    let defaults = &out["defaults"];
    assert_eq!(defaults.lines().next(), Some("0"));
    assert_eq!(field(defaults, "CapEff:"), "00000000a80425fb", "{defaults}");
    assert_eq!(field(defaults, "CapBnd:"), "00000000a80425fb", "{defaults}");
    assert_eq!(field(defaults, "NoNewPrivs:"), "1", "{defaults}");
    assert_eq!(field(&out["narrow"], "CapEff:"), "0000000000000400");
    let all = std::fs::read_to_string("/proc/self/status").unwrap();
    assert_eq!(field(&out["privileged"], "CapBnd:"), field(&all, "CapBnd:"));
    assert_eq!(field(&out["privileged"], "CapEff:"), field(&all, "CapBnd:"));

    // runAsNonRoot with no user: the image (there is none) would run as root.
    rt.create(probe("refused", json!({"runAsNonRoot": true}), json!({})))
        .await;
    let refused = rt
        .wait("refused", "a refusal", Duration::from_secs(20), |p| {
            status(p)
                .container_statuses
                .unwrap_or_default()
                .first()
                .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
                .as_deref()
                == Some("CreateContainerConfigError")
        })
        .await;
    let waiting = status(&refused).container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    assert_eq!(
        waiting.message.as_deref(),
        Some(
            "container has runAsNonRoot and image will run as root (pod: \"refused\", container: main)"
        )
    );
    rt.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_inherit_no_descriptor_beyond_stdio() {
    let Some(rt) = setup_with(config("fds", false)).await else {
        return;
    };
    // This test process holds descriptors without close-on-exec (cargo's jobserver, say);
    // one more of its own makes sure there is one to leak.
    let extra = std::fs::File::open("/dev/null").unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&extra);
    // SAFETY: clears FD_CLOEXEC on a descriptor this test owns.
    unsafe { libc::fcntl(raw, libc::F_SETFD, 0) };
    rt.create(pod("fds", "Never", "ls /proc/self/fd/", json!({})))
        .await;
    rt.wait("fds", "Succeeded", Duration::from_secs(20), |p| {
        phase(p) == "Succeeded"
    })
    .await;
    let logs = rt.pods.logs("fds", &Default::default()).await.unwrap();
    let fds: Vec<&str> = logs.split_whitespace().collect();
    // 0-2, and the one `ls` opens to read the directory.
    assert_eq!(fds, ["0", "1", "2", "3"], "{logs}");
    drop(extra);
    rt.finish().await;
}
