//! RBAC per role, least privilege: each rule is what that role's code reads or writes
//! (watches, status writes, evictions, Leases in its own namespace), nothing wildcarded.
//! Cluster-scoped needs go in a ClusterRole; Leases, Secrets and ConfigMaps of the
//! install namespace in a Role there.

use serde_json::{Value, json};

use super::NAMESPACE;

const READ: &[&str] = &["get", "list", "watch"];

/// (apiGroups, resources, verbs).
type Rule = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

/// One ServiceAccount's permissions.
pub struct Account {
    pub name: &'static str,
    pub cluster: &'static [Rule],
    pub namespaced: &'static [Rule],
}

const EVENTS: Rule = (
    &["", "events.k8s.io"],
    &["events"],
    &["create", "patch", "update"],
);
const LEASES: Rule = (
    &["coordination.k8s.io"],
    &["leases"],
    &["get", "create", "update"],
);

/// The koordlet: its node, pods and SLO objects; NodeMetric status, its topology, evictions.
const KOORDLET: Account = Account {
    name: "koordlet",
    cluster: &[
        (&[""], &["nodes", "pods"], READ),
        (&[""], &["nodes/proxy"], &["get"]),
        (&[""], &["pods/eviction"], &["create"]),
        // blkio's podvolume blocks: a pod's claim's bound volume.
        (&[""], &["persistentvolumeclaims"], &["get"]),
        EVENTS,
        (&["slo.koordinator.sh"], &["nodeslos", "nodemetrics"], READ),
        (
            &["slo.koordinator.sh"],
            &["nodemetrics/status"],
            &["get", "update"],
        ),
        (
            &["topology.node.k8s.io"],
            &["noderesourcetopologies"],
            &["get", "list", "watch", "create", "update"],
        ),
        (
            &["scheduling.koordinator.sh"],
            &["devices"],
            &["get", "create", "update"],
        ),
    ],
    namespaced: &[],
};

/// The manager and the scheduler share one Deployment (`--role=manager,scheduler`).
const MANAGER: Account = Account {
    name: "koord-manager",
    cluster: &[
        (&[""], &["nodes", "pods", "namespaces"], READ),
        (&[""], &["nodes", "nodes/status"], &["patch"]),
        (&[""], &["pods"], &["patch", "delete"]),
        (&[""], &["pods/status"], &["patch"]),
        (&[""], &["pods/binding"], &["create"]),
        // ElasticQuota's over-use revoke controller.
        (&[""], &["pods/eviction"], &["create"]),
        EVENTS,
        (&["scheduling.k8s.io"], &["priorityclasses"], READ),
        // The volume plugins (VolumeBinding writes claimRef / selected-node at PreBind).
        (
            &[""],
            &["persistentvolumes", "persistentvolumeclaims"],
            &["get", "list", "watch", "update"],
        ),
        (&["storage.k8s.io"], &["storageclasses", "csinodes"], READ),
        // Default topology spreading's selectors; preemption's PodDisruptionBudgets.
        (&[""], &["services", "replicationcontrollers"], READ),
        (&["apps"], &["replicasets", "statefulsets"], READ),
        (&["policy"], &["poddisruptionbudgets"], READ),
        (
            &["admissionregistration.k8s.io"],
            &[
                "mutatingwebhookconfigurations",
                "validatingwebhookconfigurations",
            ],
            &["get", "create", "update"],
        ),
        (
            &["slo.koordinator.sh"],
            &["nodemetrics", "nodeslos"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        (
            &["config.koordinator.sh"],
            &["clustercolocationprofiles"],
            READ,
        ),
        (
            &["scheduling.koordinator.sh"],
            &["reservations"],
            &["get", "list", "watch", "patch", "delete"],
        ),
        (
            &["scheduling.koordinator.sh"],
            &["reservations/status"],
            &["patch"],
        ),
        (
            &["scheduling.sigs.k8s.io"],
            &["elasticquotas"],
            &["get", "list", "watch", "create", "patch"],
        ),
        (
            &["scheduling.sigs.k8s.io"],
            &["elasticquotas/status", "podgroups/status"],
            &["patch"],
        ),
        (&["scheduling.sigs.k8s.io"], &["podgroups"], READ),
        (&["quota.koordinator.sh"], &["elasticquotaprofiles"], READ),
        (&["topology.node.k8s.io"], &["noderesourcetopologies"], READ),
        (&["scheduling.koordinator.sh"], &["devices"], READ),
    ],
    namespaced: &[
        LEASES,
        (&[""], &["configmaps"], READ),
        (&[""], &["secrets"], &["get", "create", "update"]),
    ],
};

/// The descheduler: load and owners to choose pods, PodMigrationJobs to move them.
const DESCHEDULER: Account = Account {
    name: "koord-descheduler",
    cluster: &[
        (&[""], &["nodes", "pods", "namespaces"], READ),
        (&[""], &["pods"], &["delete"]),
        (&[""], &["pods/eviction"], &["create"]),
        EVENTS,
        (&["apps"], &["replicasets", "statefulsets"], READ),
        (&["batch"], &["jobs"], READ),
        (&["scheduling.k8s.io"], &["priorityclasses"], READ),
        (&["slo.koordinator.sh"], &["nodemetrics"], READ),
        (
            &["scheduling.koordinator.sh"],
            &["podmigrationjobs"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        (
            &["scheduling.koordinator.sh"],
            &["podmigrationjobs/status"],
            &["patch"],
        ),
        (
            &["scheduling.koordinator.sh"],
            &["reservations"],
            &["get", "list", "watch", "create", "delete"],
        ),
    ],
    namespaced: &[LEASES],
};

pub const ACCOUNTS: &[Account] = &[KOORDLET, MANAGER, DESCHEDULER];

fn rules(list: &[Rule]) -> Value {
    list.iter()
        .map(|(g, r, v)| json!({"apiGroups": g, "resources": r, "verbs": v}))
        .collect()
}

fn binding(kind: &str, name: &str, namespaced: bool) -> Value {
    let mut meta = json!({"name": name});
    if namespaced {
        meta["namespace"] = json!(NAMESPACE);
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": format!("{kind}Binding"),
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}],
    })
}

/// ServiceAccount, ClusterRole(+Binding) and, when needed, Role(+Binding) of `a`.
pub fn objects(a: &Account) -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": a.name, "namespace": NAMESPACE}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": a.name}, "rules": rules(a.cluster)}),
        binding("ClusterRole", a.name, false),
    ];
    if !a.namespaced.is_empty() {
        out.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": a.name, "namespace": NAMESPACE}, "rules": rules(a.namespaced)}),
        );
        out.push(binding("Role", a.name, true));
    }
    out
}
