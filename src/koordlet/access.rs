//! Every request the koordlet makes of the API server (see `kernel::access`): koord's
//! manifests grant exactly these, and the koordlet checks them at start.

use crate::kernel::access::{Need, READ};

pub const NEEDS: &[Need] = &[
    // Its Node (field-selected) and pods: from the API, or the kubelet's `/pods`, which
    // the kubelet authorizes as `nodes/proxy`.
    Need::cluster("", &["nodes", "pods"], READ),
    Need::cluster("", &["nodes/proxy"], &["get"]),
    Need::cluster("", &["pods/eviction"], &["create"]),
    Need::cluster("", &["events"], &["create"]),
    // blkio's podvolume blocks: a pod's claim's bound volume.
    Need::cluster("", &["persistentvolumeclaims"], &["get"]),
    Need::cluster("slo.koordinator.sh", &["nodeslos", "nodemetrics"], READ),
    Need::cluster("slo.koordinator.sh", &["nodemetrics/status"], &["update"]),
    Need::cluster(
        "topology.node.k8s.io",
        &["noderesourcetopologies"],
        &["get", "create", "update"],
    ),
    Need::cluster(
        "scheduling.koordinator.sh",
        &["devices"],
        &["get", "create", "update"],
    ),
];
