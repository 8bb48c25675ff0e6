//! What NodeNUMAResource writes at PreBind: the pod's resource-status (cpuset and NUMA
//! nodes) and the bind policy it was given.

use std::collections::BTreeMap;

use super::alloc::Allocation;
use crate::api::cpuset;
use crate::api::extension::resourcestatus::{NUMANodeResource, ResourceStatus};
use crate::api::quantity::{cpu_from_milli, from_int};
use crate::scheduler::model::topology::BindPolicy;

pub fn policy_name(p: BindPolicy) -> &'static str {
    match p {
        BindPolicy::FullPcpus => "FullPCPUs",
        BindPolicy::SpreadByPcpus => "SpreadByPCPUs",
    }
}

pub fn status_json(a: &Allocation) -> String {
    let cpus: Vec<u32> = a.cpus.iter().copied().collect();
    let numa: Vec<NUMANodeResource> = a
        .numa
        .iter()
        .map(|(n, cpu, mem)| {
            let mut resources = BTreeMap::new();
            if *cpu > 0 {
                resources.insert("cpu".to_string(), cpu_from_milli(*cpu));
            }
            if *mem > 0 {
                resources.insert("memory".to_string(), from_int(*mem));
            }
            NUMANodeResource {
                node: *n as i32,
                resources,
            }
        })
        .collect();
    let status = ResourceStatus {
        cpuset: cpuset::format(&cpus),
        numa_node_resources: (!numa.is_empty()).then_some(numa),
    };
    serde_json::to_string(&status).unwrap_or_default()
}
