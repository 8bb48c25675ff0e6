//! Traffic control over rtnetlink: the HTB tree network QoS keeps on a link (one qdisc,
//! its classes, u32 filters steering pod addresses into them, and a classifier reading the
//! sending cgroup's `net_cls.classid` for host-network pods), read back and changed only
//! where it differs from what is wanted.

pub mod bpf;
pub mod htb;
pub mod rtnl;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::Ipv4Addr;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::RouteNetlinkMessage as Msg;
use netlink_packet_route::tc::{
    TcAttribute, TcFilterBpfOption, TcFilterU32Option, TcHandle, TcMessage, TcOption, TcU32Key,
    TcU32Selector, TcU32SelectorFlags,
};

pub use htb::HtbClass;
pub use rtnl::Rtnl;

/// The HTB qdisc's major number (`1:`), as Koordinator's.
pub const MAJOR: u16 = 1;
/// `ETH_P_IP`, as the filter's protocol.
const ETH_P_IP: u16 = 0x0800;
/// Offset of the IPv4 source address in the header, for a u32 match.
const IPV4_SRC_OFFSET: i32 = 12;
/// `ETH_P_ALL`: the classid classifier sees IPv4 and IPv6 alike.
const ETH_P_ALL: u16 = 0x0003;
/// The classid classifier's priority: before the pod-address filters (a pod's traffic
/// has left its socket behind when it reaches the node's link, so it never matches here).
pub const CLASSID_FILTER_PRIO: u16 = 3;

/// What the link should carry: classes by minor (with their parent's minor, none for the
/// root class) and which class each pod address goes to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TcTree {
    pub default_class: u16,
    pub classes: BTreeMap<u16, (Option<u16>, HtbClass)>,
    pub filters: BTreeMap<Ipv4Addr, u16>,
    /// The u32 filters' priority.
    pub filter_prio: u16,
    /// Pods steered by their cgroup's `net_cls.classid` (host-network pods), by UID, to
    /// their class; when there are any, the classifier that reads it is on the link.
    pub by_cgroup: BTreeMap<String, u16>,
}

/// What one apply changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Changed {
    pub qdisc: bool,
    pub classes: usize,
    pub filters: usize,
}

impl Changed {
    pub fn any(&self) -> bool {
        self.qdisc || self.classes + self.filters > 0
    }
}

/// The index of a link in the calling thread's network namespace.
pub fn link_index(name: &str) -> io::Result<i32> {
    let c = std::ffi::CString::new(name).map_err(|e| io::Error::other(e.to_string()))?;
    // SAFETY: a NUL-terminated name; if_nametoindex only reads it.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(io::Error::other(format!("no network interface {name:?}"))),
        i => Ok(i as i32),
    }
}

fn handle(minor: u16) -> TcHandle {
    TcHandle {
        major: MAJOR,
        minor,
    }
}

fn message(index: i32, handle: TcHandle, parent: TcHandle, kind: &str) -> TcMessage {
    let mut m = TcMessage::default();
    m.header.index = index;
    m.header.handle = handle;
    m.header.parent = parent;
    m.attributes.push(TcAttribute::Kind(kind.to_string()));
    m
}

fn kind_of(m: &TcMessage) -> Option<&str> {
    m.attributes.iter().find_map(|a| match a {
        TcAttribute::Kind(k) => Some(k.as_str()),
        _ => None,
    })
}

/// Makes `tree` true on the link; each step reads the kernel's state first.
pub fn apply(rtnl: &mut Rtnl, index: i32, tree: &TcTree) -> io::Result<Changed> {
    let mut changed = Changed {
        qdisc: ensure_qdisc(rtnl, index, tree.default_class)?,
        ..Changed::default()
    };
    let present = classes(rtnl, index)?;
    for (minor, (parent, want)) in &tree.classes {
        if present.get(minor).map(|(_, c)| c) != Some(want) {
            put_class(rtnl, index, *minor, *parent, want)?;
            changed.classes += 1;
        }
    }
    changed.filters = sync_filters(rtnl, index, tree)?;
    changed.filters += sync_classid_filter(rtnl, index, !tree.by_cgroup.is_empty())?;
    // Leaves first: a class with children or filters bound to it is busy.
    for (minor, (parent, _)) in present.iter().rev() {
        if !tree.classes.contains_key(minor) && parent.is_some() {
            del_class(rtnl, index, *minor)?;
            changed.classes += 1;
        }
    }
    Ok(changed)
}

/// The link's root qdisc, if it has one of its own (not the kernel's default).
fn root_qdisc(rtnl: &mut Rtnl, index: i32) -> io::Result<Option<TcMessage>> {
    let mut probe = TcMessage::default();
    probe.header.index = index;
    Ok(rtnl
        .dump(Msg::GetQueueDiscipline(probe))?
        .into_iter()
        .find_map(|m| match m {
            Msg::NewQueueDiscipline(q)
                if q.header.index == index && q.header.parent == TcHandle::ROOT =>
            {
                Some(q)
            }
            _ => None,
        }))
}

fn is_ours(q: &TcMessage) -> bool {
    kind_of(q) == Some("htb") && q.header.handle == handle(0)
}

/// The root HTB qdisc `1:` with `defcls`; true when it had to be added.
fn ensure_qdisc(rtnl: &mut Rtnl, index: i32, defcls: u16) -> io::Result<bool> {
    if root_qdisc(rtnl, index)?.is_some_and(|q| is_ours(&q)) {
        return Ok(false);
    }
    let mut m = message(index, handle(0), TcHandle::ROOT, "htb");
    let opts = htb::qdisc_options(u32::from(defcls));
    m.attributes.push(TcAttribute::Options(
        opts.into_iter().map(TcOption::Other).collect(),
    ));
    rtnl.request(Msg::NewQueueDiscipline(m), NLM_F_CREATE | NLM_F_REPLACE)?;
    Ok(true)
}

/// Removes the root qdisc when it is ours (`htb` with handle `1:`); true when it was.
pub fn remove(rtnl: &mut Rtnl, index: i32) -> io::Result<bool> {
    let ours = root_qdisc(rtnl, index)?.is_some_and(|q| is_ours(&q));
    if ours {
        let m = message(index, handle(0), TcHandle::ROOT, "htb");
        rtnl.request(Msg::DelQueueDiscipline(m), 0)?;
    }
    Ok(ours)
}

/// The HTB classes of qdisc `1:` on the link, by minor: (parent minor, parameters).
pub fn classes(rtnl: &mut Rtnl, index: i32) -> io::Result<BTreeMap<u16, (Option<u16>, HtbClass)>> {
    let mut probe = TcMessage::default();
    probe.header.index = index;
    let mut out = BTreeMap::new();
    for m in rtnl.dump(Msg::GetTrafficClass(probe))? {
        let Msg::NewTrafficClass(c) = m else { continue };
        if c.header.handle.major != MAJOR || kind_of(&c) != Some("htb") {
            continue;
        }
        let parent = (c.header.parent != TcHandle::ROOT).then_some(c.header.parent.minor);
        if let Some(p) = class_params(&c) {
            out.insert(c.header.handle.minor, (parent, p));
        }
    }
    Ok(out)
}

fn class_params(c: &TcMessage) -> Option<HtbClass> {
    c.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(opts) => opts.iter().find_map(|o| match o {
            TcOption::Other(nla) => htb::parse_class(&htb::nla_value(nla)),
            _ => None,
        }),
        _ => None,
    })
}

fn put_class(
    rtnl: &mut Rtnl,
    index: i32,
    minor: u16,
    parent: Option<u16>,
    c: &HtbClass,
) -> io::Result<()> {
    let parent = parent.map_or(TcHandle::ROOT, handle);
    let mut m = message(index, handle(minor), parent, "htb");
    m.attributes.push(TcAttribute::Options(
        htb::class_options(c)
            .into_iter()
            .map(TcOption::Other)
            .collect(),
    ));
    rtnl.request(Msg::NewTrafficClass(m), NLM_F_CREATE | NLM_F_REPLACE)
}

fn del_class(rtnl: &mut Rtnl, index: i32, minor: u16) -> io::Result<()> {
    let m = message(index, handle(minor), TcHandle::UNSPEC, "htb");
    rtnl.request(Msg::DelTrafficClass(m), 0)
}

/// One u32 filter of ours: its handle, the source address it matches, its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodFilter {
    pub handle: TcHandle,
    pub ip: Ipv4Addr,
    pub class: u16,
}

fn filter_info(prio: u16) -> u32 {
    (u32::from(prio) << 16) | u32::from(ETH_P_IP.to_be())
}

/// The single-address u32 filters at `prio` on qdisc `1:`.
pub fn filters(rtnl: &mut Rtnl, index: i32, prio: u16) -> io::Result<Vec<PodFilter>> {
    let mut probe = TcMessage::default();
    probe.header.index = index;
    probe.header.parent = handle(0);
    let mut out = Vec::new();
    for m in rtnl.dump(Msg::GetTrafficFilter(probe))? {
        let Msg::NewTrafficFilter(f) = m else {
            continue;
        };
        if (f.header.info >> 16) as u16 != prio || kind_of(&f) != Some("u32") {
            continue;
        }
        if let Some((ip, class)) = u32_match(&f) {
            out.push(PodFilter {
                handle: f.header.handle,
                ip,
                class,
            });
        }
    }
    Ok(out)
}

/// (source address, class minor) of a u32 filter with one source-address key.
fn u32_match(f: &TcMessage) -> Option<(Ipv4Addr, u16)> {
    let opts = f.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(o) => Some(o),
        _ => None,
    })?;
    let (mut ip, mut class) = (None, None);
    for o in opts {
        match o {
            TcOption::U32(TcFilterU32Option::Selector(s)) => {
                ip = match s.keys.as_slice() {
                    [k] if k.off == IPV4_SRC_OFFSET && k.mask == u32::MAX => {
                        Some(Ipv4Addr::from(k.val))
                    }
                    _ => None,
                }
            }
            TcOption::U32(TcFilterU32Option::ClassId(h)) if h.major == MAJOR => {
                class = Some(h.minor)
            }
            _ => {}
        }
    }
    Some((ip?, class?))
}

/// Adds and removes filters until each pod address has one, to its class; the count changed.
fn sync_filters(rtnl: &mut Rtnl, index: i32, tree: &TcTree) -> io::Result<usize> {
    let present = filters(rtnl, index, tree.filter_prio)?;
    let mut kept = BTreeSet::new();
    let mut n = 0;
    for f in &present {
        if tree.filters.get(&f.ip) == Some(&f.class) && kept.insert(f.ip) {
            continue;
        }
        let mut m = message(index, f.handle, handle(0), "u32");
        m.header.info = filter_info(tree.filter_prio);
        rtnl.request(Msg::DelTrafficFilter(m), 0)?;
        n += 1;
    }
    for (ip, class) in &tree.filters {
        if !kept.contains(ip) {
            add_filter(rtnl, index, tree.filter_prio, *ip, *class)?;
            n += 1;
        }
    }
    Ok(n)
}

fn add_filter(rtnl: &mut Rtnl, index: i32, prio: u16, ip: Ipv4Addr, class: u16) -> io::Result<()> {
    let mut m = message(index, TcHandle::UNSPEC, handle(0), "u32");
    m.header.info = filter_info(prio);
    let mut key = TcU32Key::default();
    key.mask = u32::MAX;
    key.val = u32::from(ip);
    key.off = IPV4_SRC_OFFSET;
    let mut selector = TcU32Selector::default();
    selector.flags = TcU32SelectorFlags::Terminal;
    selector.nkeys = 1;
    selector.keys = vec![key];
    m.attributes.push(TcAttribute::Options(vec![
        TcOption::U32(TcFilterU32Option::Selector(selector)),
        TcOption::U32(TcFilterU32Option::ClassId(handle(class))),
    ]));
    rtnl.request(Msg::NewTrafficFilter(m), NLM_F_CREATE | NLM_F_EXCL)
}

/// The classid classifier of ours on the link, if there is one.
pub fn classid_filter(rtnl: &mut Rtnl, index: i32) -> io::Result<Option<TcHandle>> {
    let mut probe = TcMessage::default();
    probe.header.index = index;
    probe.header.parent = handle(0);
    for m in rtnl.dump(Msg::GetTrafficFilter(probe))? {
        let Msg::NewTrafficFilter(f) = m else {
            continue;
        };
        if (f.header.info >> 16) as u16 != CLASSID_FILTER_PRIO || kind_of(&f) != Some("bpf") {
            continue;
        }
        let ours = f.attributes.iter().any(|a| match a {
            TcAttribute::Options(o) => o.iter().any(|o| {
                matches!(o, TcOption::Bpf(TcFilterBpfOption::ProgName(n)) if n.starts_with(bpf::NAME))
            }),
            _ => false,
        });
        if ours && f.header.handle != TcHandle::UNSPEC {
            return Ok(Some(f.header.handle));
        }
    }
    Ok(None)
}

/// Puts the classid classifier on the link or takes it off; 1 when it changed.
fn sync_classid_filter(rtnl: &mut Rtnl, index: i32, want: bool) -> io::Result<usize> {
    let info = (u32::from(CLASSID_FILTER_PRIO) << 16) | u32::from(ETH_P_ALL.to_be());
    match (classid_filter(rtnl, index)?, want) {
        (Some(_), true) | (None, false) => Ok(0),
        (Some(h), false) => {
            let mut m = message(index, h, handle(0), "bpf");
            m.header.info = info;
            rtnl.request(Msg::DelTrafficFilter(m), 0)?;
            Ok(1)
        }
        (None, true) => {
            let prog = bpf::classid_program()?;
            let mut m = message(index, TcHandle { major: 0, minor: 1 }, handle(0), "bpf");
            m.header.info = info;
            use std::os::fd::AsRawFd;
            m.attributes.push(TcAttribute::Options(vec![
                TcOption::Bpf(TcFilterBpfOption::ProgFd(prog.as_raw_fd() as u32)),
                TcOption::Bpf(TcFilterBpfOption::ProgName(bpf::NAME.to_string())),
            ]));
            rtnl.request(Msg::NewTrafficFilter(m), NLM_F_CREATE | NLM_F_EXCL)?;
            Ok(1)
        }
    }
}

/// The interface of the default route (`/proc/net/route`), where egress QoS applies.
pub fn default_route_interface(proc_root: &std::path::Path) -> Option<String> {
    let table = std::fs::read_to_string(proc_root.join("net/route")).ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000").then(|| f[0].to_string())
    })
}
