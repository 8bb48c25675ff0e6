//! The roles and bindings every kube-apiserver creates at start (kube's bootstrap policy):
//! `cluster-admin`, the aggregated `admin`/`edit`/`view`, discovery and self-review for
//! every authenticated user, `system:kube-scheduler` and `system:volume-scheduler` (which
//! Koordinator's chart binds koord-scheduler to), `system:node`, `system:auth-delegator`,
//! `system:monitoring`. Created when missing; with `autoupdate` they regain missing rules.

use serde_json::{Value, json};

use crate::apiserver::store::{Change, Skippable, Store, StoreError};

const RBAC: &str = "rbac.authorization.k8s.io";
const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn named(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "resourceNames": names})
}

fn urls(verbs: &[&str], u: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": u})
}

const CORE_READ: &[&str] = &[
    "pods",
    "pods/log",
    "pods/status",
    "configmaps",
    "endpoints",
    "persistentvolumeclaims",
    "persistentvolumeclaims/status",
    "replicationcontrollers",
    "replicationcontrollers/scale",
    "serviceaccounts",
    "services",
    "services/status",
    "bindings",
    "events",
    "limitranges",
    "namespaces/status",
    "replicationcontrollers/status",
    "resourcequotas",
    "resourcequotas/status",
];
const APPS: &[&str] = &[
    "controllerrevisions",
    "daemonsets",
    "daemonsets/status",
    "deployments",
    "deployments/scale",
    "deployments/status",
    "replicasets",
    "replicasets/scale",
    "replicasets/status",
    "statefulsets",
    "statefulsets/scale",
    "statefulsets/status",
];
const BATCH: &[&str] = &["cronjobs", "cronjobs/status", "jobs", "jobs/status"];

fn view_rules() -> Vec<Value> {
    vec![
        rule(READ, &[""], CORE_READ),
        rule(READ, &[""], &["namespaces"]),
        rule(READ, &["apps"], APPS),
        rule(
            READ,
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(READ, &["batch"], BATCH),
        rule(
            READ,
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
        rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
    ]
}

fn edit_rules() -> Vec<Value> {
    vec![
        rule(&["impersonate"], &[""], &["serviceaccounts"]),
        rule(
            &["create", "delete", "deletecollection", "patch", "update"],
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
            ],
        ),
        rule(
            &["create"],
            &[""],
            &["pods/eviction", "serviceaccounts/token"],
        ),
        rule(
            WRITE,
            &[""],
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
        ),
        rule(READ, &[""], &["secrets"]),
        rule(
            WRITE,
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
        ),
        rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
        rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
        rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
        rule(
            WRITE,
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
        ),
        rule(
            &[
                "get",
                "list",
                "watch",
                "create",
                "delete",
                "deletecollection",
                "patch",
                "update",
            ],
            &["coordination.k8s.io"],
            &["leases"],
        ),
    ]
}

fn admin_rules() -> Vec<Value> {
    vec![
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
        ),
        rule(
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
            &[RBAC],
            &["rolebindings", "roles"],
        ),
    ]
}

fn scheduler_rules() -> Vec<Value> {
    vec![
        rule(
            &["create", "patch", "update"],
            &["", "events.k8s.io"],
            &["events"],
        ),
        rule(&["create"], &["coordination.k8s.io"], &["leases"]),
        named(
            &["get", "update"],
            &["coordination.k8s.io"],
            &["leases"],
            &["kube-scheduler"],
        ),
        rule(&["create"], &[""], &["endpoints"]),
        named(
            &["get", "update"],
            &[""],
            &["endpoints"],
            &["kube-scheduler"],
        ),
        rule(READ, &[""], &["nodes"]),
        rule(&["delete", "get", "list", "watch"], &[""], &["pods"]),
        rule(&["create"], &[""], &["bindings", "pods/binding"]),
        rule(&["patch", "update"], &[""], &["pods/status"]),
        rule(READ, &[""], &["replicationcontrollers", "services"]),
        rule(READ, &["apps", "extensions"], &["replicasets"]),
        rule(READ, &["apps"], &["statefulsets"]),
        rule(READ, &["policy"], &["poddisruptionbudgets"]),
        rule(
            READ,
            &[""],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
        rule(READ, &["storage.k8s.io"], &["csinodes"]),
        rule(READ, &[""], &["namespaces"]),
        rule(
            READ,
            &["storage.k8s.io"],
            &["csidrivers", "csistoragecapacities"],
        ),
    ]
}

fn node_rules() -> Vec<Value> {
    vec![
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews", "subjectaccessreviews"],
        ),
        rule(READ, &[""], &["services"]),
        rule(&["create", "get", "list", "watch"], &[""], &["nodes"]),
        rule(&["patch", "update"], &[""], &["nodes/status"]),
        rule(&["patch", "update"], &[""], &["nodes"]),
        rule(
            &["create", "patch", "update"],
            &["", "events.k8s.io"],
            &["events"],
        ),
        rule(READ, &[""], &["pods"]),
        rule(&["create", "delete"], &[""], &["pods"]),
        rule(&["patch", "update"], &[""], &["pods/status"]),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(&["get", "list", "watch"], &[""], &["configmaps", "secrets"]),
        rule(
            &["get"],
            &[""],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(&["get"], &[""], &["endpoints"]),
        rule(
            &["create", "delete", "get", "patch", "update"],
            &["coordination.k8s.io"],
            &["leases"],
        ),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(READ, &["storage.k8s.io"], &["csidrivers", "csinodes"]),
    ]
}

/// `(name, rules, aggregate-to label, aggregation selector label)`.
type RoleSpec = (
    &'static str,
    Vec<Value>,
    Option<&'static str>,
    Option<&'static str>,
);

fn cluster_roles() -> Vec<RoleSpec> {
    vec![
        (
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])],
            None,
            None,
        ),
        ("admin", vec![], None, Some("admin")),
        ("edit", vec![], Some("admin"), Some("edit")),
        ("view", vec![], Some("edit"), Some("view")),
        (
            "system:aggregate-to-admin",
            admin_rules(),
            Some("admin"),
            None,
        ),
        ("system:aggregate-to-edit", edit_rules(), Some("edit"), None),
        ("system:aggregate-to-view", view_rules(), Some("view"), None),
        (
            "system:discovery",
            vec![urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
            None,
            None,
        ),
        (
            "system:basic-user",
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
            None,
            None,
        ),
        (
            "system:public-info-viewer",
            vec![urls(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
            None,
            None,
        ),
        (
            "system:monitoring",
            vec![urls(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
            None,
            None,
        ),
        (
            "system:auth-delegator",
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
            None,
            None,
        ),
        (
            "system:service-account-issuer-discovery",
            vec![urls(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
            None,
            None,
        ),
        ("system:kube-scheduler", scheduler_rules(), None, None),
        (
            "system:volume-scheduler",
            vec![
                rule(
                    &["get", "list", "patch", "update", "watch"],
                    &[""],
                    &["persistentvolumes"],
                ),
                rule(READ, &["storage.k8s.io"], &["storageclasses"]),
                rule(
                    &["get", "list", "patch", "update", "watch"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
            ],
            None,
            None,
        ),
        ("system:node", node_rules(), None, None),
    ]
}

/// `(binding, role, subject kind, subject name)`.
const BINDINGS: &[(&str, &str, &str, &str)] = &[
    ("cluster-admin", "cluster-admin", "Group", "system:masters"),
    (
        "system:discovery",
        "system:discovery",
        "Group",
        "system:authenticated",
    ),
    (
        "system:basic-user",
        "system:basic-user",
        "Group",
        "system:authenticated",
    ),
    (
        "system:public-info-viewer",
        "system:public-info-viewer",
        "Group",
        "system:authenticated",
    ),
    (
        "system:monitoring",
        "system:monitoring",
        "Group",
        "system:monitoring",
    ),
    (
        "system:service-account-issuer-discovery",
        "system:service-account-issuer-discovery",
        "Group",
        "system:serviceaccounts",
    ),
    (
        "system:kube-scheduler",
        "system:kube-scheduler",
        "User",
        "system:kube-scheduler",
    ),
    (
        "system:volume-scheduler",
        "system:volume-scheduler",
        "User",
        "system:kube-scheduler",
    ),
    ("system:node", "system:node", "Group", "system:nodes"),
];

fn bootstrap_meta(name: &str, extra_labels: Option<&str>) -> Value {
    let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    if let Some(to) = extra_labels {
        labels[format!("rbac.authorization.k8s.io/aggregate-to-{to}")] = "true".into();
    }
    json!({"name": name, "labels": labels,
           "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

/// Every bootstrap object, as `(resource, name, object)`.
pub fn objects() -> Vec<(&'static str, String, Value)> {
    let mut out = Vec::new();
    for (name, rules, to, selects) in cluster_roles() {
        let mut role = json!({"apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRole",
                              "metadata": bootstrap_meta(name, to), "rules": rules});
        if let Some(sel) = selects {
            role["aggregationRule"] = json!({"clusterRoleSelectors": [
                {"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{sel}"): "true"}}]});
        }
        out.push(("clusterroles", name.to_string(), role));
    }
    for (name, role, kind, subject) in BINDINGS {
        let mut s = json!({"kind": kind, "name": subject});
        if *kind != "ServiceAccount" {
            s["apiGroup"] = RBAC.into();
        }
        out.push((
            "clusterrolebindings",
            name.to_string(),
            json!({
            "apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRoleBinding",
            "metadata": bootstrap_meta(name, None),
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [s]}),
        ));
    }
    out
}

/// Creates the missing ones; those still marked `autoupdate` regain rules and subjects
/// they lost, as kube-apiserver reconciles them at every start.
pub fn ensure(store: &Store, prepare: impl Fn(&str, &mut Value)) -> Result<(), StoreError> {
    for (resource, name, mut obj) in objects() {
        let key = (RBAC.to_string(), resource.to_string());
        let r = store.commit(&key, "", &name, |cur| match cur {
            None => {
                prepare(resource, &mut obj);
                Ok(Change::Put(obj.clone()))
            }
            Some(c) => {
                let mut have = c.value();
                let auto = have
                    .pointer("/metadata/annotations/rbac.authorization.kubernetes.io~1autoupdate")
                    != Some(&json!("false"));
                let field = if resource == "clusterroles" {
                    "rules"
                } else {
                    "subjects"
                };
                let mut list = have
                    .get(field)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let before = list.len();
                for want in obj
                    .get(field)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if !list.contains(want) {
                        list.push(want.clone());
                    }
                }
                if !auto || list.len() == before {
                    return Err(Skippable::Skip);
                }
                have[field] = Value::Array(list);
                Ok(Change::Put(have))
            }
        });
        match r {
            Ok(_) | Err(Skippable::Skip) => {}
            Err(Skippable::Store(e)) => return Err(e),
        }
    }
    Ok(())
}
