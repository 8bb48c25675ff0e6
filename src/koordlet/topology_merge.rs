//! What others write into the node's NodeResourceTopology survives the koordlet's report
//! (Koordinator's `MergeZoneList(TrimDifferentZone(old, new), new)`): the manager's NUMA-level
//! batch resources (`kubernetes.io/batch-cpu`, `batch-memory`) stay on the zones the koordlet
//! still reports, and only the resources the koordlet reports are compared and replaced.

use crate::api::topology::{NodeResourceTopology, ResourceInfo};

/// `want` with the resources `have` holds on the same zones that `want` does not report.
pub fn keep_others(have: &NodeResourceTopology, want: &mut NodeResourceTopology) {
    for zone in &mut want.spec.zones {
        let Some(old) = have.spec.zones.iter().find(|z| z.name == zone.name) else {
            continue;
        };
        let list = zone.resources.get_or_insert_with(Vec::new);
        let others: Vec<ResourceInfo> = old
            .resources
            .iter()
            .flatten()
            .filter(|r| !list.iter().any(|m| m.name == r.name))
            .cloned()
            .collect();
        if !others.is_empty() {
            list.extend(others);
            list.sort_by(|a, b| a.name.cmp(&b.name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nrt(zones: serde_json::Value) -> NodeResourceTopology {
        serde_json::from_value(json!({"apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology", "metadata": {"name": "n1"}, "zones": zones}))
        .unwrap()
    }

    fn r(n: &str, q: &str) -> serde_json::Value {
        json!({"name": n, "capacity": q, "allocatable": q, "available": q})
    }

    #[test]
    fn the_managers_batch_resources_stay_on_the_zones_still_reported() {
        let have = nrt(json!([
            {"name": "node-0", "type": "Node", "resources": [r("cpu", "4"), r("kubernetes.io/batch-cpu", "3300")]},
            {"name": "node-9", "type": "Node", "resources": [r("kubernetes.io/batch-cpu", "1")]}]));
        let mut want = nrt(json!([
            {"name": "node-0", "type": "Node", "resources": [r("cpu", "8"), r("memory", "1Gi")]}]));
        keep_others(&have, &mut want);
        let got: Vec<(String, String)> = want.spec.zones[0]
            .resources
            .iter()
            .flatten()
            .map(|x| (x.name.clone(), x.allocatable.0.clone()))
            .collect();
        let want_list = [
            ("cpu", "8"),
            ("kubernetes.io/batch-cpu", "3300"),
            ("memory", "1Gi"),
        ];
        let want_list: Vec<(String, String)> = want_list
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want_list);
        assert_eq!(
            want.spec.zones.len(),
            1,
            "a zone no longer reported is dropped"
        );
    }
}
