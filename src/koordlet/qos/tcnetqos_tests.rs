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
        "no class label, host network, IPv6: not steered by address"
    );
    let by_cgroup: BTreeMap<String, u16> = [("host".to_string(), LS)].into();
    assert_eq!(
        t.by_cgroup, by_cgroup,
        "host network: by its cgroup's classid"
    );
    assert_eq!(classid(LS), 0x1_0003, "net_cls.classid of class 1:3");
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

/// Two network namespaces joined by a veth pair: `d0` in the first, `d1` in its peer;
/// both deleted on drop.
struct Netns(String, String);

fn ok(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

impl Netns {
    fn new(tag: &str) -> Option<Netns> {
        let name = format!("koord-tc-{}-{tag}", std::process::id());
        let peer = format!("{name}-peer");
        if !ok(&["netns", "add", &name]) {
            return None;
        }
        // Made before the peer, so a failure below still deletes the first.
        let mut ns = Netns(name, String::new());
        if !ok(&["netns", "add", &peer]) {
            return None;
        }
        ns.1 = peer;
        let link = ok(&[
            "-n", &ns.0, "link", "add", "d0", "type", "veth", "peer", "name", "d1", "netns", &ns.1,
        ]) && ok(&["-n", &ns.0, "link", "set", "d0", "up"])
            && ok(&["-n", &ns.1, "link", "set", "d1", "up"]);
        link.then_some(ns)
    }

    fn ip(&self, args: &[&str]) -> bool {
        ok(&[&["-n", self.0.as_str()], args].concat())
    }

    fn peer_ip(&self, args: &[&str]) -> bool {
        ok(&[&["-n", self.1.as_str()], args].concat())
    }

    /// Runs `f` on a thread that has entered the first namespace.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.0, f)
    }

    fn run_in_peer<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.1, f)
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
        for n in [&self.0, &self.1].into_iter().filter(|n| !n.is_empty()) {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Runs `f` on a thread that has entered the named namespace.
fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/var/run/netns/{name}");
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

#[test]
fn the_tree_is_made_true_on_a_real_link_and_removed() {
    let Some(ns) = netns_or_skip("tree") else {
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

/// The namespaces for a test tagged `tag`, or why the test is skipped (it needs root and
/// the `ip` tool).
fn netns_or_skip(tag: &str) -> Option<Netns> {
    if crate::os::files::euid() != 0 {
        eprintln!("skipping: needs root to create network namespaces");
        return None;
    }
    let ns = Netns::new(tag);
    if ns.is_none() {
        eprintln!("skipping: `ip netns add` failed (no ip tool or no namespaces here)");
    }
    ns
}

/// Sends 1400-byte UDP datagrams from `src` to `dst` for `dur`, as fast as the socket takes
/// them (run inside the sending namespace).
fn blast(src: &str, dst: &str, dur: std::time::Duration) {
    blast_from((src, 0), dst, dur)
}

fn blast_from(src: (&str, u16), dst: &str, dur: std::time::Duration) {
    let s = std::net::UdpSocket::bind(src).unwrap();
    let buf = [7u8; 1400];
    let end = std::time::Instant::now() + dur;
    while std::time::Instant::now() < end {
        let _ = s.send_to(&buf, (dst, 5000));
    }
}

/// The outcome network QoS is for: with the BE class capped at 20 Mbit/s and LS allowed
/// 80, a BE pod and an LS pod sending as fast as they can at once through the shaped link
/// — the BE pod's bytes stay under its cap while the LS pod's get through.
#[test]
fn a_be_pod_is_held_to_its_class_while_an_ls_pod_sends() {
    let Some(ns) = netns_or_skip("traffic") else {
        return;
    };
    let ok = ns.ip(&["addr", "add", "10.0.0.3/24", "dev", "d0"])
        && ns.ip(&["addr", "add", "10.0.0.4/24", "dev", "d0"])
        && ns.peer_ip(&["addr", "add", "10.0.0.9/24", "dev", "d1"]);
    assert!(ok, "addresses on the veth pair");
    let pods = [
        meta("ls", "LS", "10.0.0.3", None, false),
        meta("be", "BE", "10.0.0.4", None, false),
    ];
    let mut s = TcNetQos::new("/proc".into());
    let want = tree(&config(), pods.iter(), &mut s.own);
    ns.run(|| s.reconcile("d0", Some(want))).unwrap();

    let dur = std::time::Duration::from_secs(1);
    let r = receive_while(
        &ns,
        |from| from.ip().to_string(),
        ["10.0.0.3", "10.0.0.4"]
            .into_iter()
            .map(|src| {
                let ns = &ns;
                Box::new(move || ns.run(|| blast(src, "10.0.0.9", dur))) as Box<dyn FnOnce() + Send>
            })
            .collect(),
    );
    let (ls, be) = (
        r.get("10.0.0.3").copied().unwrap_or(0),
        r.get("10.0.0.4").copied().unwrap_or(0),
    );
    eprintln!("through the shaped link in 1 s: LS {ls} bytes, BE {be} bytes (BE class: 20 Mbit/s)");
    // 20 Mbit/s for the second, plus HTB's burst and what the receiver drains after.
    let be_cap = 2_500_000 * 13 / 10 + 64 * 1024;
    assert!(
        be > 0 && be <= be_cap,
        "BE got {be} bytes, its class allows about 2.5 MB/s"
    );
    assert!(ls > be, "LS got {ls} bytes beside BE's {be}");
}

/// Bytes received on 10.0.0.9:5000 in the peer namespace, by `key` of the sender, while
/// `send` runs its senders.
fn receive_while<'a>(
    ns: &Netns,
    key: impl Fn(std::net::SocketAddr) -> String + Sync,
    senders: Vec<Box<dyn FnOnce() + Send + 'a>>,
) -> std::collections::HashMap<String, u64> {
    let received = std::sync::Mutex::new(std::collections::HashMap::<String, u64>::new());
    let listening = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            ns.run_in_peer(|| {
                let sock = std::net::UdpSocket::bind("10.0.0.9:5000").unwrap();
                sock.set_read_timeout(Some(std::time::Duration::from_millis(300)))
                    .unwrap();
                listening.wait();
                let mut buf = [0u8; 2048];
                while let Ok((n, from)) = sock.recv_from(&mut buf) {
                    let mut r = received.lock().unwrap();
                    *r.entry(key(from)).or_default() += n as u64;
                }
            })
        });
        listening.wait();
        for f in senders {
            scope.spawn(f);
        }
    });
    received.into_inner().unwrap()
}

/// A net_cls hierarchy mounted for the test under a temporary root, with one cgroup per
/// class; the cgroups are removed and the mount undone on drop.
struct NetCls {
    root: tempfile::TempDir,
    groups: Vec<String>,
}

impl NetCls {
    fn mount(groups: &[&str]) -> Option<NetCls> {
        let root = tempfile::tempdir().ok()?;
        let at = root.path().join("net_cls");
        std::fs::create_dir(&at).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "cgroup", "-o", "net_cls", "koord-test"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            return None;
        }
        for g in groups {
            std::fs::create_dir(at.join(g)).ok()?;
        }
        let groups = groups.iter().map(|g| g.to_string()).collect();
        Some(NetCls { root, groups })
    }

    /// Moves the calling thread into `group` (sockets it opens after carry its classid).
    fn join(&self, group: &str) {
        let tasks = self.root.path().join("net_cls").join(group).join("tasks");
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::gettid() };
        std::fs::write(tasks, tid.to_string()).unwrap();
    }
}

impl Drop for NetCls {
    fn drop(&mut self) {
        let at = self.root.path().join("net_cls");
        for g in &self.groups {
            let _ = std::fs::remove_dir(at.join(g));
        }
        let _ = Command::new("umount").arg(&at).status();
    }
}

/// Host-network pods share the node's address, so they are told apart by their cgroup:
/// koord writes each one's `net_cls.classid` (through the executor) and puts the classid
/// classifier on the link. An LS and a BE host-network pod sending flat out from the same
/// address: the BE pod is held to its 20 Mbit/s class.
#[test]
fn host_network_pods_are_held_to_their_class_by_cgroup() {
    let Some(ns) = netns_or_skip("hostnet") else {
        return;
    };
    let Some(net_cls) = NetCls::mount(&["ls-host", "be-host"]) else {
        eprintln!("skipping: cannot mount a net_cls hierarchy here");
        return;
    };
    let ok = ns.ip(&["addr", "add", "10.0.0.3/24", "dev", "d0"])
        && ns.peer_ip(&["addr", "add", "10.0.0.9/24", "dev", "d1"]);
    assert!(ok, "addresses on the veth pair");
    let pods = [
        meta("ls-host", "LS", "10.0.0.3", None, true),
        meta("be-host", "BE", "10.0.0.3", None, true),
    ];
    let mut s = TcNetQos::new("/proc".into());
    let want = tree(&config(), pods.iter(), &mut s.own);
    assert!(
        want.filters.is_empty(),
        "one address: nothing to steer by it"
    );
    let first = ns.run(|| s.reconcile("d0", Some(want.clone()))).unwrap();
    assert_eq!(first.filters, 1, "the classid classifier: {first:?}");
    assert!(
        ns.tc(&["filter", "show", "dev", "d0"])
            .contains("koord_netcls")
    );

    let cgroups = Cgroups::new(net_cls.root.path(), Version::V1, Driver::Cgroupfs, "");
    let ex = Executor::new(cgroups, Duration::from_secs(60));
    for (uid, minor) in &want.by_cgroup {
        let u = Update::new(
            Resource::NetClsClassId,
            CgroupDir::new(uid),
            classid(*minor).to_string(),
        );
        ex.update(&u).unwrap();
    }

    let dur = Duration::from_secs(1);
    let r = receive_while(
        &ns,
        |from| from.port().to_string(),
        [("ls-host", 6003), ("be-host", 6004)]
            .into_iter()
            .map(|(group, port)| {
                let (ns, net_cls) = (&ns, &net_cls);
                Box::new(move || {
                    ns.run(|| {
                        net_cls.join(group);
                        blast_from(("10.0.0.3", port), "10.0.0.9", dur)
                    })
                }) as Box<dyn FnOnce() + Send>
            })
            .collect(),
    );
    let (ls, be) = (
        r.get("6003").copied().unwrap_or(0),
        r.get("6004").copied().unwrap_or(0),
    );
    eprintln!("host network, one address, 1 s: LS {ls} bytes, BE {be} bytes (BE class: 20 Mbit/s)");
    let be_cap = 2_500_000 * 13 / 10 + 64 * 1024;
    assert!(
        be > 0 && be <= be_cap,
        "BE got {be} bytes, its class allows about 2.5 MB/s"
    );
    assert!(ls > be, "LS got {ls} bytes beside BE's {be}");

    // No host-network pod left: the classifier goes.
    let none = tree(&config(), std::iter::empty(), &mut s.own);
    let after = ns.run(|| s.reconcile("d0", Some(none))).unwrap();
    assert_eq!(after.filters, 1, "{after:?}");
    assert!(
        !ns.tc(&["filter", "show", "dev", "d0"])
            .contains("koord_netcls")
    );
}
