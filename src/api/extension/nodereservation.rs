//! `node.koordinator.sh/reservation`: resources held back from pods, on a Node (the
//! koordlet and manager read it) or on a Reservation (what it holds back from its owners).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use crate::api::pod::{Amounts, amounts};

/// The annotation's value (`apiext.NodeReservation`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReservation {
    pub resources: Option<BTreeMap<String, Quantity>>,
    #[serde(rename = "reservedCPUs")]
    pub reserved_cpus: Option<String>,
    /// `Default` (or empty): node allocatable is trimmed by it; `ReservedCPUsOnly`: not.
    pub apply_policy: Option<String>,
}

impl NodeReservation {
    pub fn parse(annotations: Option<&BTreeMap<String, String>>) -> Option<NodeReservation> {
        let raw = annotations?.get(super::keys::ANNOTATION_NODE_RESERVATION)?;
        crate::api::decode::from_str(raw).ok()
    }

    /// `GetNodeReservationResources`: the resources, with `reservedCPUs` counted as cpu.
    pub fn resources(&self) -> Amounts {
        let mut out = amounts(self.resources.as_ref());
        if let Some(cpus) = self
            .reserved_cpus
            .as_deref()
            .filter(|c| !c.is_empty())
            .and_then(|c| crate::api::cpuset::parse(c).ok())
        {
            out.insert("cpu".into(), cpus.len() as i64 * 1000);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_cpus_count_as_cpu() {
        let ann = BTreeMap::from([(
            super::super::keys::ANNOTATION_NODE_RESERVATION.to_string(),
            r#"{"resources": {"cpu": "1", "memory": "1Gi"}, "reservedCPUs": "0-1"}"#.to_string(),
        )]);
        let r = NodeReservation::parse(Some(&ann)).unwrap().resources();
        assert_eq!((r["cpu"], r["memory"]), (2000, 1 << 30));
    }
}
