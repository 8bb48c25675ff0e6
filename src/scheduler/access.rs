//! Every request the scheduler makes of the API server (see `kernel::access`): koord's
//! manifests grant exactly these, and the scheduler checks them at start.

use crate::kernel::access::{Need, READ};

/// Without it, ElasticQuota's over-use revoke evicts nothing.
pub const EVICTION: Need = Need::cluster("", &["pods/eviction"], &["create"])
    .optional("ElasticQuota's over-used quotas are not revoked (no evictions)");

/// The network-topology manager's tree and status (`networkTopologyManager`).
pub const NETWORK_TOPOLOGY: Need = Need::cluster(
    "scheduling.koordinator.sh",
    &["clusternetworktopologies"],
    READ,
)
.optional("no network-topology tree: gangs with a network-topology spec are unschedulable");

/// ScheduleExplanations: read, answered in their status, deleted after their TTL.
pub const EXPLANATIONS: Need = Need::cluster(
    "scheduling.koordinator.sh",
    &["scheduleexplanations"],
    &["get", "list", "watch", "delete"],
)
.optional("ScheduleExplanations are not answered");

/// DevicePluginAdaption's lock on a node for Cambricon's and MetaX's device plugins.
pub const NODE_LOCK: Need = Need::cluster("", &["nodes"], &["patch"]).optional(
    "DevicePluginAdaption cannot lock nodes: pods on Cambricon or MetaX GPUs fail to bind",
);

pub const NEEDS: &[Need] = &[
    Need::cluster("", &["pods", "nodes"], READ),
    Need::cluster("", &["pods/binding"], &["create"]),
    // PreBind's patch (devices, reservation, NUMA); preemption's victims; the
    // PodScheduled condition and nominated node.
    Need::cluster("", &["pods"], &["patch", "delete"]),
    Need::cluster("", &["pods/status"], &["patch"]),
    EVICTION,
    NODE_LOCK,
    Need::cluster("", &["events"], &["create"]),
    // VolumeBinding (PreBind writes claimRef and the selected node).
    Need::cluster(
        "",
        &["persistentvolumes", "persistentvolumeclaims"],
        &["get", "list", "watch", "update"],
    ),
    Need::cluster(
        "storage.k8s.io",
        &["storageclasses", "csinodes", "csidrivers", "csistoragecapacities"],
        READ,
    ),
    // Default topology spreading's selectors; preemption's disruption budgets.
    Need::cluster("", &["services", "replicationcontrollers"], READ),
    Need::cluster("apps", &["replicasets", "statefulsets"], READ),
    Need::cluster("policy", &["poddisruptionbudgets"], READ),
    Need::cluster("slo.koordinator.sh", &["nodemetrics"], READ),
    Need::cluster("topology.node.k8s.io", &["noderesourcetopologies"], READ),
    Need::cluster("scheduling.koordinator.sh", &["devices"], READ),
    // DeviceShare's GPU shared-resource templates (one ConfigMap, in its namespace).
    Need::cluster("", &["configmaps"], READ).optional(
        "GPU shared-resource templates are not read: shares of a templated GPU model are not placed",
    ),
    Need::cluster(
        "scheduling.koordinator.sh",
        &["reservations"],
        &["get", "list", "watch", "patch"],
    ),
    Need::cluster(
        "scheduling.koordinator.sh",
        &["reservations/status"],
        &["patch"],
    ),
    NETWORK_TOPOLOGY,
    EXPLANATIONS,
    Need::cluster(
        "scheduling.koordinator.sh",
        &["scheduleexplanations/status"],
        &["patch"],
    )
    .optional("ScheduleExplanations are not answered"),
    Need::cluster(
        "scheduling.koordinator.sh",
        &["clusternetworktopologies/status"],
        &["patch"],
    )
    .optional("the ClusterNetworkTopology's status is not written"),
    // The built-in quotas are created; quota and PodGroup status written with the object.
    Need::cluster(
        "scheduling.sigs.k8s.io",
        &["elasticquotas"],
        &["get", "list", "watch", "create", "patch"],
    ),
    Need::cluster(
        "scheduling.sigs.k8s.io",
        &["podgroups"],
        &["get", "list", "watch", "patch"],
    ),
    Need::own_namespace(
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update"],
    ),
];
