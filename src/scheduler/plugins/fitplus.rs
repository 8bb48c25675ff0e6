//! Koordinator's NodeResourcesFitPlus: a score per requested resource with its own
//! strategy (`MostAllocated` packs, `LeastAllocated` spreads) and weight, from
//! `NodeResourcesFitPlusArgs.resources`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::super::framework::res::{R_PODS, name};
use super::super::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Point, Status,
};
use super::resources::{alloc_request, least_allocated, most_allocated};

/// `NodeResourcesFitPlusArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    pub resources: BTreeMap<String, ResourceType>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceType {
    #[serde(rename = "type")]
    pub type_: String,
    pub weight: i64,
}

pub struct NodeResourcesFitPlus {
    pub args: Args,
}

impl Plugin for NodeResourcesFitPlus {
    fn name(&self) -> &'static str {
        "NodeResourcesFitPlus"
    }
    /// As NodeResourcesFit's: a node added or grown, a pod gone, a Reservation changed.
    fn events(&self) -> crate::scheduler::framework::events::Events {
        use crate::scheduler::framework::events::Events as E;
        E::NODE_ADD
            .or(E::NODE_ALLOCATABLE)
            .or(E::POD_ASSIGNED_DELETE)
            .or(E::RESERVATION)
    }
    fn points(&self) -> &'static [Point] {
        &[Point::Score]
    }
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, Status> {
        let (mut sum, mut weights) = (0i64, 0i64);
        for (id, v) in pod.req.iter() {
            if v <= 0 || id == R_PODS {
                continue;
            }
            let Some(t) = self.args.resources.get(&name(id)) else {
                continue;
            };
            let (capacity, requested) = alloc_request(pod, node, id);
            let s = match t.type_.as_str() {
                "MostAllocated" => most_allocated(requested, capacity),
                "LeastAllocated" => least_allocated(requested, capacity),
                _ => 0,
            };
            sum += s * t.weight;
            weights += t.weight;
        }
        Ok(if weights == 0 {
            MAX_NODE_SCORE
        } else {
            sum / weights
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::test_util::{cluster, node_json, pod};
    use serde_json::json;

    /// Koordinator's TestNodeResourcesFitPlus shape: cpu spread, a GPU-like resource packed.
    #[test]
    fn each_resource_scores_with_its_own_strategy() {
        let args: Args = serde_json::from_value(json!({"resources": {
            "cpu": {"type": "LeastAllocated", "weight": 1},
            "nvidia.com/gpu": {"type": "MostAllocated", "weight": 2}}}))
        .unwrap();
        let pl = NodeResourcesFitPlus { args };
        let mut n = node_json("n", "8", "32Gi");
        n["status"]["allocatable"]["nvidia.com/gpu"] = "4".into();
        let mut c = cluster(vec![n]);
        c.upsert_pod(std::sync::Arc::new(serde_json::from_value(json!({"metadata": {"name": "x", "namespace": "d"},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}]}})).unwrap()));
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}]}}),
        );
        // cpu: (8 − 4)/8 → 50 × 1; gpu: 2/4 → 50 × 2; memory is not asked: (50 + 100) / 3.
        let s = pl
            .score(&CycleState::default(), &p, &c.nodes[0], &c)
            .unwrap();
        assert_eq!(s, 50);
        let none = NodeResourcesFitPlus {
            args: Args::default(),
        };
        assert_eq!(
            none.score(&CycleState::default(), &p, &c.nodes[0], &c)
                .unwrap(),
            100
        );
    }
}
