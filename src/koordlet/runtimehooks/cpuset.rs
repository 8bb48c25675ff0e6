//! CPUSetAllocator's container cpuset (Koordinator's `hooks/cpuset`: `SetContainerCPUSet`
//! and `cpusetRule.getContainerCPUSet`), in its order:
//! 1. the CPUs the scheduler pinned the pod to (`resource-status` cpuset: LSE, LSR);
//! 2. a NUMA-aware pod (`resource-status` numaNodeResources with CPU): the share pools of
//!    its NUMA nodes — the BE pools for a BE pod under the BECPUManager gate;
//! 3. SYSTEM pods: the node's `system-qos-resource` CPUs;
//! 4. LS pods: every LS share pool;
//! 5. BestEffort pods (BE included): an empty cpuset — the besteffort directory's, which
//!    cpusuppress manages;
//! 6. anything else: nothing under the kubelet's static policy (its CPU manager owns
//!    them), every LS share pool under `none`.
//!
//! Pools are joined as Koordinator joins them: each NUMA node's cpuset, comma-separated.

use k8s_openapi::api::core::v1::Pod;

use crate::api::extension::AnnotationError;
use crate::api::extension::qos::{KubeQoS, QoSClass, kube_qos, pod_qos_class};
use crate::api::extension::resources::BATCH_CPU;
use crate::api::extension::resourcestatus::{ResourceStatus, resource_status};
use crate::api::quantity::q_milli;
use crate::koordlet::informer::States;
use crate::koordlet::topology::{self, SharedPool};
use crate::os::system::CpuInfo;
use std::collections::BTreeSet;

/// What the rule decides from: the node's pools and the kubelet's policy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpusetRule {
    pub kubelet_static: bool,
    pub share_pools: Vec<SharedPool>,
    pub be_share_pools: Vec<SharedPool>,
    pub system_qos_cpuset: String,
    /// The BECPUManager gate.
    pub be_cpu_manager: bool,
    /// Every LS share pool joined, made on first use: most pods get it, every round.
    all_pools: std::cell::OnceCell<String>,
}

impl CpusetRule {
    /// The pools as the node reports them in its NodeResourceTopology.
    pub fn from_node(states: &States, cpus: &NodeCpus, be_cpu_manager: bool) -> CpusetRule {
        let node = states.node.as_deref();
        let ids: Vec<u32> = cpus.cpus.iter().map(|c| c.id).collect();
        let (ls, be) = topology::share_pools(&ids, node, &states.pods, &cpus.kubelet_pinned);
        CpusetRule {
            kubelet_static: cpus.kubelet_static,
            share_pools: topology::per_numa(&cpus.cpus, &ls),
            be_share_pools: topology::per_numa(&cpus.cpus, &be),
            system_qos_cpuset: node
                .and_then(topology::system_qos_cpuset)
                .unwrap_or_default(),
            be_cpu_manager,
            all_pools: Default::default(),
        }
    }

    /// The container's cpuset; `None` leaves it to the runtime, `Some("")` clears it.
    pub fn container_cpuset(&self, pod: &Pod) -> Result<Option<String>, AnnotationError> {
        let status = resource_status(pod)?;
        if !status.cpuset.is_empty() {
            return Ok(Some(status.cpuset));
        }
        let qos = pod_qos_class(pod);
        if numa_aware(&status) {
            let nodes: Vec<i32> = status
                .numa_node_resources
                .iter()
                .flatten()
                .map(|n| n.node)
                .collect();
            if qos == QoSClass::Be && self.be_cpu_manager {
                return Ok(Some(join_on(&self.be_share_pools, &nodes)));
            }
            if qos != QoSClass::Be {
                return Ok(Some(join_on(&self.share_pools, &nodes)));
            }
        }
        if qos == QoSClass::System && !self.system_qos_cpuset.is_empty() {
            return Ok(Some(self.system_qos_cpuset.clone()));
        }
        let all = || {
            let all = self.all_pools.get_or_init(|| join(self.share_pools.iter()));
            all.clone()
        };
        if qos == QoSClass::Ls {
            return Ok(Some(all()));
        }
        if kube_qos(pod) == KubeQoS::BestEffort {
            return Ok(Some(String::new()));
        }
        Ok((!self.kubelet_static).then(all))
    }

    /// A host application's cpuset (Koordinator's `getHostAppCpuset`): every LS share pool
    /// for an LS application; other classes are not supported there.
    pub fn host_app_cpuset(&self, name: &str, qos: QoSClass) -> Result<String, String> {
        if qos != QoSClass::Ls {
            return Err(format!("only LS is supported for host application {name}"));
        }
        Ok(self
            .all_pools
            .get_or_init(|| join(self.share_pools.iter()))
            .clone())
    }
}

/// A pod the scheduler placed on NUMA nodes with CPU (cpu or batch-cpu).
fn numa_aware(status: &ResourceStatus) -> bool {
    status.numa_node_resources.iter().flatten().any(|n| {
        n.resources.get("cpu").is_some_and(|q| q_milli(q) != 0)
            || n.resources.get(BATCH_CPU).is_some_and(|q| q_milli(q) > 0)
    })
}

fn join<'a>(pools: impl Iterator<Item = &'a SharedPool>) -> String {
    pools.map(SharedPool::cpuset).collect::<Vec<_>>().join(",")
}

/// The pools on these NUMA nodes, in the pod's node order.
fn join_on(pools: &[SharedPool], nodes: &[i32]) -> String {
    join(
        nodes
            .iter()
            .flat_map(|n| pools.iter().filter(move |p| p.node as i32 == *n)),
    )
}

/// The node's CPUs as CPUSetAllocator sees them.
#[derive(Debug, Clone, Default)]
pub struct NodeCpus {
    /// The online CPUs with their core, socket and NUMA node.
    pub cpus: Vec<CpuInfo>,
    /// CPUs the kubelet's static CPU manager pinned (`cpu_manager_state`): no share pool
    /// has them, as in the reported NRT.
    pub kubelet_pinned: BTreeSet<u32>,
    /// The kubelet runs the static CPU manager policy (its checkpoint says so).
    pub kubelet_static: bool,
}

impl NodeCpus {
    /// `cpus`, with the policy and pins of the kubelet state file at `kubelet_state`, read
    /// now (small, and the kubelet rewrites it as pods come and go).
    pub fn read(
        cpus: &[CpuInfo],
        kubelet_state: Option<&std::path::Path>,
        pods: &[crate::koordlet::informer::PodMeta],
    ) -> NodeCpus {
        let kubelet = kubelet_state.map(topology::KubeletCpuState::read);
        NodeCpus {
            cpus: cpus.to_vec(),
            kubelet_static: kubelet.as_ref().is_some_and(|k| k.policy_name == "static"),
            kubelet_pinned: kubelet
                .map(|k| topology::kubelet_pinned(pods, &k))
                .unwrap_or_default(),
        }
    }

    /// These CPUs on one socket and NUMA node (tests).
    pub fn online(ids: &[u32]) -> NodeCpus {
        NodeCpus {
            cpus: ids
                .iter()
                .map(|&id| CpuInfo {
                    id,
                    core: id,
                    socket: 0,
                    numa: 0,
                })
                .collect(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
#[path = "cpuset_tests.rs"]
mod tests;
