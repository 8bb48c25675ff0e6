//! Network QoS settings both enforcers read (Koordinator's `runtimehooks/hooks/tc` helpers
//! and `terwayqos`): the node's bandwidths from the NodeSLO (`systemStrategy.
//! totalNetworkBandwidth`, each class's `networkQOS`), a pod's class, and a pod's own
//! limits from its `koordinator.sh/networkQOS` annotation.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

use crate::api::extension::qos::QoSClass;
use crate::api::slo::nodeslo::{NetworkQOSCfg, ResourceQOSStrategy, SystemStrategy};

/// The pod annotation with a pod's own limits (`extension.AnnotationNetworkQOS`).
pub const ANNOTATION_NETWORK_QOS: &str = "koordinator.sh/networkQOS";

/// `netQOSPolicy` values.
pub const POLICY_TC: &str = "tc";
pub const POLICY_TERWAY: &str = "terway-qos";

/// Koordinator's `NetQosGlobalConfig`: bits per second (L1 is the LS class, L2 the BE one).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NetQosGlobalConfig {
    pub hw_tx_bps_max: u64,
    pub hw_rx_bps_max: u64,
    pub l1_tx_bps_min: u64,
    pub l1_tx_bps_max: u64,
    pub l2_tx_bps_min: u64,
    pub l2_tx_bps_max: u64,
    pub l1_rx_bps_min: u64,
    pub l1_rx_bps_max: u64,
    pub l2_rx_bps_min: u64,
    pub l2_rx_bps_max: u64,
}

/// The policy the NodeSLO picks; `tc` when none is given.
pub fn policy(rq: &ResourceQOSStrategy) -> &str {
    rq.policies
        .as_ref()
        .and_then(|p| p.net_qos_policy.as_deref())
        .unwrap_or(POLICY_TC)
}

/// `totalNetworkBandwidth` in bits per second; 0 when unset or invalid.
pub fn total_bandwidth(system: Option<&SystemStrategy>) -> u64 {
    system
        .and_then(|s| s.total_network_bandwidth.as_ref())
        .and_then(|q| crate::api::quantity::value(&q.0).ok())
        .map_or(0, |v| v.max(0) as u64)
}

/// `loadConfigFromNodeSlo`.
pub fn load_config(
    system: Option<&SystemStrategy>,
    rq: &ResourceQOSStrategy,
) -> NetQosGlobalConfig {
    let total = total_bandwidth(system);
    let mut c = NetQosGlobalConfig {
        hw_tx_bps_max: total,
        hw_rx_bps_max: total,
        ..NetQosGlobalConfig::default()
    };
    if let Some(n) = enabled(rq.ls_class.as_ref().and_then(|c| c.network_qos.as_ref())) {
        let q = &n.network_qos;
        c.l1_rx_bps_min = bandwidth_val(total, q.ingress_request.as_ref());
        c.l1_rx_bps_max = bandwidth_val(total, q.ingress_limit.as_ref());
        c.l1_tx_bps_min = bandwidth_val(total, q.egress_request.as_ref());
        c.l1_tx_bps_max = bandwidth_val(total, q.egress_limit.as_ref());
    }
    if let Some(n) = enabled(rq.be_class.as_ref().and_then(|c| c.network_qos.as_ref())) {
        let q = &n.network_qos;
        c.l2_rx_bps_min = bandwidth_val(total, q.ingress_request.as_ref());
        c.l2_rx_bps_max = bandwidth_val(total, q.ingress_limit.as_ref());
        c.l2_tx_bps_min = bandwidth_val(total, q.egress_request.as_ref());
        c.l2_tx_bps_max = bandwidth_val(total, q.egress_limit.as_ref());
    }
    c
}

pub fn enabled(cfg: Option<&NetworkQOSCfg>) -> Option<&NetworkQOSCfg> {
    cfg.filter(|c| c.enable == Some(true))
}

/// `getBandwidthVal`: an int is a percentage of `total` (0 outside 0–100), a string a
/// quantity (0 when it does not parse).
pub fn bandwidth_val(total: u64, v: Option<&IntOrString>) -> u64 {
    match v {
        None => 0,
        Some(IntOrString::Int(p)) if (0..=100).contains(p) => total * (*p as u64) / 100,
        Some(IntOrString::Int(_)) => 0,
        Some(IntOrString::String(s)) => {
            crate::api::quantity::value(s).map_or(0, |v| v.max(0) as u64)
        }
    }
}

/// Koordinator's network QoS classes (`NetQoSClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NetClass {
    System,
    Ls,
    Be,
}

/// `GetPodNetQoSClassByName`: from the `koordinator.sh/qosClass` label only.
pub fn net_class(qos: QoSClass) -> Option<NetClass> {
    match qos {
        QoSClass::System => Some(NetClass::System),
        QoSClass::Lse | QoSClass::Lsr | QoSClass::Ls => Some(NetClass::Ls),
        QoSClass::Be => Some(NetClass::Be),
        QoSClass::None => None,
    }
}

#[derive(Deserialize)]
struct PodNetworkQoS {
    // Go's JSON decoding ignores case; Koordinator's own tests write "IngressLimit".
    #[serde(rename = "ingressLimit", alias = "IngressLimit")]
    ingress_limit: Option<String>,
    #[serde(rename = "egressLimit", alias = "EgressLimit")]
    egress_limit: Option<String>,
}

/// A pod's (ingress, egress) limits in bytes per second from its annotation (the
/// annotation is in bits per second); absent limits are 0 (none), as in `getIngressAndEgress`.
pub fn pod_limits(annotation: Option<&str>) -> Result<(u64, u64), String> {
    let Some(raw) = annotation.filter(|a| !a.is_empty()) else {
        return Ok((0, 0));
    };
    let q: PodNetworkQoS = serde_json::from_str(raw)
        .map_err(|e| format!("annotation {ANNOTATION_NETWORK_QOS}: {e}"))?;
    let bytes = |v: Option<String>| -> Result<u64, String> {
        let v = v.unwrap_or_else(|| "0".into());
        crate::api::quantity::value(&v)
            .map(|b| b.max(0) as u64 / 8)
            .map_err(|e| format!("annotation {ANNOTATION_NETWORK_QOS}: {e}"))
    };
    Ok((bytes(q.ingress_limit)?, bytes(q.egress_limit)?))
}

#[cfg(test)]
#[path = "netqos_tests.rs"]
mod tests;
