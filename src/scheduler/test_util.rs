//! Fixtures for the scheduler's unit tests.

use std::sync::Arc;

use serde_json::{Value, json};

use super::framework::{ClusterState, PodInfo};

pub fn pod(v: Value) -> PodInfo {
    PodInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
}

/// A pod requesting `cpu`/`memory` in namespace default.
pub fn simple_pod(name: &str, cpu: &str, mem: &str) -> PodInfo {
    pod(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}))
}

pub fn node_json(name: &str, cpu: &str, mem: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "110"}}})
}

pub fn cluster(nodes: Vec<Value>) -> ClusterState {
    let mut c = ClusterState::default();
    for n in nodes {
        c.upsert_node(Arc::new(serde_json::from_value(n).unwrap()));
    }
    c
}
