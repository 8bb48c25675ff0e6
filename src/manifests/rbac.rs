//! RBAC per role, least privilege: each rule is one of the role's own `access::NEEDS` (the
//! list the role checks at start), nothing wildcarded. Cluster-wide needs go in a
//! ClusterRole; Leases, Secrets, ConfigMaps and events of the install namespace in a Role
//! there. Names are Koordinator's chart's (`koordlet-role`, `koord-manager-rolebinding`,
//! ...), so applying koord's manifests over the chart replaces its RBAC instead of
//! binding a second set; the chart's bindings to kube's `system:kube-scheduler` and
//! `system:volume-scheduler` are not made (koord's scheduler role holds what it needs).

use serde_json::{Value, json};

use super::NAMESPACE;
use crate::kernel::access::Need;

/// One ServiceAccount's permissions, under the chart's names.
pub struct Account {
    pub name: &'static str,
    pub needs: &'static [Need],
    pub cluster_role: &'static str,
    pub cluster_binding: &'static str,
    /// (Role, RoleBinding) in the install namespace, for its own-namespace needs.
    pub role: (&'static str, &'static str),
}

pub const ACCOUNTS: &[Account] = &[
    Account {
        name: "koordlet",
        needs: crate::koordlet::access::NEEDS,
        cluster_role: "koordlet-role",
        cluster_binding: "koordlet-rolebinding",
        role: ("koordlet-role", "koordlet-rolebinding"),
    },
    Account {
        name: "koord-manager",
        needs: crate::manager::access::NEEDS,
        cluster_role: "koord-manager-role",
        cluster_binding: "koord-manager-rolebinding",
        role: (
            "koord-leader-election-role",
            "koord-leader-election-rolebinding",
        ),
    },
    Account {
        name: "koord-scheduler",
        needs: crate::scheduler::access::NEEDS,
        cluster_role: "koord-scheduler-role",
        cluster_binding: "koord-scheduler-rolebinding-custom",
        role: (
            "koord-scheduler-leader-election-role",
            "koord-scheduler-leader-election-rolebinding",
        ),
    },
    Account {
        name: "koord-descheduler",
        needs: crate::descheduler::access::NEEDS,
        cluster_role: "koord-descheduler-role",
        cluster_binding: "koord-descheduler-rolebinding",
        role: (
            "koord-descheduler-leader-election-role",
            "koord-descheduler-leader-election-rolebinding",
        ),
    },
];

fn rules(needs: &[Need], own_namespace: bool) -> Vec<Value> {
    needs
        .iter()
        .filter(|n| n.own_namespace == own_namespace)
        .map(|n| json!({"apiGroups": [n.group], "resources": n.resources, "verbs": n.verbs}))
        .collect()
}

fn binding(kind: &str, name: &str, role: &str, account: &str, namespaced: bool) -> Value {
    let mut meta = json!({"name": name});
    if namespaced {
        meta["namespace"] = json!(NAMESPACE);
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": format!("{kind}Binding"),
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
    })
}

/// ServiceAccount, ClusterRole(+Binding) and, when needed, Role(+Binding) of `a`.
pub fn objects(a: &Account) -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": a.name, "namespace": NAMESPACE}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": a.cluster_role}, "rules": rules(a.needs, false)}),
        binding(
            "ClusterRole",
            a.cluster_binding,
            a.cluster_role,
            a.name,
            false,
        ),
    ];
    let namespaced = rules(a.needs, true);
    if !namespaced.is_empty() {
        let (role, bound) = a.role;
        out.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": role, "namespace": NAMESPACE}, "rules": namespaced}),
        );
        out.push(binding("Role", bound, role, a.name, true));
    }
    out
}
