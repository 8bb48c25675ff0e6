//! Small upstream plugins: PrioritySort, SchedulingGates, NodeUnschedulable, NodeName,
//! NodePorts, DefaultBinder.

use super::super::framework::{ClusterState, CycleState, NodeInfo, Plugin, PodInfo, Point, Status};
use super::taint::tolerates;
use crate::scheduler::framework::events::Events;

/// QueueSort: higher `spec.priority` first, then the earlier creation, then the name.
pub struct PrioritySort;

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        "PrioritySort"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::QueueSort]
    }
    fn less(&self, a: &PodInfo, b: &PodInfo) -> bool {
        (std::cmp::Reverse(a.priority), a.created_ms, &a.key)
            < (std::cmp::Reverse(b.priority), b.created_ms, &b.key)
    }
}

/// PreEnqueue: pods with `spec.schedulingGates` wait.
pub struct SchedulingGates;

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        "SchedulingGates"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PreEnqueue]
    }
    fn pre_enqueue(&self, pod: &PodInfo, _: &ClusterState) -> Status {
        let gates = pod
            .spec()
            .and_then(|s| s.scheduling_gates.as_ref())
            .map(|g| g.len())
            .unwrap_or(0);
        if gates == 0 {
            Status::success()
        } else {
            Status::unresolvable(format!("waiting for scheduling gates: {gates}"))
        }
    }
}

pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        "NodeUnschedulable"
    }
    fn events(&self) -> Events {
        Events::NODE_ADD.or(Events::NODE_TAINT)
    }
    fn points(&self) -> &'static [Point] {
        &[Point::Filter]
    }
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        if !node.unschedulable {
            return Status::success();
        }
        let taint = k8s_openapi::api::core::v1::Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let tolerations = pod
            .spec()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or(&[]);
        if tolerates(tolerations, &taint) {
            Status::success()
        } else {
            Status::unresolvable("node(s) were unschedulable")
        }
    }
}

pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        "NodeName"
    }
    fn events(&self) -> Events {
        Events::NODE_ADD
    }
    fn points(&self) -> &'static [Point] {
        &[Point::Filter]
    }
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        match pod
            .spec()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
        {
            Some(want) if want != node.name => {
                Status::unresolvable("node(s) didn't match the requested node name")
            }
            _ => Status::success(),
        }
    }
}

pub struct NodePorts;

fn conflicts(a: &(String, String, i32), b: &(String, String, i32)) -> bool {
    a.0 == b.0 && a.2 == b.2 && (a.1 == b.1 || a.1 == "0.0.0.0" || b.1 == "0.0.0.0")
}

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        "NodePorts"
    }
    fn events(&self) -> Events {
        Events::NODE_ADD.or(Events::POD_ASSIGNED_DELETE)
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PreFilter, Point::Filter]
    }
    fn pre_filter(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &ClusterState,
    ) -> (Status, Option<std::collections::HashSet<String>>) {
        if pod.host_ports.is_empty() {
            (Status::skip(), None)
        } else {
            (Status::success(), None)
        }
    }
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let clash = pod
            .host_ports
            .iter()
            .any(|want| node.used_ports.iter().any(|used| conflicts(want, used)));
        if clash {
            Status::unschedulable("node(s) didn't have free ports for the requested pod ports")
        } else {
            Status::success()
        }
    }
}

/// Bind: the scheduler POSTs `pods/{name}/binding` (see `scheduler::binder`).
pub struct DefaultBinder;

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        "DefaultBinder"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::Bind]
    }
}
