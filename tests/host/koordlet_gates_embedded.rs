//! The koordlet's features that are off by default, end to end with `koord --role=all
//! --embedded` (root only; CI is root), run in a network namespace the test makes so the
//! shaping lands on a link of its own (gates TCNetworkQoS, AuditEvents,
//! AuditEventsHTTPHandler, PodResourcesProxy):
//! - the NodeSLO from `slo-controller-config` (`system-config`'s `totalNetworkBandwidth`,
//!   each class's `networkQOS`) becomes the HTB tree on the namespace's default-route
//!   interface, and a BE pod the embedded node runtime runs is steered into the BE class;
//! - the cgroup values the koordlet writes for it are read back from `/events`;
//! - the pod-resources proxy answers `List` with the pod, forwarded to the kubelet's socket
//!   the node runtime serves.

use crate::common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use common::burner::can_run;
use common::{ChildLimits, Koord, eventually, free_port, http_get};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const NODE: &str = "koord-node";

/// A network namespace whose default route leaves by `d0` (10.201.0.2) towards a peer
/// namespace holding `d1` (10.201.0.9); both deleted on drop.
struct Namespaces {
    ns: String,
    peer: String,
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

impl Namespaces {
    fn new() -> Option<Namespaces> {
        let ns = format!("koord-e2e-{}", std::process::id());
        let peer = format!("{ns}-p");
        let n = Namespaces { ns, peer };
        let (ns, peer) = (n.ns.as_str(), n.peer.as_str());
        let ok = ip(&["netns", "add", ns])
            && ip(&["netns", "add", peer])
            && ip(&["-n", ns, "link", "set", "lo", "up"])
            && ip(&[
                "-n", ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1",
            ])
            && ip(&["-n", ns, "link", "set", "d1", "netns", peer])
            && ip(&["-n", ns, "addr", "add", "10.201.0.2/24", "dev", "d0"])
            && ip(&["-n", peer, "addr", "add", "10.201.0.9/24", "dev", "d1"])
            && ip(&["-n", ns, "link", "set", "d0", "up"])
            && ip(&["-n", peer, "link", "set", "d1", "up"])
            && ip(&["-n", ns, "route", "add", "default", "via", "10.201.0.9"]);
        ok.then_some(n)
    }

    fn tc(&self, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, "tc"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in [&self.ns, &self.peer] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Runs `f` on a thread inside the namespace, with a runtime of its own there (the
/// embedded API server listens on the namespace's loopback).
fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
    let file = std::fs::File::open(format!("/var/run/netns/{name}")).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsRawFd;
            // SAFETY: a namespace descriptor; only this thread changes namespace.
            assert_eq!(
                unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            f()
        })
        .join()
        .unwrap()
    })
}

#[test]
fn node_slo_bandwidths_shape_the_link_and_writes_are_audited() {
    if !can_run()
        || !Command::new("tc")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    {
        eprintln!("skipping: needs root, a cgroup hierarchy and the tc tool");
        return;
    }
    let Some(ns) = Namespaces::new() else {
        eprintln!("skipping: `ip netns add` failed (no namespaces here)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("koord.yaml");
    let gates = "{TCNetworkQoS: true, AuditEvents: true, AuditEventsHTTPHandler: true, \
                 PodResourcesProxy: true}";
    let audit = dir.path().join("audit");
    let proxy = dir.path().join("pod-resources");
    std::fs::write(
        &cfg,
        format!(
            "koordlet:\n  featureGates: {gates}\n  podResourcesProxyPath: {}\n  audit:\n    logDir: {}\n",
            proxy.display(),
            audit.display()
        ),
    )
    .unwrap();
    let (api, admin) = (free_port(), free_port());
    let parent = format!("koord-test-{}-netqos", std::process::id());
    let pods_addr = format!("127.0.0.1:{}", free_port());
    let netns = std::fs::File::open(format!("/var/run/netns/{}", ns.ns)).unwrap();
    let koord = {
        use std::os::fd::AsRawFd;
        Koord::start_limited(
            &[
                "--role=all",
                "--embedded",
                "--embedded-addr",
                &format!("127.0.0.1:{api}"),
                "--admin-addr",
                &format!("127.0.0.1:{admin}"),
                "--data-dir",
                dir.path().to_str().unwrap(),
                "--node-name",
                NODE,
                "--config",
                cfg.to_str().unwrap(),
            ],
            &[
                (
                    "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
                    parent.as_str(),
                ),
                (
                    "KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR",
                    pods_addr.as_str(),
                ),
            ],
            dir.path(),
            ChildLimits {
                netns: Some(netns.as_raw_fd()),
                ..Default::default()
            },
        )
    };
    drop(netns);
    let admin: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    in_netns(&ns.ns, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(drive(&koord, dir.path(), &ns, admin));
    });
}

async fn drive(koord: &Koord, dir: &std::path::Path, ns: &Namespaces, admin: SocketAddr) {
    let client = common::embedded_client(koord, &dir.join("kubeconfig")).await;
    let pp = PostParams::default();
    let qos = json!({"clusterStrategy": {
        "lsClass": {"networkQOS": {"enable": true, "egressRequest": "30M", "egressLimit": "80M"}},
        "beClass": {"networkQOS": {"enable": true, "egressRequest": "10M", "egressLimit": "20M"}}}});
    let data = json!({"colocation-config": "{\"enable\": true}",
        "system-config": "{\"clusterStrategy\": {\"totalNetworkBandwidth\": \"100M\"}}",
        "resource-qos-config": qos.to_string()});
    common::create_slo_config(&client, koord, data).await;
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "be-sleep", "namespace": "default", "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {"nodeName": NODE, "priorityClassName": "koord-batch", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "sleep", "image": "busybox", "command": ["sh", "-c", format!("sleep 600 # {}", common::marker())],
                "resources": {"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "64Mi"},
                              "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "64Mi"}}}]}}))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&pp, &pod).await.unwrap();

    // The NodeSLO's bandwidths, on the namespace's default-route link.
    let shaped = eventually(Duration::from_secs(60), || async {
        let classes = ns.tc(&["class", "show", "dev", "d0"]);
        classes.contains("class htb 1:3 parent 1:1 prio 2 rate 30Mbit ceil 80Mbit")
            && classes.contains("class htb 1:4 parent 1:1 prio 3 rate 10Mbit ceil 20Mbit")
    })
    .await;
    assert!(
        shaped,
        "classes: {}\n{}",
        ns.tc(&["class", "show", "dev", "d0"]),
        koord.logs()
    );
    // The BE pod, once running with an address, steered into the BE class.
    let steered = eventually(Duration::from_secs(60), || async {
        ns.tc(&["filter", "show", "dev", "d0"])
            .contains("flowid 1:4")
    })
    .await;
    assert!(
        steered,
        "filters: {}",
        ns.tc(&["filter", "show", "dev", "d0"])
    );

    // What the koordlet wrote for the pod's cgroups, newest first on /events.
    let audited = eventually(Duration::from_secs(30), || async {
        http_get(admin, "/events?size=50")
            .is_some_and(|(status, body)| status == 200 && body.contains("UpdateCgroup"))
    })
    .await;
    let events = http_get(admin, "/events?size=50");
    assert!(audited, "/events: {events:?}\n{}", koord.logs());
    assert!(
        dir.join("audit/audit.log").exists(),
        "the audit log on disk"
    );

    // The proxy's List, forwarded to the node runtime's kubelet socket.
    use koord::api::podresources::pb;
    let channel = koord::kernel::cri::unix_channel(dir.join("pod-resources/kubelet.sock"));
    let mut lister = pb::pod_resources_lister_client::PodResourcesListerClient::new(channel);
    let listed = eventually(Duration::from_secs(20), || {
        let mut lister = lister.clone();
        async move {
            lister
                .list(pb::ListPodResourcesRequest {})
                .await
                .is_ok_and(|r| {
                    r.into_inner().pod_resources.iter().any(|p| {
                        p.name == "be-sleep"
                            && p.namespace == "default"
                            && p.containers.iter().any(|c| c.name == "sleep")
                    })
                })
        }
    })
    .await;
    let answer = lister.list(pb::ListPodResourcesRequest {}).await;
    assert!(listed, "List: {answer:?}\n{}", koord.logs());
}
