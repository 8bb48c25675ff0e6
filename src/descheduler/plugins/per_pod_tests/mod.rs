//! sigs.k8s.io/descheduler's `TestRemoveFailedPods`, `TestRemovePodsHavingTooManyRestarts`,
//! `TestDeletePodsViolatingNodeTaints`, `TestRemovePodsViolatingNodeAffinity` and the
//! PodLifeTime tests (pod_lifetime_test.go: terminating, evictor settings, label selector,
//! limits, waiting and status reasons, ages, phases, terminated reasons, conditions and
//! transition times, owner kinds, ephemeral containers, exit codes), case for case with
//! their descriptions. koord's pass (like upstream's descheduler loop) does nothing
//! on a one-node cluster, so one-node cases get a cordoned spare node beside them (it fits
//! no pod, so `nodeFit` answers as upstream's does).

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::descheduler::testkit::*;

pub(super) fn spare() -> Node {
    node(
        "spare",
        2000,
        3000,
        10,
        json!({"spec": {"unschedulable": true}}),
    )
}

fn count(
    plugin: &str,
    args: Value,
    evictor: Value,
    top: Value,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
) -> usize {
    let point = "deschedule";
    pass_with(plugin, point, args, evictor, top, nodes, pods)
        .evictions
        .len()
}

mod affinity;
mod failed;
mod lifetime;
mod restarts;
mod taints;
