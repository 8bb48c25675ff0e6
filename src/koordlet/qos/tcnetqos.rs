//! TCNetworkQoS (Koordinator's `runtimehooks/hooks/tc`): egress bandwidth by QoS class on
//! the node's default-route interface, an HTB tree of the NodeSLO's bandwidths:
//! - qdisc `1:` (unclassified traffic to the system class), root class `1:1` at
//!   `totalNetworkBandwidth`;
//! - `1:2` system (what LS and BE do not request, up to the total), `1:3` LS
//!   (`lsClass.networkQOS` egress request/limit), `1:4` BE (`beClass.networkQOS`), with HTB
//!   priorities 1, 2, 3 so a class with the lower number borrows spare bandwidth first;
//! - a pod with an egress limit in its `koordinator.sh/networkQOS` annotation gets a class
//!   of its own under `1:1` at that rate.
//!
//! Pods are steered by u32 filters on their address (Koordinator steers its class-level
//! pods with ipsets and iptables `CLASSIFY`, and pod-level ones with the same u32 filters):
//! traffic a node SNATs to its own address before it leaves stays in the system class.
//! Host-network pods share the node's address, so (cgroup v1) each one's
//! `net_cls.classid` is set to its class and one BPF classifier on the link sends a
//! socket's packets to its cgroup's class, as Koordinator's `cgroup` filter does. A class without a limit may borrow the whole link (Koordinator's
//! cannot be created with a zero rate). Only egress is shaped, as in Koordinator; the
//! ingress settings are read and left to Terway. With `netQOSPolicy: terway-qos`, or no
//! `totalNetworkBandwidth`, the qdisc is removed if koord made it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::context::{QosCtx, count, record};
use super::executor::{Executor, Update};
use super::netqos::{self, NetClass, NetQosGlobalConfig};
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::qos::pod_qos_class;
use crate::koordlet::features;
use crate::koordlet::informer::{PodMeta, States};
use crate::os::tc::{self, HtbClass, Rtnl, TcTree};
use crate::os::{CgroupDir, Resource};

pub const ENTRY: Entry = Entry {
    gate: features::TC_NETWORK_QO_S,
    build: |d| Box::new(TcNetQos::new(d.host.proc_root.clone()).with_net_cls(d.executor.clone())),
};

const ROOT: u16 = 1;
const SYSTEM: u16 = 2;
const LS: u16 = 3;
const BE: u16 = 4;
/// Pod filters' priority (`POD_FILTER_PRIO`).
const POD_FILTER_PRIO: u16 = 4;
/// Re-read the kernel's tree this often even when nothing changed, to repair drift.
const VERIFY_EVERY: u32 = 60;

fn class_minor(c: NetClass) -> u16 {
    match c {
        NetClass::System => SYSTEM,
        NetClass::Ls => LS,
        NetClass::Be => BE,
    }
}

/// HTB priority of a class (`GetPrio`).
fn class_prio(c: NetClass) -> u32 {
    match c {
        NetClass::System => 1,
        NetClass::Ls => 2,
        NetClass::Be => 3,
    }
}

/// The minors of pods' own classes, stable while the pod lives: a hash of its UID, the
/// next free one on a collision.
#[derive(Debug, Default)]
pub struct PodClasses(BTreeMap<String, u16>);

impl PodClasses {
    fn minor(&mut self, uid: &str) -> u16 {
        if let Some(m) = self.0.get(uid) {
            return *m;
        }
        let used: std::collections::BTreeSet<u16> = self.0.values().copied().collect();
        let span = u32::from(u16::MAX) - u32::from(BE);
        let mut at = fnv1a(uid) % span;
        while used.contains(&(minor_at(at))) {
            at = (at + 1) % span;
        }
        self.0.insert(uid.to_string(), minor_at(at));
        minor_at(at)
    }

    fn retain(&mut self, live: &std::collections::BTreeSet<&str>) {
        self.0.retain(|uid, _| live.contains(uid.as_str()));
    }
}

fn minor_at(at: u32) -> u16 {
    (at + u32::from(BE) + 1) as u16
}

fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The class tree of the NodeSLO's bandwidths (bits per second in, bytes per second out).
pub fn classes(cfg: &NetQosGlobalConfig) -> BTreeMap<u16, (Option<u16>, HtbClass)> {
    let hw = cfg.hw_tx_bps_max / 8;
    let class = |rate: u64, ceil: u64, prio| HtbClass {
        rate: rate / 8,
        ceil: if ceil == 0 { hw } else { ceil / 8 },
        prio,
    };
    let system = cfg
        .hw_tx_bps_max
        .saturating_sub(cfg.l1_tx_bps_min)
        .saturating_sub(cfg.l2_tx_bps_min);
    BTreeMap::from([
        (ROOT, (None, class(cfg.hw_tx_bps_max, 0, 0))),
        (SYSTEM, (Some(ROOT), class(system, 0, 1))),
        (
            LS,
            (Some(ROOT), class(cfg.l1_tx_bps_min, cfg.l1_tx_bps_max, 2)),
        ),
        (
            BE,
            (Some(ROOT), class(cfg.l2_tx_bps_min, cfg.l2_tx_bps_max, 3)),
        ),
    ])
}

/// The whole tree: the classes, each pod's own class, where each pod address goes, and
/// which host-network pods go where by their cgroup's classid.
pub fn tree<'a>(
    cfg: &NetQosGlobalConfig,
    pods: impl Iterator<Item = &'a PodMeta>,
    own: &mut PodClasses,
) -> TcTree {
    let mut t = TcTree {
        default_class: SYSTEM,
        classes: classes(cfg),
        filters: BTreeMap::new(),
        filter_prio: POD_FILTER_PRIO,
        by_cgroup: BTreeMap::new(),
    };
    let mut live = std::collections::BTreeSet::new();
    for meta in pods {
        let Some(class) = netqos::net_class(pod_qos_class(&meta.pod)) else {
            continue;
        };
        // Steered by address, or (host network: the node's address) by cgroup.
        let host_network = meta.pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
        let ip = if host_network { None } else { pod_ipv4(meta) };
        if !host_network && ip.is_none() {
            continue;
        }
        let egress = pod_egress(meta);
        let minor = if egress > 0 {
            live.insert(meta.uid.as_str());
            let m = own.minor(&meta.uid);
            let c = HtbClass {
                rate: egress,
                ceil: egress,
                prio: class_prio(class),
            };
            t.classes.insert(m, (Some(ROOT), c));
            m
        } else {
            class_minor(class)
        };
        match ip {
            Some(ip) => t.filters.insert(ip, minor),
            None => t.by_cgroup.insert(meta.uid.clone(), minor),
        };
    }
    own.retain(&live);
    t
}

/// The egress limit in the pod's `koordinator.sh/networkQOS` annotation (0: none).
fn pod_egress(meta: &PodMeta) -> u64 {
    let limits = meta
        .pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(netqos::ANNOTATION_NETWORK_QOS).map(String::as_str));
    match netqos::pod_limits(limits) {
        Ok((_, e)) => e,
        Err(e) => {
            tracing::warn!(pod = %meta.name, namespace = %meta.namespace, error = %e, "network QoS annotation ignored");
            0
        }
    }
}

/// The `net_cls.classid` that puts a cgroup's sockets in class `1:<minor>`.
pub fn classid(minor: u16) -> u32 {
    (u32::from(tc::MAJOR) << 16) | u32::from(minor)
}

/// The pod's IPv4 address.
fn pod_ipv4(meta: &PodMeta) -> Option<Ipv4Addr> {
    meta.pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()
}

pub struct TcNetQos {
    proc_root: PathBuf,
    /// Writes host-network pods' `net_cls.classid`; none: they stay in the system class.
    net_cls: Option<std::sync::Arc<Executor>>,
    /// Whether this host has the net_cls hierarchy (cgroup v1), once looked at.
    net_cls_here: Option<bool>,
    own: PodClasses,
    rtnl: Option<Rtnl>,
    /// The interface and tree last made true, and the rounds since it was checked.
    applied: Option<(String, TcTree)>,
    since_check: u32,
    last_error: Option<String>,
}

impl TcNetQos {
    pub fn new(proc_root: PathBuf) -> TcNetQos {
        TcNetQos {
            proc_root,
            net_cls: None,
            net_cls_here: None,
            own: PodClasses::default(),
            rtnl: None,
            applied: None,
            since_check: 0,
            last_error: None,
        }
    }

    pub fn with_net_cls(mut self, ex: std::sync::Arc<Executor>) -> TcNetQos {
        self.net_cls = Some(ex);
        self
    }

    /// Host-network pods can be steered only where net_cls exists (cgroup v1): elsewhere
    /// they are left out of the tree, said once.
    fn steerable(&mut self, want: &mut TcTree) {
        let Some(ex) = &self.net_cls else {
            want.by_cgroup.clear();
            return;
        };
        let here = *self.net_cls_here.get_or_insert_with(|| {
            let probe = ex.cgroups().file(Resource::NetClsClassId, &CgroupDir::new(""));
            let here = probe.exists();
            if !here {
                tracing::info!(file = %probe.display(), "network QoS: no net_cls here (cgroup v2?); host-network pods stay in the system class");
            }
            here
        });
        if !here {
            want.by_cgroup.clear();
        }
    }

    /// Each host-network pod's `net_cls.classid` set to its class.
    fn write_classids(&self, ctx: &QosCtx, states: &States, tree: &TcTree) {
        let Some(ex) = &self.net_cls else { return };
        for pod in states.pods.iter() {
            let Some(minor) = tree.by_cgroup.get(&pod.uid) else {
                continue;
            };
            let u = Update::new(
                Resource::NetClsClassId,
                pod.dir.clone(),
                classid(*minor).to_string(),
            );
            record(ctx, "tcnetworkqos", &pod.name, vec![ex.update(&u)]);
        }
    }

    /// One round: the tree wanted now, or none (removed), made true on the interface.
    pub fn reconcile(&mut self, iface: &str, want: Option<TcTree>) -> std::io::Result<tc::Changed> {
        let unchanged = self.applied.as_ref().map(|(i, t)| (i.as_str(), Some(t)))
            == Some((iface, want.as_ref()));
        self.since_check += 1;
        if unchanged && self.since_check < VERIFY_EVERY {
            return Ok(tc::Changed::default());
        }
        self.since_check = 0;
        if self.rtnl.is_none() {
            self.rtnl = Some(Rtnl::open()?);
        }
        let rtnl = self.rtnl.as_mut().expect("opened above");
        let index = tc::link_index(iface)?;
        let changed = match &want {
            Some(t) => tc::apply(rtnl, index, t)?,
            None => tc::Changed {
                qdisc: tc::remove(rtnl, index)?,
                ..tc::Changed::default()
            },
        };
        self.applied = want.map(|t| (iface.to_string(), t));
        Ok(changed)
    }

    fn wanted(&mut self, states: &States) -> Option<TcTree> {
        let slo = states.slo();
        if netqos::policy(&slo.resource_qos) != netqos::POLICY_TC {
            return None;
        }
        let cfg = netqos::load_config(slo.system.as_ref(), &slo.resource_qos);
        (cfg.hw_tx_bps_max > 0).then(|| tree(&cfg, states.pods.iter(), &mut self.own))
    }

    fn report(&mut self, result: std::io::Result<tc::Changed>, iface: &str) -> Option<tc::Changed> {
        match result {
            Ok(c) => {
                self.last_error = None;
                Some(c)
            }
            Err(e) => {
                let msg = e.to_string();
                if self.last_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(interface = iface, error = %msg, "network QoS: tc rules not applied");
                }
                self.last_error = Some(msg);
                self.rtnl = None;
                None
            }
        }
    }
}

impl Strategy for TcNetQos {
    fn name(&self) -> &'static str {
        "tcnetworkqos"
    }

    fn interval(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let mut want = self.wanted(states);
            if let Some(t) = want.as_mut() {
                self.steerable(t);
            }
            // Nothing wanted and nothing of ours on a link: no route read, no netlink.
            if want.is_none() && self.applied.is_none() {
                return Round::DONE;
            }
            let Some(iface) = tc::default_route_interface(&self.proc_root) else {
                return Round::DONE;
            };
            let result = self.reconcile(&iface, want);
            // What was just made true on the link is the tree now applied.
            if let (Ok(_), Some((_, t))) = (&result, &self.applied) {
                self.write_classids(ctx, states, t);
            }
            if let Some(c) = self.report(result, &iface) {
                let n = usize::from(c.qdisc) + c.classes + c.filters;
                if n > 0 {
                    count(ctx, "tcnetworkqos", "tc".into(), n as u64);
                }
            }
            Round::DONE
        }
        .boxed()
    }
}

#[cfg(test)]
#[path = "tcnetqos_tests.rs"]
mod tests;
