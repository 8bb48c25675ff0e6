//! Cases ported from kube's `plugin/pkg/auth/authorizer/rbac/rbac_test.go`
//! (TestRuleMatches, TestAuthorizer) and `pkg/registry/rbac/validation`'s Covers tests,
//! with their names.

use serde_json::json;

use super::*;
use crate::apiserver::auth::escalation::uncovered;

fn rule(v: serde_json::Value) -> Rule {
    serde_json::from_value(v).unwrap()
}

fn res(verb: &str, group: &str, resource: &str) -> Attributes {
    Attributes::resource(verb, group, resource, "ns1", "")
}

fn url(verb: &str, path: &str) -> Attributes {
    Attributes::non_resource(verb, path)
}

#[test]
fn test_rule_matches() {
    type Case = (&'static str, serde_json::Value, Vec<(Attributes, bool)>);
    let cases: Vec<Case> = vec![
        (
            "star verb, exact match other",
            json!({"verbs": ["*"], "apiGroups": ["group1"], "resources": ["resource1"]}),
            vec![
                (res("verb1", "group1", "resource1"), true),
                (res("verb1", "group2", "resource1"), false),
                (res("verb1", "group1", "resource2"), false),
                (res("verb1", "group2", "resource2"), false),
                (res("verb2", "group1", "resource1"), true),
                (res("verb2", "group2", "resource1"), false),
            ],
        ),
        (
            "star group, exact match other",
            json!({"verbs": ["verb1"], "apiGroups": ["*"], "resources": ["resource1"]}),
            vec![
                (res("verb1", "group1", "resource1"), true),
                (res("verb1", "group2", "resource1"), true),
                (res("verb1", "group1", "resource2"), false),
                (res("verb2", "group1", "resource1"), false),
            ],
        ),
        (
            "star resource, exact match other",
            json!({"verbs": ["verb1"], "apiGroups": ["group1"], "resources": ["*"]}),
            vec![
                (res("verb1", "group1", "resource1"), true),
                (res("verb1", "group2", "resource1"), false),
                (res("verb1", "group1", "resource2"), true),
                (res("verb2", "group1", "resource1"), false),
            ],
        ),
        (
            "tuple expansion",
            json!({"verbs": ["verb1", "verb2"], "apiGroups": ["group1", "group2"], "resources": ["resource1", "resource2"]}),
            vec![
                (res("verb1", "group1", "resource1"), true),
                (res("verb1", "group2", "resource2"), true),
                (res("verb2", "group1", "resource2"), true),
                (res("verb2", "group2", "resource1"), true),
            ],
        ),
        (
            "subresource expansion",
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["resource1/subresource1"]}),
            vec![
                (res("verb1", "group1", "resource1/subresource1"), true),
                (res("verb1", "group1", "resource1/subresource2"), false),
                (res("verb1", "group1", "resource1"), false),
                (res("verb1", "group1", "resource2/subresource1"), false),
            ],
        ),
        (
            "star nonresource, exact match other",
            json!({"verbs": ["verb1"], "nonResourceURLs": ["*"]}),
            vec![
                (url("verb1", "/foo"), true),
                (url("verb1", "/foo/bar"), true),
                (url("verb2", "/foo"), false),
            ],
        ),
        (
            "star nonresource subpath",
            json!({"verbs": ["verb1"], "nonResourceURLs": ["/foo/*"]}),
            vec![
                (url("verb1", "/foo"), false),
                (url("verb1", "/foo/bar"), true),
                (url("verb1", "/foo/baz"), true),
                (url("verb1", "/foo/bar/one"), true),
                (url("verb1", "/notfoo"), false),
            ],
        ),
        (
            "star verb, exact nonresource",
            json!({"verbs": ["*"], "nonResourceURLs": ["/foo", "/foo/bar/one"]}),
            vec![
                (url("verb1", "/foo"), true),
                (url("verb1", "/foo/bar"), false),
                (url("verb1", "/foo/bar/one"), true),
                (url("verb2", "/foo"), true),
            ],
        ),
        (
            "star subresource",
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]}),
            vec![
                (res("get", "", "pods/status"), true),
                (res("get", "", "nodes/status"), true),
                (res("get", "", "pods"), false),
                (res("get", "", "pods/log"), false),
            ],
        ),
    ];
    for (name, r, requests) in cases {
        let r = rule(r);
        for (a, want) in requests {
            assert_eq!(rule_allows(&a, &r), want, "{name}: {a:?}");
        }
    }
    let named = rule(
        json!({"verbs": ["get"], "apiGroups": [""], "resources": ["leases"], "resourceNames": ["koord-scheduler"]}),
    );
    assert!(rule_allows(
        &Attributes::resource("get", "", "leases", "", "koord-scheduler"),
        &named
    ));
    assert!(!rule_allows(
        &Attributes::resource("get", "", "leases", "", "other"),
        &named
    ));
    assert!(!rule_allows(
        &Attributes::resource("list", "", "leases", "", ""),
        &named
    ));
}

fn store_with(objects: &[(&str, serde_json::Value)]) -> crate::apiserver::store::Store {
    use crate::apiserver::store::{Change, Store};
    let store = Store::temporary(Default::default()).unwrap();
    for (resource, obj) in objects {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let name = obj
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap()
            .to_string();
        let key = (
            "rbac.authorization.k8s.io".to_string(),
            resource.to_string(),
        );
        store
            .commit::<crate::apiserver::store::StoreError>(&key, &ns, &name, |_| {
                Ok(Change::Put(obj.clone()))
            })
            .unwrap();
    }
    store.settle().unwrap();
    store
}

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    }
}

#[test]
fn test_authorizer() {
    let store = store_with(&[
        (
            "clusterroles",
            json!({"metadata": {"name": "admin"}, "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}),
        ),
        (
            "clusterroles",
            json!({"metadata": {"name": "nonresource"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/api*"]}]}),
        ),
        (
            "roles",
            json!({"metadata": {"name": "pod-reader", "namespace": "ns1"}, "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]}),
        ),
        (
            "clusterrolebindings",
            json!({"metadata": {"name": "admins"}, "roleRef": {"kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "User", "name": "admin"}, {"kind": "Group", "name": "admins"}]}),
        ),
        (
            "clusterrolebindings",
            json!({"metadata": {"name": "urls"}, "roleRef": {"kind": "ClusterRole", "name": "nonresource"},
            "subjects": [{"kind": "Group", "name": "system:authenticated"}]}),
        ),
        (
            "rolebindings",
            json!({"metadata": {"name": "read", "namespace": "ns1"}, "roleRef": {"kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "User", "name": "bob"}]}),
        ),
        (
            "rolebindings",
            json!({"metadata": {"name": "admin-in-ns2", "namespace": "ns2"}, "roleRef": {"kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "User", "name": "bob"}]}),
        ),
        (
            "rolebindings",
            json!({"metadata": {"name": "dangling", "namespace": "ns1"}, "roleRef": {"kind": "Role", "name": "missing"},
            "subjects": [{"kind": "User", "name": "carol"}]}),
        ),
    ]);
    let idx = Index::build(&store);
    let sa = user(
        "system:serviceaccount:ns1:sa",
        &["system:serviceaccounts", "system:authenticated"],
    );
    let bob = user("bob", &["system:authenticated"]);
    let ns = |verb: &str, r: &str, ns: &str| Attributes::resource(verb, "", r, ns, "");
    let cases = [
        (user("admin", &[]), ns("delete", "pods", ""), true),
        (
            user("x", &["admins"]),
            Attributes::resource("create", "batch", "jobs", "any", ""),
            true,
        ),
        (sa.clone(), ns("list", "pods", "ns1"), true),
        (sa.clone(), ns("list", "pods", "ns2"), false),
        (sa.clone(), ns("list", "pods", ""), false),
        (sa.clone(), ns("delete", "pods", "ns1"), false),
        (bob.clone(), ns("delete", "secrets", "ns2"), true),
        (bob.clone(), ns("delete", "secrets", "ns1"), false),
        (bob.clone(), url("get", "/apis/apps"), true),
        (bob.clone(), url("get", "/healthz"), false),
        (user("carol", &[]), ns("get", "pods", "ns1"), false),
    ];
    for (u, a, want) in cases {
        assert_eq!(idx.authorize(&u, &a).0, want, "{} {a:?}", u.name);
    }
    let (_, reason) = idx.authorize(&sa, &ns("get", "pods", "ns1"));
    assert_eq!(
        reason,
        "RBAC: allowed by RoleBinding \"read\" of Role \"pod-reader\" in namespace \"ns1\" to User \"system:serviceaccount:ns1:sa\""
    );
}

#[test]
fn aggregated_cluster_roles_take_the_rules_they_select() {
    let objects: Vec<serde_json::Value> = super::super::policy::objects()
        .into_iter()
        .filter(|(r, _, _)| *r == "clusterroles")
        .map(|(_, _, o)| o)
        .collect();
    let roles = resolve_cluster_roles(&objects);
    let admin = &roles["admin"];
    let a = Attributes::resource("list", "apps", "deployments", "x", "");
    assert!(
        admin.iter().any(|r| rule_allows(&a, r)),
        "admin aggregates edit, which aggregates view"
    );
    let rb = Attributes::resource(
        "create",
        "rbac.authorization.k8s.io",
        "rolebindings",
        "x",
        "",
    );
    assert!(admin.iter().any(|r| rule_allows(&rb, r)));
    assert!(!roles["edit"].iter().any(|r| rule_allows(&rb, r)));
    assert!(!roles["view"].iter().any(|r| rule_allows(
        &Attributes::resource("delete", "apps", "deployments", "x", ""),
        r
    )));
}

fn covers(owner: serde_json::Value, servant: serde_json::Value) -> bool {
    let o: Vec<Rule> = serde_json::from_value(owner).unwrap();
    let s: Vec<Rule> = serde_json::from_value(servant).unwrap();
    uncovered(&o, &s).is_empty()
}

#[test]
fn test_covers() {
    let pods_get = json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"]}]);
    let cases = [
        (
            "TestCoversExactMatch",
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"]}]),
            pods_get.clone(),
            true,
        ),
        (
            "TestCoversSubresourceWildcard",
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["*/scale"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["foo/scale"]}]),
            true,
        ),
        (
            "TestCoversMultipleRulesCoveringSingleRule",
            json!([
            {"verbs": ["delete"], "apiGroups": ["v1"], "resources": ["deployments"]},
            {"verbs": ["delete"], "apiGroups": ["v1"], "resources": ["builds"]},
            {"verbs": ["update"], "apiGroups": ["v1"], "resources": ["builds", "deployments"]}]),
            json!([{"verbs": ["delete", "update"], "apiGroups": ["v1"], "resources": ["builds", "deployments"]}]),
            true,
        ),
        (
            "TestCoversMultipleAPIGroupsCoveringSingleRule",
            json!([
            {"verbs": ["delete"], "apiGroups": ["group1"], "resources": ["deployments"]},
            {"verbs": ["delete"], "apiGroups": ["group2"], "resources": ["deployments"]}]),
            json!([{"verbs": ["delete"], "apiGroups": ["group1", "group2"], "resources": ["deployments"]}]),
            true,
        ),
        (
            "TestCoversMultipleRulesMissingSingleVerbResourceCombination",
            json!([
            {"verbs": ["delete", "update"], "apiGroups": ["v1"], "resources": ["deployments"]},
            {"verbs": ["delete"], "apiGroups": ["v1"], "resources": ["builds"]}]),
            json!([{"verbs": ["delete", "update"], "apiGroups": ["v1"], "resources": ["builds", "deployments"]}]),
            false,
        ),
        (
            "TestCoversAPIGroupStarCoveringMultiple",
            json!([{"verbs": ["get"], "apiGroups": ["*"], "resources": ["roles"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["group1", "group2"], "resources": ["roles"]}]),
            true,
        ),
        (
            "TestCoversEnumerationNotCoveringAPIGroupStar",
            json!([{"verbs": ["get"], "apiGroups": ["dummy-group"], "resources": ["roles"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["*"], "resources": ["roles"]}]),
            false,
        ),
        (
            "TestCoversVerbStarCoveringMultiple",
            json!([{"verbs": ["*"], "apiGroups": ["v1"], "resources": ["roles"]}]),
            json!([{"verbs": ["watch", "list"], "apiGroups": ["v1"], "resources": ["roles"]}]),
            true,
        ),
        (
            "TestCoversEnumerationNotCoveringVerbStar",
            json!([{"verbs": ["get", "list", "watch", "create", "update", "delete", "exec"], "apiGroups": ["v1"], "resources": ["roles"]}]),
            json!([{"verbs": ["*"], "apiGroups": ["v1"], "resources": ["roles"]}]),
            false,
        ),
        (
            "TestCoversResourceStarCoveringMultiple",
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["*"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["resourcegroup:deployments"]}]),
            true,
        ),
        (
            "TestCoversResourceNameEmptyCoveringMultiple",
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["pods"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["pods"], "resourceNames": ["foo", "bar"]}]),
            true,
        ),
        (
            "TestCoversEnumerationNotCoveringResourceNameEmpty",
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["pods"], "resourceNames": ["foo", "bar"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["pods"]}]),
            false,
        ),
        (
            "TestCoversNonResourceURLs",
            json!([{"verbs": ["get"], "nonResourceURLs": ["/apis"]}]),
            json!([{"verbs": ["get"], "nonResourceURLs": ["/apis"]}]),
            true,
        ),
        (
            "TestCoversNonResourceURLsStar",
            json!([{"verbs": ["get"], "nonResourceURLs": ["*"]}]),
            json!([{"verbs": ["get"], "nonResourceURLs": ["/apis", "/apis/v1", "/"]}]),
            true,
        ),
        (
            "TestCoversNonResourceURLsStarAfterPrefixDoesntCover",
            json!([{"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}]),
            json!([{"verbs": ["get"], "nonResourceURLs": ["/apis", "/apis/v1"]}]),
            false,
        ),
        (
            "TestCoversNonResourceURLsStarAfterPrefix",
            json!([{"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}]),
            json!([{"verbs": ["get"], "nonResourceURLs": ["/apis/v1", "/apis/v1/foo"]}]),
            true,
        ),
        (
            "TestCoversNonResourceURLsWithOtherFields",
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"], "nonResourceURLs": ["/apis"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"], "nonResourceURLs": ["/apis"]}]),
            true,
        ),
        (
            "TestCoversNonResourceURLsWithOtherFieldsFailure",
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"], "nonResourceURLs": ["/apis"]}]),
            false,
        ),
    ];
    for (name, owner, servant, want) in cases {
        assert_eq!(covers(owner, servant), want, "{name}");
    }
}
