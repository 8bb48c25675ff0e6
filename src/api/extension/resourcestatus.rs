//! The CPU/NUMA annotations of a pod: what it asks (`scheduling.koordinator.sh/resource-spec`,
//! `numa-topology-spec`) and what the scheduler gave it (`resource-status`).

use super::AnnotationError;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::keys::{ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS};
use super::numa_res::NumaRes;
use crate::api::cpuset;

pub const ANNOTATION_NUMA_TOPOLOGY_SPEC: &str = "scheduling.koordinator.sh/numa-topology-spec";

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpec {
    #[serde(rename = "requiredCPUBindPolicy")]
    pub required_cpu_bind_policy: Option<String>,
    #[serde(rename = "preferredCPUBindPolicy")]
    pub preferred_cpu_bind_policy: Option<String>,
    #[serde(rename = "preferredCPUExclusivePolicy")]
    pub preferred_cpu_exclusive_policy: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NUMANodeResource {
    pub node: i32,
    #[serde(default)]
    pub resources: BTreeMap<String, Quantity>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpuset: String,
    #[serde(rename = "numaNodeResources")]
    pub numa_node_resources: Option<Vec<NUMANodeResource>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NUMATopologySpec {
    #[serde(default, rename = "numaTopologyPolicy")]
    pub numa_topology_policy: String,
    #[serde(default, rename = "singleNUMANodeExclusive")]
    pub single_numa_node_exclusive: String,
}

fn annotation<T: for<'de> Deserialize<'de> + Default>(
    pod: &Pod,
    key: &str,
) -> Result<T, AnnotationError> {
    super::json_annotation(pod.metadata.annotations.as_ref(), key).map(Option::unwrap_or_default)
}

pub fn resource_spec(pod: &Pod) -> Result<ResourceSpec, AnnotationError> {
    annotation(pod, ANNOTATION_RESOURCE_SPEC)
}

pub fn resource_status(pod: &Pod) -> Result<ResourceStatus, AnnotationError> {
    annotation(pod, ANNOTATION_RESOURCE_STATUS)
}

pub fn numa_topology_spec(pod: &Pod) -> Result<NUMATopologySpec, AnnotationError> {
    annotation(pod, ANNOTATION_NUMA_TOPOLOGY_SPEC)
}

/// The CPUs an LSE/LSR pod was given (`resource-status` annotation), empty when none.
pub fn pinned_cpus(pod: &Pod) -> Vec<u32> {
    let raw = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_RESOURCE_STATUS));
    let v: Option<serde_json::Value> = raw.and_then(|s| serde_json::from_str(s).ok());
    v.and_then(|v| v.get("cpuset").and_then(|c| c.as_str()).map(str::to_string))
        .and_then(|c| crate::api::cpuset::parse(&c).ok())
        .unwrap_or_default()
}

/// What a placed pod holds of its node's CPUs and NUMA nodes, parsed once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuAlloc {
    pub cpus: Vec<u32>,
    /// The pod's `preferredCPUExclusivePolicy` (empty: none).
    pub exclusive: String,
    /// NUMA node → what the pod holds there (cpu, memory, batch-cpu, batch-memory).
    pub numa: Vec<(u32, NumaRes)>,
}

impl CpuAlloc {
    /// `None` for pods without an allocation (the common case costs one map lookup).
    pub fn of(pod: &Pod) -> Option<CpuAlloc> {
        let a = pod.metadata.annotations.as_ref()?;
        a.get(ANNOTATION_RESOURCE_STATUS)?;
        let status = resource_status(pod).ok()?;
        let numa: Vec<(u32, NumaRes)> = status
            .numa_node_resources
            .iter()
            .flatten()
            .filter_map(|n| {
                let get = |k: &str| n.resources.get(k).map(|q| crate::api::pod::amount(k, q));
                Some((u32::try_from(n.node).ok()?, NumaRes::from_list(get).0))
            })
            .collect();
        let cpus = cpuset::parse(status.cpuset.trim()).unwrap_or_default();
        if cpus.is_empty() && numa.is_empty() {
            return None;
        }
        let exclusive = resource_spec(pod)
            .ok()
            .and_then(|s| s.preferred_cpu_exclusive_policy)
            .unwrap_or_default();
        Some(CpuAlloc {
            cpus,
            exclusive,
            numa,
        })
    }
}
