//! What NodeNUMAResource writes at PreBind: the pod's resource-status (cpuset and NUMA
//! nodes) and the bind policy it was given.

use std::collections::BTreeMap;

use super::alloc::Allocation;
use crate::api::cpuset;
use crate::api::extension::numa_res::NumaRes;
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
        .map(|(n, res)| {
            let resources: BTreeMap<String, _> = res
                .nonzero()
                .filter(|(_, _, v)| *v > 0)
                .map(|(i, name, v)| {
                    let q = if i == NumaRes::CPU {
                        cpu_from_milli(v)
                    } else {
                        from_int(v)
                    };
                    (name.to_string(), q)
                })
                .collect();
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
