//! What one descheduling pass reads: nodes, pods, NodeMetrics, PodMigrationJobs, the
//! workloads pods belong to (for expected replicas) and PriorityClasses. Built from API
//! lists by the live role and from a snapshot by `koord explain deschedule`.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::metric::MetricView;
use super::podview::PodView;
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
    pub pods: Vec<Arc<PodView>>,
    pub metrics: HashMap<String, Arc<MetricView>>,
    pub jobs: Vec<JobView>,
    /// Controller UID → expected replicas.
    pub replicas: HashMap<String, i32>,
    /// PriorityClass name → value.
    pub priority_classes: HashMap<String, i32>,
    /// Controller UID → its pods.
    pub by_owner: HashMap<String, Vec<Arc<PodView>>>,
}

impl World {
    /// A world from objects: `others` may hold workloads (ReplicaSet, StatefulSet,
    /// Deployment, ReplicationController, Job) and PriorityClasses; other kinds are ignored.
    pub fn build(
        nodes: impl IntoIterator<Item = Arc<Node>>,
        pods: impl IntoIterator<Item = Arc<PodView>>,
        metrics: impl IntoIterator<Item = impl std::borrow::Borrow<NodeMetric>>,
        jobs: &[PodMigrationJob],
        others: &[Value],
    ) -> World {
        let mut w = World {
            nodes: nodes.into_iter().collect(),
            pods: pods.into_iter().collect(),
            metrics: metrics
                .into_iter()
                .map(|m| {
                    let m = m.borrow();
                    let name = m.metadata.name.clone().unwrap_or_default();
                    (name, Arc::new(MetricView::from(m)))
                })
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
            if let Some(o) = p.controller_uid() {
                self.by_owner.entry(o).or_default().push(p.clone());
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
        if !jobs.iter().any(job_active) {
            return;
        }
        let by_key: HashMap<(&str, &str), &Arc<PodView>> = self
            .pods
            .iter()
            .map(|p| ((p.namespace.as_str(), p.name.as_str()), p))
            .collect();
        for j in jobs.iter().filter(|j| job_active(j)) {
            let Some(r) = j.spec.pod_ref.as_ref() else {
                continue;
            };
            let ns = r.namespace.as_deref().unwrap_or("");
            let name = r.name.as_deref().unwrap_or("");
            let pod = by_key.get(&(ns, name));
            let arbitrated = j
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::descheduler::migration::PASSED_ARBITRATION))
                .is_some_and(|v| v == "true");
            self.jobs.push(JobView {
                namespace: ns.to_string(),
                pod: name.to_string(),
                pod_uid: r.uid.clone(),
                node: pod.and_then(|p| p.node_name.clone()),
                owner_uid: pod.and_then(|p| p.controller_uid()),
                arbitrated,
            });
        }
    }

    /// Expected replicas of the pod's workload: 0 when it has none koord knows.
    pub fn expected_replicas(&self, owner_uid: &str) -> i32 {
        self.replicas.get(owner_uid).copied().unwrap_or(0)
    }
}
