use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::api::quota::ElasticQuota;
use crate::manager::webhook::lookup::Fixed;
use crate::manager::webhook::test_util::{handlers, handlers_with, patched, request};

fn q(name: &str, labels: Value, min: Value, max: Value) -> Value {
    json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {"min": min, "max": max}})
}

fn typed(v: &Value) -> Arc<ElasticQuota> {
    Arc::new(serde_json::from_value(v.clone()).unwrap())
}

/// root ← parent (is-parent, min cpu 10) ← child-a (min cpu 4).
fn tree() -> Fixed {
    Fixed {
        quotas: vec![
            typed(&q(
                "parent",
                json!({LABEL_QUOTA_IS_PARENT: "true", LABEL_QUOTA_TREE_ID: "t1"}),
                json!({"cpu": "10"}),
                json!({"cpu": "20"}),
            )),
            typed(&q(
                "child-a",
                json!({LABEL_QUOTA_PARENT: "parent", LABEL_QUOTA_TREE_ID: "t1"}),
                json!({"cpu": "4"}),
                json!({"cpu": "20"}),
            )),
        ],
        ..Fixed::default()
    }
}

fn validate_op(
    h: &Handlers,
    op: &str,
    obj: Option<Value>,
    old: Option<Value>,
) -> Result<(), String> {
    match validate(h, &request("ElasticQuota", op, "default", obj, old)) {
        Verdict::Deny { message, .. } => Err(message),
        _ => Ok(()),
    }
}

#[test]
fn mutating_defaults() {
    let h = handlers(tree());
    let obj = q(
        "child-b",
        json!({LABEL_QUOTA_PARENT: "parent"}),
        json!({"cpu": "2"}),
        json!({"cpu": "20", "memory": "1Gi"}),
    );
    let out = patched(
        &obj,
        &mutate(
            &h,
            &request("ElasticQuota", "CREATE", "default", Some(obj.clone()), None),
        ),
    );
    assert_eq!(
        out["metadata"]["labels"][LABEL_QUOTA_TREE_ID], "t1",
        "inherited"
    );
    let w: Value = serde_json::from_str(
        out["metadata"]["annotations"][ANNOTATION_QUOTA_SHARED_WEIGHT]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(w, json!({"cpu": "20", "memory": "1Gi"}));
    let bare = q("top", json!({}), json!({}), json!({"cpu": "4"}));
    let out = patched(
        &bare,
        &mutate(
            &h,
            &request(
                "ElasticQuota",
                "CREATE",
                "default",
                Some(bare.clone()),
                None,
            ),
        ),
    );
    assert_eq!(out["metadata"]["labels"][LABEL_QUOTA_PARENT], QUOTA_ROOT);
    let mut weighted = q(
        "w",
        json!({}),
        json!({}),
        json!({"cpu": "4", "memory": "8Gi"}),
    );
    weighted["metadata"]["annotations"] =
        json!({ANNOTATION_QUOTA_SHARED_WEIGHT: r#"{"cpu":"1","gpu":"3"}"#});
    let out = patched(
        &weighted,
        &mutate(
            &h,
            &request(
                "ElasticQuota",
                "CREATE",
                "default",
                Some(weighted.clone()),
                None,
            ),
        ),
    );
    let w: Value = serde_json::from_str(
        out["metadata"]["annotations"][ANNOTATION_QUOTA_SHARED_WEIGHT]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        w,
        json!({"cpu": "1", "memory": "8Gi"}),
        "keys forced to max's"
    );
    let orphan = q(
        "o",
        json!({LABEL_QUOTA_PARENT: "ghost"}),
        json!({}),
        json!({}),
    );
    assert!(
        !mutate(
            &h,
            &request("ElasticQuota", "CREATE", "default", Some(orphan), None)
        )
        .is_allowed()
    );
}

#[test]
fn create_rules() {
    let h = handlers(tree());
    let ok = |labels: Value, min: Value, max: Value| q("new", labels, min, max);
    let p = json!({LABEL_QUOTA_PARENT: "parent", LABEL_QUOTA_TREE_ID: "t1"});
    // (quota, denial containing)
    let cases: Vec<(Value, Option<&str>)> = vec![
        (
            ok(p.clone(), json!({"cpu": "6"}), json!({"cpu": "20"})),
            None,
        ),
        (
            ok(p.clone(), json!({"cpu": "7"}), json!({"cpu": "20"})),
            Some("more than its min 10000m"),
        ),
        (
            ok(p.clone(), json!({"cpu": "-1"}), json!({"cpu": "20"})),
            Some("must not be negative"),
        ),
        (
            ok(p.clone(), json!({"cpu": "30"}), json!({"cpu": "20"})),
            Some("larger than max"),
        ),
        (
            ok(p.clone(), json!({"memory": "1"}), json!({"cpu": "20"})),
            Some("missing from spec.max"),
        ),
        (
            ok(p.clone(), json!({}), json!({"cpu": "20", "memory": "1Gi"})),
            Some("differ from parent"),
        ),
        (
            ok(
                json!({LABEL_QUOTA_PARENT: "child-a", LABEL_QUOTA_TREE_ID: "t1"}),
                json!({}),
                json!({"cpu": "20"}),
            ),
            Some("not a parent quota"),
        ),
        (
            ok(
                json!({LABEL_QUOTA_PARENT: "ghost"}),
                json!({}),
                json!({"cpu": "1"}),
            ),
            Some("does not exist"),
        ),
        (
            ok(
                json!({LABEL_QUOTA_PARENT: "parent", LABEL_QUOTA_TREE_ID: "t2"}),
                json!({}),
                json!({"cpu": "20"}),
            ),
            Some("parent's tree id"),
        ),
        (
            q("child-a", p.clone(), json!({}), json!({"cpu": "20"})),
            Some("already exists"),
        ),
        (
            ok(
                json!({LABEL_QUOTA_PARENT: "parent", LABEL_QUOTA_TREE_ID: "t1", LABEL_QUOTA_ALLOW_FORCE_UPDATE: "true"}),
                json!({"cpu": "9"}),
                json!({"cpu": "20"}),
            ),
            None,
        ),
        (
            ok(json!({}), json!({"cpu": "100"}), json!({"cpu": "100"})),
            None,
        ),
    ];
    drop(h);
    for (obj, want) in cases {
        // Fresh handlers: an allowed create is remembered (see the next test).
        let got = validate_op(&handlers(tree()), "CREATE", Some(obj.clone()), None);
        match want {
            None => assert!(got.is_ok(), "{obj}: {got:?}"),
            Some(w) => assert!(got.as_ref().is_err_and(|e| e.contains(w)), "{obj}: {got:?}"),
        }
    }
}

#[test]
fn admitted_writes_count_before_the_cache_sees_them() {
    let h = handlers(tree());
    let p = json!({LABEL_QUOTA_PARENT: "parent", LABEL_QUOTA_TREE_ID: "t1"});
    validate_op(
        &h,
        "CREATE",
        Some(q("b", p.clone(), json!({"cpu": "3"}), json!({"cpu": "20"}))),
        None,
    )
    .unwrap();
    let e = validate_op(
        &h,
        "CREATE",
        Some(q("c", p, json!({"cpu": "4"}), json!({"cpu": "20"}))),
        None,
    )
    .unwrap_err();
    assert!(e.contains("would need 11000m"), "{e}");
}

#[test]
fn update_and_namespace_rules() {
    let mut f = tree();
    let mut bound = q("bound", json!({}), json!({}), json!({"cpu": "1"}));
    bound["metadata"]["annotations"] = json!({ANNOTATION_QUOTA_NAMESPACES: "[\"ns1\"]"});
    f.quotas.push(typed(&bound));
    let h = handlers(f);
    let parent = q(
        "parent",
        json!({LABEL_QUOTA_IS_PARENT: "true", LABEL_QUOTA_TREE_ID: "t1"}),
        json!({"cpu": "10"}),
        json!({"cpu": "20"}),
    );
    let shrunk = q(
        "parent",
        json!({LABEL_QUOTA_IS_PARENT: "true", LABEL_QUOTA_TREE_ID: "t1"}),
        json!({"cpu": "3"}),
        json!({"cpu": "20"}),
    );
    assert!(
        validate_op(&h, "UPDATE", Some(shrunk), Some(parent.clone()))
            .unwrap_err()
            .contains("sum of the children's min")
    );
    let not_parent = q(
        "parent",
        json!({LABEL_QUOTA_TREE_ID: "t1"}),
        json!({"cpu": "10"}),
        json!({"cpu": "20"}),
    );
    assert!(
        validate_op(&h, "UPDATE", Some(not_parent), Some(parent.clone()))
            .unwrap_err()
            .contains("child quotas")
    );
    let retree = q(
        "parent",
        json!({LABEL_QUOTA_IS_PARENT: "true", LABEL_QUOTA_TREE_ID: "t9"}),
        json!({"cpu": "10"}),
        json!({"cpu": "20"}),
    );
    assert!(
        validate_op(&h, "UPDATE", Some(retree), Some(parent.clone()))
            .unwrap_err()
            .contains("immutable")
    );
    assert!(
        validate_op(&h, "UPDATE", Some(parent.clone()), Some(parent)).is_ok(),
        "unchanged"
    );
    let mut steal = q("new", json!({}), json!({}), json!({"cpu": "1"}));
    steal["metadata"]["annotations"] = json!({ANNOTATION_QUOTA_NAMESPACES: "[\"ns1\"]"});
    assert!(
        validate_op(&h, "CREATE", Some(steal), None)
            .unwrap_err()
            .contains("already bound to quota \"bound\"")
    );
    let root = q(QUOTA_ROOT, json!({}), json!({}), json!({}));
    let root2 = q(QUOTA_ROOT, json!({}), json!({}), json!({"cpu": "1"}));
    assert!(
        validate_op(&h, "UPDATE", Some(root2), Some(root))
            .unwrap_err()
            .contains("cannot be modified")
    );
    let mut strict = q("bound", json!({}), json!({}), json!({"cpu": "1"}));
    strict["metadata"]["annotations"] = json!({ANNOTATION_QUOTA_NAMESPACES: "[\"ns1\"]", ANNOTATION_QUOTA_STRICT_KEYS: "[\"cpu\"]"});
    strict["status"] = json!({"used": {"cpu": "2"}});
    assert!(
        validate_op(&h, "UPDATE", Some(strict), Some(bound))
            .unwrap_err()
            .contains("below used")
    );
}

#[test]
fn deletion_guards() {
    let mut f = tree();
    f.pods.push(Arc::new(serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "x", "labels": {LABEL_QUOTA_NAME: "child-a"}}})).unwrap()));
    let h = handlers(f);
    let del = |name: &str| {
        validate_op(
            &h,
            "DELETE",
            None,
            Some(q(name, json!({}), json!({}), json!({}))),
        )
    };
    assert!(del("parent").unwrap_err().contains("child quotas"));
    assert!(del("child-a").unwrap_err().contains("still has pods"));
    assert!(
        del(QUOTA_DEFAULT)
            .unwrap_err()
            .contains("cannot be deleted")
    );
    assert!(del("ghost").unwrap_err().contains("not known"));
    let h2 = handlers_with(tree(), crate::manager::features::defaults(), 0);
    assert!(
        validate_op(
            &h2,
            "DELETE",
            None,
            Some(q("child-a", json!({}), json!({}), json!({})))
        )
        .is_ok()
    );
}
