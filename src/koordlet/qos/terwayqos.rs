//! TerwayQoS (Koordinator's `runtimehooks/hooks/terwayqos`): with `netQOSPolicy:
//! terway-qos`, the node's bandwidths and each pod's priority and limits are written where
//! Terway's QoS agent reads them (`global_bps_config` and `pod.json` under
//! `/host-var-lib/terway/qos`, the chart's mount of the host's `/var/lib/terway/qos`);
//! with another policy both files are removed. Bandwidths are bytes per second.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::context::{QosCtx, count};
use super::netqos;
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::qos::{QoSClass, pod_qos_class};
use crate::api::slo::nodeslo::{NetworkQOSCfg, ResourceQOSStrategy, SystemStrategy};
use crate::koordlet::features;
use crate::koordlet::informer::{PodMeta, States};

/// Where Koordinator's koordlet writes (the chart mounts the host's directory there).
pub const ROOT_PATH: &str = "/host-var-lib/terway/qos";
const POD_CONFIG: &str = "pod.json";
const NODE_CONFIG: &str = "global_bps_config";

pub const ENTRY: Entry = Entry {
    gate: features::TERWAY_QO_S,
    build: |_| Box::new(TerwayQos::new(PathBuf::from(ROOT_PATH))),
};

/// Terway's `Node`: bytes per second, written one `name value` line each in this order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub hw_tx_bps_max: u64,
    pub hw_rx_bps_max: u64,
    pub l1_tx_bps_min: u64,
    pub l1_tx_bps_max: u64,
    pub l1_rx_bps_min: u64,
    pub l1_rx_bps_max: u64,
    pub l2_tx_bps_min: u64,
    pub l2_tx_bps_max: u64,
    pub l2_rx_bps_min: u64,
    pub l2_rx_bps_max: u64,
}

impl Node {
    /// `MarshalText`.
    pub fn text(&self) -> String {
        let fields = [
            ("hw_tx_bps_max", self.hw_tx_bps_max),
            ("hw_rx_bps_max", self.hw_rx_bps_max),
            ("offline_l1_tx_bps_min", self.l1_tx_bps_min),
            ("offline_l1_tx_bps_max", self.l1_tx_bps_max),
            ("offline_l1_rx_bps_min", self.l1_rx_bps_min),
            ("offline_l1_rx_bps_max", self.l1_rx_bps_max),
            ("offline_l2_tx_bps_min", self.l2_tx_bps_min),
            ("offline_l2_tx_bps_max", self.l2_tx_bps_max),
            ("offline_l2_rx_bps_min", self.l2_rx_bps_min),
            ("offline_l2_rx_bps_max", self.l2_rx_bps_max),
        ];
        fields.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
    }
}

/// (ingress request, ingress limit, egress request, egress limit), bytes per second.
type QoS = [u64; 4];

/// `parseNetQoS`: only the LS (L1) and BE (L2) classes count.
pub fn parse_net_qos(
    system: Option<&SystemStrategy>,
    rq: &ResourceQOSStrategy,
) -> Result<Node, String> {
    let mut node = Node::default();
    if system.is_none() {
        return Ok(node);
    }
    let total = netqos::total_bandwidth(system);
    node.hw_tx_bps_max = total / 8;
    node.hw_rx_bps_max = total / 8;
    let class = |c: Option<&crate::api::slo::nodeslo::ResourceQOS>| {
        netqos::enabled(c.and_then(|c| c.network_qos.as_ref()))
            .map(|q| parse_qos(q, total))
            .transpose()
    };
    if let Some([irq, ilim, erq, elim]) = class(rq.ls_class.as_ref())? {
        (node.l1_rx_bps_min, node.l1_rx_bps_max) = (irq, ilim);
        (node.l1_tx_bps_min, node.l1_tx_bps_max) = (erq, elim);
    }
    if let Some([irq, ilim, erq, elim]) = class(rq.be_class.as_ref())? {
        (node.l2_rx_bps_min, node.l2_rx_bps_max) = (irq, ilim);
        (node.l2_tx_bps_min, node.l2_tx_bps_max) = (erq, elim);
    }
    Ok(node)
}

/// `parseQoS`.
pub fn parse_qos(cfg: &NetworkQOSCfg, total: u64) -> Result<QoS, String> {
    let q = &cfg.network_qos;
    Ok([
        parse_quantity(q.ingress_request.as_ref(), total)?,
        parse_quantity(q.ingress_limit.as_ref(), total)?,
        parse_quantity(q.egress_request.as_ref(), total)?,
        parse_quantity(q.egress_limit.as_ref(), total)?,
    ])
}

/// `parseQuantity`: a string is a bandwidth in bits per second (as bytes, at most `total`),
/// an int a percentage of `total` — kept as Koordinator computes it, for Terway reads both.
pub fn parse_quantity(v: Option<&IntOrString>, total: u64) -> Result<u64, String> {
    match v {
        None => Ok(0),
        Some(IntOrString::String(s)) => {
            let bits = crate::api::quantity::value(s).map_err(|e| e.to_string())?;
            let bytes = bits.max(0) as u64 / 8;
            if bytes > total {
                return Err(format!("quantity {s} is larger than total {total}"));
            }
            Ok(bytes)
        }
        Some(IntOrString::Int(p)) => Ok((*p).max(0) as u64 * total / 100),
    }
}

/// `getPodPrio`: SYSTEM 0, LS classes 1, BE 2; else by the pod's Kubernetes QoS.
pub fn pod_prio(pod: &k8s_openapi::api::core::v1::Pod) -> i32 {
    match pod_qos_class(pod) {
        QoSClass::System => return 0,
        QoSClass::Lse | QoSClass::Lsr | QoSClass::Ls => return 1,
        QoSClass::Be => return 2,
        QoSClass::None => {}
    }
    match pod.status.as_ref().and_then(|s| s.qos_class.as_deref()) {
        Some("Guaranteed" | "Burstable") => 1,
        Some("BestEffort") => 2,
        _ => 0,
    }
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Pod {
    pod_name: String,
    pod_namespace: String,
    #[serde(rename = "podUID")]
    pod_uid: String,
    prio: i32,
    cgroup_dir: String,
    qos_config: QoSConfig,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct QoSConfig {
    ingress_bandwidth: u64,
    egress_bandwidth: u64,
}

/// `pod.json`: every pod by UID; one whose annotation does not parse is left out.
pub fn pods_json<'a>(pods: impl Iterator<Item = &'a PodMeta>) -> String {
    let mut out = BTreeMap::new();
    for meta in pods {
        let a = meta.pod.metadata.annotations.as_ref();
        let raw = a
            .and_then(|a| a.get(netqos::ANNOTATION_NETWORK_QOS))
            .map(String::as_str);
        let (ingress, egress) = match netqos::pod_limits(raw) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(pod = %meta.name, namespace = %meta.namespace, error = %e, "terway QoS: pod left out");
                continue;
            }
        };
        let pod = Pod {
            pod_name: meta.name.clone(),
            pod_namespace: meta.namespace.clone(),
            pod_uid: meta.uid.clone(),
            prio: pod_prio(&meta.pod),
            cgroup_dir: format!("/sys/fs/cgroup/net_cls/{}", meta.dir.as_str()),
            qos_config: QoSConfig {
                ingress_bandwidth: ingress,
                egress_bandwidth: egress,
            },
        };
        out.insert(meta.uid.clone(), pod);
    }
    serde_json::to_string(&out).unwrap_or_default()
}

pub struct TerwayQos {
    dir: PathBuf,
}

impl TerwayQos {
    pub fn new(dir: PathBuf) -> TerwayQos {
        TerwayQos { dir }
    }

    /// Writes or removes both files; how many changed.
    pub fn sync(&self, states: &States) -> Result<u64, String> {
        let slo = states.slo();
        let files = [self.dir.join(NODE_CONFIG), self.dir.join(POD_CONFIG)];
        if netqos::policy(&slo.resource_qos) != netqos::POLICY_TERWAY {
            return Ok(files
                .iter()
                .filter(|f| std::fs::remove_file(f).is_ok())
                .count() as u64);
        }
        let node = parse_net_qos(slo.system.as_ref(), &slo.resource_qos)?;
        let pods = pods_json(states.pods.iter());
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let mut n = 0;
        for (file, content) in files.iter().zip([node.text(), pods]) {
            n += u64::from(write_if_changed(file, &content)?);
        }
        Ok(n)
    }
}

fn write_if_changed(file: &Path, content: &str) -> Result<bool, String> {
    if std::fs::read_to_string(file).is_ok_and(|c| c == content) {
        return Ok(false);
    }
    crate::os::files::write_atomic(
        file,
        content.as_bytes(),
        0o644,
        crate::os::files::Sync::Cached,
    )
    .map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(true)
}

impl Strategy for TerwayQos {
    fn name(&self) -> &'static str {
        "terwayqos"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            match self.sync(states) {
                Ok(0) => {}
                Ok(n) => count(ctx, "terwayqos", "file".into(), n),
                Err(e) => tracing::warn!(error = %e, "terway QoS: files not written"),
            }
            Round::DONE
        }
        .boxed()
    }
}

#[cfg(test)]
#[path = "terwayqos_tests.rs"]
mod tests;
