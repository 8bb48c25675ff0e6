//! Cases from kube's `pkg/apis/rbac/validation/validation_test.go`,
//! `pkg/apis/coordination/validation/validation_test.go`,
//! `pkg/apis/core/validation/events_test.go` and
//! `pkg/apis/admissionregistration/validation/validation_test.go`, with their names.

use serde_json::{Value, json};

use super::*;

fn messages(group: &str, resource: &str, obj: &Value, old: Option<&Value>) -> Vec<String> {
    causes(group, resource, obj, old)
        .iter()
        .map(Cause::message)
        .collect()
}

fn rbac(resource: &str, obj: Value) -> Vec<String> {
    let mut obj = obj;
    default_binding(&mut obj);
    messages(RBAC_GROUP, resource, &obj, None)
}

fn crb(role_ref: Value, subjects: Value) -> Value {
    json!({"metadata": {"name": "master"}, "roleRef": role_ref, "subjects": subjects})
}

#[test]
fn test_validate_cluster_role_binding() {
    let good = crb(
        json!({"kind": "ClusterRole", "name": "valid"}),
        json!([{"name": "validsaname", "namespace": "foo", "kind": "ServiceAccount"},
               {"name": "valid@username", "kind": "User"}, {"name": "valid@groupname", "kind": "Group"}]),
    );
    assert_eq!(rbac("clusterrolebindings", good), Vec::<String>::new());
    let cases = [
        (
            "bad group",
            json!({"apiGroup": "rbac.GroupName.foo", "kind": "ClusterRole", "name": "valid"}),
            json!([]),
            "roleRef.apiGroup: Unsupported value: \"rbac.GroupName.foo\": supported values: \"rbac.authorization.k8s.io\"",
        ),
        (
            "bad kind",
            json!({"kind": "Type", "name": "valid"}),
            json!([]),
            "roleRef.kind: Unsupported value: \"Type\": supported values: \"ClusterRole\"",
        ),
        (
            "reference role",
            json!({"kind": "Role", "name": "valid"}),
            json!([]),
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
        ),
        (
            "zero-length name",
            json!({"kind": "ClusterRole"}),
            json!([]),
            "roleRef.name: Required value",
        ),
        (
            "bad path segment name",
            json!({"kind": "ClusterRole", "name": "a/b"}),
            json!([]),
            "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
        ),
        (
            "missing subject name",
            json!({"kind": "ClusterRole", "name": "valid"}),
            json!([{"namespace": "foo", "kind": "ServiceAccount"}]),
            "subjects[0].name: Required value",
        ),
        (
            "bad service account name",
            json!({"kind": "ClusterRole", "name": "valid"}),
            json!([{"namespace": "foo", "name": "valid@username", "kind": "ServiceAccount"}]),
            "subjects[0].name: Invalid value: \"valid@username\": a lowercase RFC 1123 subdomain",
        ),
        (
            "bad subject kind",
            json!({"kind": "ClusterRole", "name": "valid"}),
            json!([{"name": "subject", "kind": "Robot"}]),
            "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
        ),
        (
            "missing SA namespace",
            json!({"kind": "ClusterRole", "name": "valid"}),
            json!([{"name": "good", "kind": "ServiceAccount"}]),
            "subjects[0].namespace: Required value",
        ),
        (
            "bad user api group",
            json!({"kind": "ClusterRole", "name": "valid"}),
            json!([{"name": "u", "kind": "User", "apiGroup": "other"}]),
            "subjects[0].apiGroup: Unsupported value: \"other\": supported values: \"rbac.authorization.k8s.io\"",
        ),
    ];
    for (name, r, subjects, want) in cases {
        let got = rbac("clusterrolebindings", crb(r, subjects));
        assert!(
            got.len() == 1 && got[0].starts_with(want),
            "{name}: {got:?}"
        );
    }
}

#[test]
fn test_validate_role_binding() {
    let mut b = crb(
        json!({"kind": "Role", "name": "valid"}),
        json!([{"name": "validsaname", "kind": "ServiceAccount"}]),
    );
    assert!(
        rbac("rolebindings", b.clone()).is_empty(),
        "a namespaced SA subject needs no namespace"
    );
    assert_eq!(b["roleRef"].get("apiGroup"), None);
    default_binding(&mut b);
    assert_eq!(
        b["roleRef"]["apiGroup"], RBAC_GROUP,
        "roleRef.apiGroup defaulted"
    );
    assert_eq!(
        b["subjects"][0]["apiGroup"], "",
        "a ServiceAccount's group is the core one"
    );
    let sa_group = crb(
        json!({"kind": "Role", "name": "valid"}),
        json!([{"name": "sa", "kind": "ServiceAccount", "apiGroup": "rbac.authorization.k8s.io"}]),
    );
    assert_eq!(
        rbac("rolebindings", sa_group),
        vec![
            "subjects[0].apiGroup: Unsupported value: \"rbac.authorization.k8s.io\": supported values: \"\""
        ]
    );
}

#[test]
fn test_validate_role_binding_update() {
    let old = json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "valid"}});
    let changed = json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "changed"}});
    assert_eq!(
        messages(RBAC_GROUP, "rolebindings", &changed, Some(&old)),
        vec![
            "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"changed\"}: cannot change roleRef"
        ]
    );
    assert!(messages(RBAC_GROUP, "rolebindings", &old, Some(&old)).is_empty());
}

fn role_with(rule: Value) -> Value {
    json!({"metadata": {"name": "default", "namespace": "default"}, "rules": [rule]})
}

#[test]
fn test_validate_role_non_resource_url() {
    let r = role_with(json!({"verbs": ["get"], "nonResourceURLs": ["/*"]}));
    assert!(rbac("clusterroles", r).is_empty());
}

#[test]
fn test_validate_role_namespaced_non_resource_url() {
    let r = role_with(json!({"verbs": ["get"], "nonResourceURLs": ["/*"]}));
    assert_eq!(
        rbac("roles", r),
        vec![
            "rules[0].nonResourceURLs: Invalid value: []string{\"/*\"}: namespaced rules cannot apply to non-resource URLs"
        ]
    );
}

#[test]
fn test_validate_role_non_resource_url_no_verbs() {
    let r = role_with(json!({"verbs": [], "nonResourceURLs": ["/*"]}));
    assert_eq!(
        rbac("clusterroles", r),
        vec!["rules[0].verbs: Required value: verbs must contain at least one value"]
    );
}

#[test]
fn test_validate_role_mixed_non_resource_and_resource() {
    let r = role_with(
        json!({"verbs": ["get"], "nonResourceURLs": ["/*"], "apiGroups": [""], "resources": ["pods"]}),
    );
    assert_eq!(
        rbac("clusterroles", r),
        vec![
            "rules[0].nonResourceURLs: Invalid value: []string{\"/*\"}: rules cannot apply to both regular resources and non-resource URLs"
        ]
    );
}

#[test]
fn test_validate_role_valid_resource() {
    let r = role_with(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}));
    assert!(rbac("roles", r).is_empty());
}

#[test]
fn test_validate_role_no_api_group() {
    let r = role_with(json!({"verbs": ["get"], "resources": ["pods"]}));
    assert_eq!(
        rbac("roles", r),
        vec![
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group"
        ]
    );
}

#[test]
fn test_validate_role_no_resources() {
    let r = role_with(json!({"verbs": ["get"], "apiGroups": [""]}));
    assert_eq!(
        rbac("roles", r),
        vec![
            "rules[0].resources: Required value: resource rules must supply at least one resource"
        ]
    );
}

#[test]
fn test_validate_aggregated_cluster_role() {
    let r = json!({"metadata": {"name": "a"}, "aggregationRule": {"clusterRoleSelectors": []}});
    assert_eq!(
        rbac("clusterroles", r),
        vec![
            "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
        ]
    );
}

#[test]
fn test_validate_lease_spec() {
    let lease = |spec: Value| {
        messages(
            "coordination.k8s.io",
            "leases",
            &json!({"spec": spec}),
            None,
        )
    };
    assert!(
        lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0}))
            .is_empty()
    );
    assert_eq!(
        lease(json!({"leaseDurationSeconds": 0, "leaseTransitions": -1})),
        vec![
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
            "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
        ]
    );
}

#[test]
fn test_validate_event_for_core_v1_events() {
    let ev = |ns: &str, involved: &str| {
        let e = json!({"metadata": {"name": "test1", "namespace": ns},
            "involvedObject": {"namespace": involved}});
        messages("", "events", &e, None)
    };
    assert!(ev("foo", "foo").is_empty(), "same namespace");
    assert!(ev("default", "").is_empty(), "no namespace, default");
    assert_eq!(
        ev("foo", "bar"),
        vec!["involvedObject.namespace: Invalid value: \"bar\": does not match event.namespace"]
    );
    assert_eq!(
        ev("kube-system", ""),
        vec!["involvedObject.namespace: Invalid value: \"\": does not match event.namespace"]
    );
    // A "new" event (eventTime set) names its reporter, action and reason.
    let e = json!({"metadata": {"name": "e", "namespace": "default"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "involvedObject": {"namespace": "default"}, "reason": "r"});
    // An empty reportingController is also not a qualified name, as kube reports.
    let got = messages("", "events", &e, None);
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0], "reportingController: Required value");
    assert_eq!(
        got[1],
        "reportingController: Invalid value: \"\": name part must be non-empty"
    );
    assert_eq!(
        got[3..],
        [
            "reportingInstance: Required value",
            "action: Required value"
        ]
    );
}

#[test]
fn test_validate_event_for_events_v1_events() {
    let good = json!({"metadata": {"name": "e", "namespace": "default"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"namespace": "default"}, "reportingController": "k8s.io/my-controller",
        "reportingInstance": "node-xyz", "action": "Do", "reason": "Yeees", "type": "Normal"});
    assert!(messages("events.k8s.io", "events", &good, None).is_empty());
    let mut bad = good.clone();
    bad["type"] = "Sad".into();
    bad["deprecatedCount"] = 3.into();
    bad["series"] = json!({"count": 1});
    assert_eq!(
        messages("events.k8s.io", "events", &bad, None),
        vec![
            "series.count: Invalid value: \"\": should be at least 2",
            "series.lastObservedTime: Required value",
            "type: Invalid value: \"\": has invalid value: Sad",
            "count: Invalid value: \"\": needs to be unset",
        ]
    );
}

fn hook(v: Value) -> Value {
    let mut h = json!({"name": "webhook.k8s.io", "clientConfig": {"url": "https://example.com"},
        "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "rules": [{"operations": ["CREATE"], "apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"]}]});
    for (k, x) in v.as_object().cloned().unwrap_or_default() {
        h[k] = x;
    }
    h
}

fn validating(hooks: Vec<Value>) -> Vec<String> {
    let config = json!({"metadata": {"name": "config"}, "webhooks": hooks});
    messages(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        &config,
        None,
    )
}

#[test]
fn test_validate_validating_webhook_configuration() {
    assert_eq!(validating(vec![hook(json!({}))]), Vec::<String>::new());
    let cases = [
        (
            "should fail on bad AdmissionReviewVersion value",
            json!({"admissionReviewVersions": ["0v"]}),
            "webhooks[0].admissionReviewVersions[0]: Invalid value: \"0v\": a DNS-1035 label",
        ),
        (
            "should fail on duplicate AdmissionReviewVersion",
            json!({"admissionReviewVersions": ["v1", "v1"]}),
            "webhooks[0].admissionReviewVersions[1]: Invalid value: \"v1\": duplicate version",
        ),
        (
            "should fail on missing AdmissionReviewVersion",
            json!({"admissionReviewVersions": []}),
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        ),
        (
            "should fail on unknown AdmissionReviewVersion",
            json!({"admissionReviewVersions": ["v5"]}),
            "webhooks[0].admissionReviewVersions: Invalid value: []string{\"v5\"}: must include at least one of v1, v1beta1",
        ),
        (
            "webhook name must be fully qualified",
            json!({"name": "webhook"}),
            "webhooks[0].name: Invalid value: \"webhook\": should be a domain with at least three segments separated by dots",
        ),
        (
            "Operations must not be empty or nil",
            json!({"rules": [{"operations": [], "apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"]}]}),
            "webhooks[0].rules[0].operations: Required value",
        ),
        (
            "\"\" is NOT a valid operation",
            json!({"rules": [{"operations": ["CREATE", ""], "apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"]}]}),
            "webhooks[0].rules[0].operations[1]: Unsupported value: \"\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
        ),
        (
            "operation must be either create/update/delete/connect",
            json!({"rules": [{"operations": ["PATCH"], "apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"]}]}),
            "webhooks[0].rules[0].operations[0]: Unsupported value: \"PATCH\"",
        ),
        (
            "wildcard operation cannot be mixed with other strings",
            json!({"rules": [{"operations": ["CREATE", "*"], "apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"]}]}),
            "webhooks[0].rules[0].operations: Invalid value: []string{\"CREATE\", \"*\"}: if '*' is present, must not specify other operations",
        ),
        (
            "wildcard API group cannot be mixed with other strings",
            json!({"rules": [{"operations": ["CREATE"], "apiGroups": ["*", "a"], "apiVersions": ["a"], "resources": ["a"]}]}),
            "webhooks[0].rules[0].apiGroups: Invalid value: []string{\"*\", \"a\"}: if '*' is present, must not specify other API groups",
        ),
        (
            "invalid scope",
            json!({"rules": [{"operations": ["CREATE"], "apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"], "scope": "invalid"}]}),
            "webhooks[0].rules[0].scope: Unsupported value: \"invalid\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
        ),
        (
            "FailurePolicy can only be \"Ignore\" or \"Fail\"",
            json!({"failurePolicy": "other"}),
            "webhooks[0].failurePolicy: Unsupported value: \"other\": supported values: \"Fail\", \"Ignore\"",
        ),
        (
            "SideEffects can only be \"None\" or \"NoneOnDryRun\" when created",
            json!({"sideEffects": "Some"}),
            "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
        ),
        (
            "SideEffects are required",
            json!({"sideEffects": null}),
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        ),
        (
            "both service and URL missing",
            json!({"clientConfig": {}}),
            "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
        ),
        (
            "both service and URL provided",
            json!({"clientConfig": {"url": "https://x.example.com", "service": {"namespace": "ns", "name": "n", "port": 443}}}),
            "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
        ),
        (
            "blank URL",
            json!({"clientConfig": {"url": ""}}),
            "webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified",
        ),
        (
            "wrong scheme",
            json!({"clientConfig": {"url": "http://example.com"}}),
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme",
        ),
        (
            "missing host",
            json!({"clientConfig": {"url": "https:///fancy/webhook"}}),
            "webhooks[0].clientConfig.url: Invalid value: \"https:///fancy/webhook\": host must be specified",
        ),
        (
            "fragment",
            json!({"clientConfig": {"url": "https://example.com/#bookmark"}}),
            "webhooks[0].clientConfig.url: Invalid value: \"https://example.com/#bookmark\": fragments are not permitted in the URL",
        ),
        (
            "query",
            json!({"clientConfig": {"url": "https://example.com?arg=value"}}),
            "webhooks[0].clientConfig.url: Invalid value: \"https://example.com?arg=value\": query parameters are not permitted in the URL",
        ),
        (
            "user",
            json!({"clientConfig": {"url": "https://harry.potter@example.com/"}}),
            "webhooks[0].clientConfig.url: Invalid value: \"https://harry.potter@example.com/\": user information is not permitted in the URL",
        ),
        (
            "path must start with slash",
            json!({"clientConfig": {"service": {"namespace": "ns", "name": "n", "path": "foo", "port": 443}}}),
            "webhooks[0].clientConfig.service.path: Invalid value: \"foo\": must start with a '/'",
        ),
        (
            "path accepts no trailing slash",
            json!({"clientConfig": {"service": {"namespace": "ns", "name": "n", "path": "/foo//", "port": 443}}}),
            "webhooks[0].clientConfig.service.path: Invalid value: \"/foo//\": segment[1] may not be empty",
        ),
        (
            "path fails //",
            json!({"clientConfig": {"service": {"namespace": "ns", "name": "n", "path": "//", "port": 443}}}),
            "webhooks[0].clientConfig.service.path: Invalid value: \"//\": segment[0] may not be empty",
        ),
        (
            "path no non-subdomain",
            json!({"clientConfig": {"service": {"namespace": "ns", "name": "n", "path": "/apis/foo.bar/v1alpha1/--bad", "port": 443}}}),
            "webhooks[0].clientConfig.service.path: Invalid value: \"/apis/foo.bar/v1alpha1/--bad\": segment[3]: a lowercase RFC 1123 subdomain",
        ),
        (
            "invalid port 0",
            json!({"clientConfig": {"service": {"namespace": "ns", "name": "n", "path": "https://apis/foo.bar", "port": 0}}}),
            "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
        ),
        (
            "timeout seconds cannot be greater than 30",
            json!({"timeoutSeconds": 31}),
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        ),
        (
            "timeout seconds cannot be smaller than 1",
            json!({"timeoutSeconds": 0}),
            "webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds",
        ),
    ];
    for (name, change, want) in cases {
        let got = validating(vec![hook(change)]);
        assert!(got.iter().any(|g| g.starts_with(want)), "{name}: {got:?}");
    }
    assert_eq!(
        validating(vec![hook(json!({})), hook(json!({}))]),
        vec!["webhooks[1].name: Duplicate value: \"webhook.k8s.io\""],
        "should fail on duplicate names"
    );
    let mutating = json!({"webhooks": [hook(json!({"reinvocationPolicy": "Sometimes"}))]});
    assert_eq!(
        messages(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            &mutating,
            None
        ),
        vec![
            "webhooks[0].reinvocationPolicy: Unsupported value: \"Sometimes\": supported values: \"IfNeeded\", \"Never\""
        ]
    );
}

#[test]
fn koord_manifests_and_koordinators_chart_rbac_pass() {
    let mut texts = vec![
        include_str!("../../../manifests/base/webhooks.yaml").to_string(),
        include_str!("../../../manifests/base/rbac.yaml").to_string(),
    ];
    let chart =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/koordinator/rbac");
    for f in std::fs::read_dir(chart).unwrap() {
        texts.push(std::fs::read_to_string(f.unwrap().path()).unwrap());
    }
    let mut seen = 0;
    for text in &texts {
        for doc in serde_yaml::Deserializer::from_str(text) {
            let Ok(mut v) = <Value as serde::Deserialize>::deserialize(doc) else {
                continue;
            };
            let (group, resource) = match v["kind"].as_str() {
                Some("MutatingWebhookConfiguration") => (
                    "admissionregistration.k8s.io",
                    "mutatingwebhookconfigurations",
                ),
                Some("ValidatingWebhookConfiguration") => (
                    "admissionregistration.k8s.io",
                    "validatingwebhookconfigurations",
                ),
                Some("Role") => (RBAC_GROUP, "roles"),
                Some("ClusterRole") => (RBAC_GROUP, "clusterroles"),
                Some("RoleBinding") => (RBAC_GROUP, "rolebindings"),
                Some("ClusterRoleBinding") => (RBAC_GROUP, "clusterrolebindings"),
                _ => continue,
            };
            default_binding(&mut v);
            let got = messages(group, resource, &v, None);
            assert!(got.is_empty(), "{}: {got:?}", v["metadata"]["name"]);
            seen += 1;
        }
    }
    assert!(seen > 10, "{seen} objects checked");
}
