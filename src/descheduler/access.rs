//! Every request the descheduler makes of the API server (see `kernel::access`): koord's
//! manifests grant exactly these, and the descheduler checks them at start.

use crate::kernel::access::{Need, READ};

/// Workloads whose expected replicas the migration limits read; Koordinator's chart does
/// not grant these two.
pub const JOBS: Need = Need::cluster("batch", &["jobs"], READ).optional(
    "pods of Jobs count with no workload limit (maxMigrating/maxUnavailable per workload)",
);
pub const REPLICATION_CONTROLLERS: Need = Need::cluster("", &["replicationcontrollers"], READ)
    .optional("pods of ReplicationControllers count with no workload limit (maxMigrating/maxUnavailable per workload)");

pub const NEEDS: &[Need] = &[
    Need::cluster("", &["nodes", "pods", "namespaces"], READ),
    Need::cluster("", &["pods"], &["delete"]),
    Need::cluster("", &["pods/eviction"], &["create"]),
    Need::cluster("", &["events"], &["create"]),
    Need::cluster("apps", &["replicasets", "statefulsets"], READ),
    JOBS,
    REPLICATION_CONTROLLERS,
    Need::cluster("scheduling.k8s.io", &["priorityclasses"], READ),
    Need::cluster("slo.koordinator.sh", &["nodemetrics"], READ),
    Need::cluster(
        "scheduling.koordinator.sh",
        &["podmigrationjobs"],
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    Need::cluster(
        "scheduling.koordinator.sh",
        &["podmigrationjobs/status"],
        &["patch"],
    ),
    Need::cluster(
        "scheduling.koordinator.sh",
        &["reservations"],
        &["get", "list", "watch", "create", "delete"],
    ),
    Need::own_namespace(
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update"],
    ),
];
