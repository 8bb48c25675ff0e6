//! What one descheduling pass reads: nodes, pods, NodeMetrics, PodMigrationJobs, the
//! workloads pods belong to (for expected replicas) and PriorityClasses. Built from API
//! lists by the live role and from a snapshot by `koord explain deschedule`.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::Value;

use crate::api::scheduling::migration::PodMigrationJob;
use crate::api::slo::NodeMetric;

/// Phases in which a PodMigrationJob still holds its pod.
pub fn job_active(j: &PodMigrationJob) -> bool {
    matches!(
        j.status.as_ref().and_then(|s| s.phase.as_deref()),
        None | Some("") | Some("Pending") | Some("Running")
    )
}

/// A migration in flight, as the limits count it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    pub namespace: String,
    pub pod: String,
    pub pod_uid: Option<String>,
    pub node: Option<String>,
    pub owner_uid: Option<String>,
    /// Pending jobs that passed arbitration count like Running ones.
    pub arbitrated: bool,
}

#[derive(Debug, Default, Clone)]
pub struct World {
    pub nodes: Vec<Arc<Node>>,
    pub pods: Vec<Arc<Pod>>,
    pub metrics: HashMap<String, Arc<NodeMetric>>,
    pub jobs: Vec<JobView>,
    /// Controller UID → expected replicas.
    pub replicas: HashMap<String, i32>,
    /// PriorityClass name → value.
    pub priority_classes: HashMap<String, i32>,
    /// Controller UID → its pods (`ns/name`, ready).
    pub by_owner: HashMap<String, Vec<(String, bool)>>,
}

/// Ready and not terminating.
pub fn ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or(""),
        p.metadata.name.as_deref().unwrap_or("")
    )
}

/// The UID of the pod's controller (ownerReference with `controller: true`).
pub fn controller_uid(p: &Pod) -> Option<String> {
    p.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

impl World {
    /// A world from objects: `others` may hold workloads (ReplicaSet, StatefulSet,
    /// Deployment, ReplicationController, Job) and PriorityClasses; other kinds are ignored.
    pub fn build(
        nodes: Vec<Node>,
        pods: Vec<Pod>,
        metrics: Vec<NodeMetric>,
        jobs: &[PodMigrationJob],
        others: &[Value],
    ) -> World {
        let mut w = World {
            nodes: nodes.into_iter().map(Arc::new).collect(),
            pods: pods.into_iter().map(Arc::new).collect(),
            metrics: metrics
                .into_iter()
                .map(|m| (m.metadata.name.clone().unwrap_or_default(), Arc::new(m)))
                .collect(),
            ..Default::default()
        };
        for v in others {
            match v.get("kind").and_then(Value::as_str) {
                Some("PriorityClass") => w.add_priority_class(v),
                Some(
                    "ReplicaSet" | "StatefulSet" | "Deployment" | "ReplicationController" | "Job",
                ) => w.add_workload(v),
                _ => {}
            }
        }
        w.add_jobs(jobs);
        w.index_owners();
        w
    }

    /// Groups pods by controller, for the per-workload limits.
    pub fn index_owners(&mut self) {
        self.by_owner.clear();
        for p in &self.pods {
            if let Some(o) = controller_uid(p) {
                self.by_owner.entry(o).or_default().push((key(p), ready(p)));
            }
        }
    }

    /// Adds a workload object (ReplicaSet, StatefulSet, Deployment, ReplicationController,
    /// Job…): its UID and `spec.replicas` (`spec.parallelism` for a Job; 1 when unset).
    pub fn add_workload(&mut self, v: &Value) {
        let Some(uid) = v.pointer("/metadata/uid").and_then(Value::as_str) else {
            return;
        };
        let spec = v.get("spec");
        let n = spec
            .and_then(|s| s.get("replicas").or_else(|| s.get("parallelism")))
            .and_then(Value::as_i64)
            .unwrap_or(1);
        self.replicas.insert(uid.to_string(), n as i32);
    }

    pub fn add_priority_class(&mut self, v: &Value) {
        if let (Some(name), Some(value)) = (
            v.pointer("/metadata/name").and_then(Value::as_str),
            v.get("value").and_then(Value::as_i64),
        ) {
            self.priority_classes.insert(name.into(), value as i32);
        }
    }

    /// Adds the active jobs, finding each one's pod for its node and owner.
    pub fn add_jobs(&mut self, jobs: &[PodMigrationJob]) {
        let by_key: HashMap<String, &Arc<Pod>> = self.pods.iter().map(|p| (key(p), p)).collect();
        for j in jobs.iter().filter(|j| job_active(j)) {
            let Some(r) = j.spec.pod_ref.as_ref() else {
                continue;
            };
            let ns = r.namespace.clone().unwrap_or_default();
            let name = r.name.clone().unwrap_or_default();
            let pod = by_key.get(&format!("{ns}/{name}"));
            let arbitrated = j
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::descheduler::migration::PASSED_ARBITRATION))
                .is_some_and(|v| v == "true");
            self.jobs.push(JobView {
                namespace: ns,
                pod: name,
                pod_uid: r.uid.clone(),
                node: pod.and_then(|p| p.spec.as_ref()?.node_name.clone()),
                owner_uid: pod.and_then(|p| controller_uid(p)),
                arbitrated,
            });
        }
    }

    /// Expected replicas of the pod's workload: 0 when it has none koord knows.
    pub fn expected_replicas(&self, owner_uid: &str) -> i32 {
        self.replicas.get(owner_uid).copied().unwrap_or(0)
    }
}
