//! ImageLocality, as kube-scheduler's: a node already holding the pod's images scores
//! higher, by their size scaled by how many nodes have them (an image everywhere says
//! little), clamped between 23 MB and 1000 MB per container.

use super::super::framework::types::normalized_image_name;
use super::super::framework::{
    ClusterState, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Point, Status,
};

const MB: i64 = 1024 * 1024;
const MIN_THRESHOLD: i64 = 23 * MB;
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

pub struct ImageLocality;

/// `sumImageScores`: Σ size × (nodes having it / all nodes) over the pod's images here.
fn sum_image_scores(pod: &PodInfo, node: &NodeInfo, cluster: &ClusterState) -> i64 {
    let Some(images) = node.images.as_deref() else {
        return 0;
    };
    let total = cluster.nodes.len().max(1) as f64;
    let spec = pod.spec();
    spec.into_iter()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
        .filter_map(|c| {
            let name = normalized_image_name(c.image.as_deref()?);
            let size = *images.get(&name)?;
            let spread = cluster.image_nodes.get(&name).copied().unwrap_or(0) as f64 / total;
            Some((size as f64 * spread) as i64)
        })
        .sum()
}

/// `calculatePriority`.
fn priority(sum: i64, containers: usize) -> i64 {
    let max = MAX_CONTAINER_THRESHOLD * containers as i64;
    if max <= MIN_THRESHOLD {
        return 0;
    }
    let sum = sum.clamp(MIN_THRESHOLD, max);
    MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        "ImageLocality"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PreScore, Point::Score]
    }
    /// Nodes that report no images score 0 everywhere: no Score call per node.
    fn pre_score(
        &self,
        _: &mut CycleState,
        _: &PodInfo,
        _: &[usize],
        cluster: &ClusterState,
    ) -> Status {
        if cluster.image_nodes.is_empty() {
            Status::skip()
        } else {
            Status::success()
        }
    }
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<i64, Status> {
        if cluster.image_nodes.is_empty() {
            return Ok(0);
        }
        let containers = pod.spec().map_or(0, |s| {
            s.containers.len() + s.init_containers.as_ref().map_or(0, Vec::len)
        });
        Ok(priority(sum_image_scores(pod, node, cluster), containers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::test_util::pod;
    use serde_json::json;
    use std::sync::Arc;

    /// kube-scheduler's TestImageLocalityPriority "two images spread on two nodes,
    /// prefer the larger image one" case: node1 has 40 MB and 300 MB, node2 has 40 MB and
    /// 2 GB of images the pod uses (each on one of the two nodes, except gcr.io/40).
    #[test]
    fn prefers_the_node_with_the_larger_images() {
        let mut c = ClusterState::default();
        let node = |name: &str, images: serde_json::Value| {
            serde_json::from_value::<k8s_openapi::api::core::v1::Node>(
                json!({"metadata": {"name": name},
                "status": {"allocatable": {"cpu": "4"}, "images": images}}),
            )
            .unwrap()
        };
        c.upsert_node(Arc::new(node(
            "node1",
            json!([
            {"names": ["gcr.io/40:latest", "gcr.io/40:v1"], "sizeBytes": 40 * MB},
            {"names": ["gcr.io/300:latest", "gcr.io/300:v1"], "sizeBytes": 300 * MB}]),
        )));
        c.upsert_node(Arc::new(node(
            "node2",
            json!([
            {"names": ["gcr.io/250:latest"], "sizeBytes": 250 * MB},
            {"names": ["gcr.io/10:latest", "gcr.io/10:v1"], "sizeBytes": 10 * MB}]),
        )));
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [
            {"name": "a", "image": "gcr.io/40"}, {"name": "b", "image": "gcr.io/300"}]}}),
        );
        let s = |n: &str| {
            ImageLocality
                .score(&CycleState::default(), &p, c.node(n).unwrap(), &c)
                .unwrap()
        };
        // node1: (40 + 300) MB × ½ = 170 MB → 100 × (170 − 23) / (2000 − 23) = 7; node2: 0.
        assert_eq!((s("node1"), s("node2")), (7, 0));
        assert!(
            c.node("node1")
                .unwrap()
                .node
                .status
                .as_ref()
                .unwrap()
                .images
                .is_none(),
            "kept as sizes only"
        );
        c.remove_node("node1");
        assert!(!c.image_nodes.contains_key("gcr.io/40:latest"));
    }

    #[test]
    fn image_names_are_normalized_like_kube() {
        assert_eq!(normalized_image_name("nginx"), "nginx:latest");
        assert_eq!(normalized_image_name("nginx:1.2"), "nginx:1.2");
        assert_eq!(
            normalized_image_name("localhost:5000/nginx"),
            "localhost:5000/nginx:latest"
        );
        assert_eq!(
            normalized_image_name("gcr.io/a@sha256:abc"),
            "gcr.io/a@sha256:abc"
        );
    }
}
