//! Koordinator's ScarceResourceAvoidance: a node offering scarce resources (the args'
//! `resources`, e.g. GPUs) the pod does not ask for scores lower, keeping it for pods that do.

use serde::Deserialize;

use super::super::framework::res::{R_PODS, name};
use super::super::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Point, Status,
};

/// `ScarceResourceAvoidanceArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    pub resources: Vec<String>,
}

pub struct ScarceResourceAvoidance {
    pub args: Args,
}

impl Plugin for ScarceResourceAvoidance {
    fn name(&self) -> &'static str {
        "ScarceResourceAvoidance"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::Score]
    }
    /// What the node offers and the pod does not ask for (`diffNames`), of which scarce
    /// (`intersectNames`): (diff − scarce) × 100 / diff; 100 when either is empty.
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, Status> {
        let mut diff = 0i64;
        let mut scarce = 0i64;
        for (id, v) in node.alloc.iter() {
            if v <= 0 || id == R_PODS || pod.req.get(id) > 0 {
                continue;
            }
            diff += 1;
            if self.args.resources.contains(&name(id)) {
                scarce += 1;
            }
        }
        if diff == 0 || scarce == 0 {
            return Ok(MAX_NODE_SCORE);
        }
        Ok((diff - scarce) * MAX_NODE_SCORE / diff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::test_util::{cluster, node_json, pod};
    use serde_json::json;

    #[test]
    fn nodes_with_unrequested_scarce_resources_score_lower() {
        let pl = ScarceResourceAvoidance {
            args: Args {
                resources: vec!["nvidia.com/gpu".into()],
            },
        };
        let mut gpu = node_json("gpu", "8", "32Gi");
        gpu["status"]["allocatable"]["nvidia.com/gpu"] = "4".into();
        let c = cluster(vec![gpu, node_json("plain", "8", "32Gi")]);
        let cpu_pod = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
        );
        let s = |p: &PodInfo, n: usize| {
            pl.score(&CycleState::default(), p, &c.nodes[n], &c)
                .unwrap()
        };
        // gpu node offers memory and GPUs the pod does not ask for, one of them scarce: 50.
        assert_eq!((s(&cpu_pod, 0), s(&cpu_pod, 1)), (50, 100));
        let gpu_pod = pod(
            json!({"metadata": {"name": "g", "namespace": "d"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}}),
        );
        assert_eq!(s(&gpu_pod, 0), 100, "it asks for the scarce resource");
    }
}
