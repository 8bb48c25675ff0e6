//! The HTB tree from the NodeSLO and pods, and the tree made true on a real link in a
//! network namespace the test creates (root only).

use super::*;
use crate::os::cgroup::{Cgroups, Driver, Version};
use std::process::Command;

fn meta(uid: &str, qos: &str, ip: &str, annotation: Option<&str>, host_network: bool) -> PodMeta {
    let cgroups = Cgroups::new("/sys/fs/cgroup", Version::V1, Driver::Cgroupfs, "");
    let mut pod = serde_json::json!({
        "metadata": {"name": uid, "namespace": "default", "uid": uid,
                     "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {"containers": [{"name": "app", "image": "i"}], "hostNetwork": host_network},
        "status": {"phase": "Running", "podIP": ip},
    });
    if let Some(a) = annotation {
        pod["metadata"]["annotations"] = serde_json::json!({"koordinator.sh/networkQOS": a});
    }
    PodMeta::new(serde_json::from_value(pod).unwrap(), &cgroups).unwrap()
}

/// 100 Mbit/s in total, LS 30–80 Mbit/s, BE 10–20 Mbit/s.
fn config() -> NetQosGlobalConfig {
    NetQosGlobalConfig {
        hw_tx_bps_max: 100_000_000,
        l1_tx_bps_min: 30_000_000,
        l1_tx_bps_max: 80_000_000,
        l2_tx_bps_min: 10_000_000,
        l2_tx_bps_max: 20_000_000,
        ..NetQosGlobalConfig::default()
    }
}

#[test]
fn classes_follow_the_node_slo_in_bytes() {
    let c = classes(&config());
    let class = |rate, ceil, prio| HtbClass { rate, ceil, prio };
    assert_eq!(c[&ROOT], (None, class(12_500_000, 12_500_000, 0)));
    assert_eq!(
        c[&SYSTEM],
        (Some(ROOT), class(7_500_000, 12_500_000, 1)),
        "what LS and BE do not request"
    );
    assert_eq!(c[&LS], (Some(ROOT), class(3_750_000, 10_000_000, 2)));
    assert_eq!(c[&BE], (Some(ROOT), class(1_250_000, 2_500_000, 3)));
    let unset = classes(&NetQosGlobalConfig {
        hw_tx_bps_max: 8_000,
        ..NetQosGlobalConfig::default()
    });
    assert_eq!(
        unset[&BE].1,
        class(0, 1_000, 3),
        "no limit: may borrow the link"
    );
}

#[test]
fn pods_go_to_their_class_or_their_own() {
    let pods = [
        meta("ls", "LS", "10.0.0.2", None, false),
        meta("be", "BE", "10.0.0.3", None, false),
        meta(
            "capped",
            "BE",
            "10.0.0.4",
            Some(r#"{"egressLimit": "8M"}"#),
            false,
        ),
        meta("plain", "", "10.0.0.5", None, false),
        meta("host", "LS", "192.168.0.1", None, true),
        meta("v6", "LS", "fd00::1", None, false),
    ];
    let mut own = PodClasses::default();
    let t = tree(&config(), pods.iter(), &mut own);
    let capped = own.minor("capped");
    assert!(capped > BE);
    let want: BTreeMap<Ipv4Addr, u16> = [
        ("10.0.0.2".parse().unwrap(), LS),
        ("10.0.0.3".parse().unwrap(), BE),
        ("10.0.0.4".parse().unwrap(), capped),
    ]
    .into();
    assert_eq!(
        t.filters, want,
        "no class label, host network, IPv6: not steered"
    );
    assert_eq!(
        t.classes[&capped],
        (
            Some(ROOT),
            HtbClass {
                rate: 1_000_000,
                ceil: 1_000_000,
                prio: 3
            }
        )
    );
    let again = tree(&config(), pods[..2].iter(), &mut own);
    assert_eq!(again.classes.len(), 4, "a gone pod's class goes with it");
    assert!(own.0.is_empty());
}

#[test]
fn a_pods_class_minor_is_stable_and_unique() {
    let mut a = PodClasses::default();
    let first = a.minor("u1");
    assert_eq!(a.minor("u1"), first);
    let mut b = PodClasses::default();
    assert_eq!(
        b.minor("u1"),
        first,
        "the same UID, the same class after a restart"
    );
    b.0.insert("other".into(), PodClasses::default().minor("u2"));
    let mut c = PodClasses::default();
    c.0.insert("taken".into(), first);
    assert_ne!(
        c.minor("u1"),
        first,
        "a collision takes the next free minor"
    );
}

/// A network namespace with a veth link `d0` (peer `d1`), deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Option<Netns> {
        let name = format!("koord-tc-{}", std::process::id());
        let ok = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["netns", "add", &name]) {
            return None;
        }
        let ns = Netns(name);
        let link = ok(&[
            "-n", &ns.0, "link", "add", "d0", "type", "veth", "peer", "name", "d1",
        ]) && ok(&["-n", &ns.0, "link", "set", "d0", "up"]);
        link.then_some(ns)
    }

    /// Runs `f` on a thread that has entered the namespace.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/var/run/netns/{}", self.0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(&path).unwrap();
                use std::os::fd::AsRawFd;
                // SAFETY: a namespace file descriptor; only this thread changes namespace.
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

    fn tc(&self, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0, "tc"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn the_tree_is_made_true_on_a_real_link_and_removed() {
    if !rustix_root() {
        eprintln!("skipping: needs root to create a network namespace");
        return;
    }
    let Some(ns) = Netns::new() else {
        eprintln!("skipping: `ip netns add` failed (no ip tool or no namespaces here)");
        return;
    };
    let pods = [
        meta("ls", "LS", "10.0.0.2", None, false),
        meta(
            "capped",
            "BE",
            "10.0.0.4",
            Some(r#"{"egressLimit": "8M"}"#),
            false,
        ),
    ];
    let mut s = TcNetQos::new("/proc".into());
    let want = tree(&config(), pods.iter(), &mut s.own);
    let capped = s.own.minor("capped");
    let first = ns.run(|| s.reconcile("d0", Some(want.clone()))).unwrap();
    assert!(
        first.qdisc && first.classes == 5 && first.filters == 2,
        "{first:?}"
    );

    let qdisc = ns.tc(&["qdisc", "show", "dev", "d0"]);
    assert!(
        qdisc.contains("qdisc htb 1: root") && qdisc.contains("default 0x2"),
        "{qdisc}"
    );
    let classes = ns.tc(&["class", "show", "dev", "d0"]);
    assert!(classes.contains("class htb 1:1 root"), "{classes}");
    assert!(
        classes.contains("class htb 1:3 parent 1:1 prio 2 rate 30Mbit ceil 80Mbit"),
        "{classes}"
    );
    assert!(
        classes.contains("class htb 1:4 parent 1:1 prio 3 rate 10Mbit ceil 20Mbit"),
        "{classes}"
    );
    assert!(
        classes.contains(&format!(
            "class htb 1:{capped:x} parent 1:1 prio 3 rate 8Mbit ceil 8Mbit"
        )),
        "{classes}"
    );
    let filters = ns.tc(&["filter", "show", "dev", "d0"]);
    assert!(
        filters.contains("flowid 1:3") && filters.contains("match 0a000002/ffffffff at 12"),
        "{filters}"
    );

    // The kernel's state is read back: the same tree changes nothing.
    s.since_check = VERIFY_EVERY;
    let same = ns.run(|| s.reconcile("d0", Some(want.clone()))).unwrap();
    assert!(!same.any(), "{same:?}");

    // The capped pod leaves: its filter and class go.
    let fewer = tree(&config(), pods[..1].iter(), &mut s.own);
    let after = ns.run(|| s.reconcile("d0", Some(fewer))).unwrap();
    assert_eq!((after.classes, after.filters), (1, 1), "{after:?}");
    let classes = ns.tc(&["class", "show", "dev", "d0"]);
    assert!(!classes.contains(&format!("1:{capped:x} ")), "{classes}");

    // terway-qos or no total bandwidth: the qdisc koord made is removed.
    let gone = ns.run(|| s.reconcile("d0", None)).unwrap();
    assert!(gone.qdisc);
    assert!(!ns.tc(&["qdisc", "show", "dev", "d0"]).contains("htb"));
}

fn rustix_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
