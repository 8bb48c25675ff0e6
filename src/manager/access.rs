//! Every request the manager makes of the API server (see `kernel::access`): koord's
//! manifests grant exactly these, and the manager checks them at start.

use crate::kernel::access::{Need, READ};

/// Koordinator's chart creates the webhook configurations and lets the manager only update
/// them; without these the manager updates the existing ones (their CA bundle and
/// client config) and leaves them in place when it stops.
pub const WEBHOOK_CONFIGURATIONS: Need = Need::cluster(
    "admissionregistration.k8s.io",
    &[
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    ],
    &["create", "delete"],
)
.optional("the webhook configurations are not created or removed, only updated");

/// On koord's embedded API server each replica publishes itself behind the webhook
/// Service; in a cluster the Service's endpoints come from its pods.
pub const WEBHOOK_ENDPOINTS: &[Need] = &[
    Need::own_namespace("", &["services"], &["get", "create"])
        .optional("the webhook Service is not created (the cluster's is used)"),
    Need::own_namespace(
        "discovery.k8s.io",
        &["endpointslices"],
        &["list", "patch", "delete"],
    )
    .optional("this replica is not published as a webhook endpoint (the cluster's are used)"),
];

/// ColocationProfileController (gate, off by default) updates pending pods.
pub const POD_PATCH: Need = Need::cluster("", &["pods"], &["patch"])
    .optional("ColocationProfileController cannot update pending pods");

pub const NEEDS: &[Need] = &[
    Need::cluster("", &["nodes", "pods", "namespaces"], READ),
    Need::cluster("", &["nodes", "nodes/status"], &["patch"]),
    POD_PATCH,
    Need::cluster("scheduling.k8s.io", &["priorityclasses"], READ),
    Need::cluster(
        "slo.koordinator.sh",
        &["nodemetrics", "nodeslos"],
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    Need::cluster(
        "config.koordinator.sh",
        &["clustercolocationprofiles"],
        READ,
    ),
    Need::cluster("quota.koordinator.sh", &["elasticquotaprofiles"], READ),
    Need::cluster(
        "scheduling.sigs.k8s.io",
        &["elasticquotas"],
        &["get", "list", "watch", "create", "patch"],
    ),
    Need::cluster("topology.node.k8s.io", &["noderesourcetopologies"], READ),
    // NUMA-level batch resources written into the zones (as Koordinator's chart allows).
    Need::cluster(
        "topology.node.k8s.io",
        &["noderesourcetopologies"],
        &["patch"],
    ),
    Need::cluster("scheduling.koordinator.sh", &["devices"], READ),
    Need::cluster(
        "admissionregistration.k8s.io",
        &[
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
        ],
        &["get", "update"],
    ),
    WEBHOOK_CONFIGURATIONS,
    WEBHOOK_ENDPOINTS[0],
    WEBHOOK_ENDPOINTS[1],
    // slo-controller-config and the PodEnhancedValidator's rules; the webhook
    // certificates' Secret; its Lease and events about its ConfigMap.
    Need::own_namespace("", &["configmaps"], READ),
    Need::own_namespace("", &["secrets"], &["get", "create", "update"]),
    Need::own_namespace("", &["events"], &["create"]),
    Need::own_namespace(
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update"],
    ),
];
