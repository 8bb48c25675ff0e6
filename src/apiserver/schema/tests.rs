//! Cases ported from apiextensions-apiserver's own tables (names kept):
//! `pruning/algorithm_test.go` TestPrune, `defaulting/algorithm_test.go` TestDefault,
//! `defaulting/prunenulls_test.go`, and kube-openapi's validation messages as
//! kube-apiserver returns them.

use serde_json::{Value, json};

use super::*;

fn schema(v: Value) -> Schema {
    compile(&v).unwrap()
}

fn pruned(input: &str, s: Value, root: bool) -> (Value, Vec<String>) {
    let mut v: Value = serde_json::from_str(input).unwrap();
    let mut p = prune(&mut v, &schema(s), root);
    p.sort();
    (v, p)
}

#[test]
fn test_prune() {
    type Case = (
        &'static str,
        &'static str,
        Value,
        bool,
        &'static str,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        ("scalar", "4", json!({}), false, "4", vec![]),
        (
            "scalar array",
            "[1,2]",
            json!({"items": {}}),
            false,
            "[1,2]",
            vec![],
        ),
        (
            "object array",
            r#"[{"a":1},{"b":1},{"a":1,"b":2,"c":3}]"#,
            json!({"items": {"properties": {"a": {}, "c": {}}}}),
            false,
            r#"[{"a":1},{},{"a":1,"c":3}]"#,
            vec!["[1].b", "[2].b"],
        ),
        (
            "object array object",
            r#"{"array":[{"a":1},{"b":1},{"a":1,"b":2,"c":3}],"unspecified":{"a":1},"specified":{"a":1,"b":2,"c":3}}"#,
            json!({"properties": {
                "array": {"items": {"properties": {"a": {}, "c": {}}}},
                "specified": {"properties": {"a": {}, "c": {}}}}}),
            false,
            r#"{"array":[{"a":1},{},{"a":1,"c":3}],"specified":{"a":1,"c":3}}"#,
            vec!["array[1].b", "array[2].b", "specified.b", "unspecified"],
        ),
        (
            "additionalProperties with schema",
            r#"{"a":1,"b":1,"c":{"a":1,"b":2,"c":{"a":1}}}"#,
            json!({"properties": {"a": {}, "c": {"additionalProperties": {"type": "integer"}}}}),
            false,
            r#"{"a":1,"c":{"a":1,"b":2,"c":{}}}"#,
            vec!["b", "c.c.a"],
        ),
        (
            "additionalProperties with bool",
            r#"{"a":1,"b":1,"c":{"a":1,"b":2,"c":{"a":1, "apiVersion": "unknown"}}}"#,
            json!({"properties": {"a": {}, "c": {"additionalProperties": false}}}),
            false,
            r#"{"a":1,"c":{"a":1,"b":2,"c":{}}}"#,
            vec!["b", "c.c.a", "c.c.apiVersion"],
        ),
    ];
    let mut nil: Value = serde_json::from_str(r#"[{"a":1},{"b":1},{"a":1,"b":2,"c":3}]"#).unwrap();
    let mut p = Vec::new();
    prune::prune_at(&mut nil, None, false, &mut Vec::new(), &mut p);
    assert_eq!(nil, json!([{}, {}, {}]), "object array with nil schema");
    assert_eq!(p, vec!["[0].a", "[1].b", "[2].a", "[2].b", "[2].c"]);
    for (name, input, s, root, want, want_pruned) in cases {
        let (got, p) = pruned(input, s, root);
        let want: Value = serde_json::from_str(want).unwrap();
        assert_eq!(got, want, "{name}");
        assert_eq!(p, want_pruned, "{name}");
    }
}

fn preserve_case_schema() -> Value {
    let obj = json!({"type": "object"});
    let keep = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let inner = json!({"type": "object", "properties": {"preserving": keep, "pruning": obj}});
    let map_values = json!({"type": "object", "properties": {"specified": {"type": "object"}}});
    json!({
        "type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "alpha": {"type": "string"}, "beta": {"type": "number"},
            "pruning": inner,
            "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                           "properties": {"preserving": keep, "pruning": obj}},
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "additionalProperties": map_values},
            "preservingAdditionalPropertiesKeyPruneValues": {
                "type": "object", "additionalProperties": map_values},
        }
    })
}

#[test]
fn test_prune_nested_x_kubernetes_preserve_unknown_fields() {
    let input = r#"{"unspecified":"bar","alpha":"abc","beta":42.0,"unspecifiedObject":{"unspecified":"bar"},
      "pruning":{"unspecified":"bar","unspecifiedObject":{"unspecified":"bar"},"pruning":{"unspecified":"bar"},"apiVersion":"unknown","preserving":{"unspecified":"bar"}},
      "preserving":{"unspecified":"bar","unspecifiedObject":{"unspecified":"bar"},"pruning":{"unspecified":"bar"},"preserving":{"unspecified":"bar"}},
      "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields":{"foo":{"specified":{"unspecified":"bar"},"unspecified":"bar"}},
      "preservingAdditionalPropertiesKeyPruneValues":{"foo":{"specified":{"unspecified":"bar"},"unspecified":"bar"}}}"#;
    let want = json!({"unspecified":"bar","alpha":"abc","beta":42.0,"unspecifiedObject":{"unspecified":"bar"},
      "pruning":{"pruning":{},"preserving":{"unspecified":"bar"}},
      "preserving":{"unspecified":"bar","unspecifiedObject":{"unspecified":"bar"},"pruning":{},"preserving":{"unspecified":"bar"}},
      "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields":{"foo":{"specified":{}}},
      "preservingAdditionalPropertiesKeyPruneValues":{"foo":{"specified":{}}}});
    let (got, p) = pruned(input, preserve_case_schema(), false);
    assert_eq!(got, want);
    assert_eq!(
        p,
        vec![
            "preserving.pruning.unspecified",
            "preservingAdditionalPropertiesKeyPruneValues.foo.specified.unspecified",
            "preservingAdditionalPropertiesKeyPruneValues.foo.unspecified",
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.specified.unspecified",
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.unspecified",
            "pruning.apiVersion",
            "pruning.pruning.unspecified",
            "pruning.unspecified",
            "pruning.unspecifiedObject",
        ]
    );
}

fn embedded_input() -> &'static str {
    r#"{"apiVersion":"foo/v1","kind":"Foo","metadata":{"name":"instance","unspecified":"bar"},"unspecified":"bar",
      "pruned":{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{"name":"instance","unspecified":"bar"},"spec":{"unspecified":"bar"}},
      "preserving":{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{"name":"instance","unspecified":"bar"},"spec":{"unspecified":"bar"}},
      "nested":{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{"name":"instance","unspecified":"bar"},
        "spec":{"unspecified":"bar","embedded":{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{"name":"instance","unspecified":"bar"},"spec":{"unspecified":"bar"}}}}}"#
}

fn embedded_schema() -> Value {
    let obj = json!({"type": "object"});
    let embedded_spec = json!({"type": "object", "x-kubernetes-embedded-resource": true,
                               "properties": {"spec": obj}});
    json!({"type": "object", "properties": {
        "pruned": embedded_spec,
        "preserving": {"type": "object", "x-kubernetes-embedded-resource": true,
                       "x-kubernetes-preserve-unknown-fields": true},
        "nested": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
            "spec": {"type": "object", "properties": {"embedded": embedded_spec}}}},
    }})
}

#[test]
fn test_prune_x_kubernetes_embedded_resource() {
    let embedded = |spec: Value| json!({"apiVersion":"foo/v1","kind":"Foo","metadata":{"name":"instance","unspecified":"bar"},"spec":spec});
    let mut preserving = embedded(json!({"unspecified": "bar"}));
    preserving["unspecified"] = "bar".into();
    let body = |v: &mut Value| {
        v["pruned"] = embedded(json!({}));
        v["preserving"] = preserving.clone();
        v["nested"] = embedded(json!({"embedded": embedded(json!({}))}));
    };
    let pruned_paths = vec![
        "nested.spec.embedded.spec.unspecified",
        "nested.spec.embedded.unspecified",
        "nested.spec.unspecified",
        "nested.unspecified",
        "pruned.spec.unspecified",
        "pruned.unspecified",
        "unspecified",
    ];
    // "x-kubernetes-embedded-resource": the root is not a resource, so its type fields go.
    let (got, p) = pruned(embedded_input(), embedded_schema(), false);
    let mut want = json!({});
    body(&mut want);
    assert_eq!(got, want);
    let mut not_root = pruned_paths.clone();
    not_root.extend(["apiVersion", "kind", "metadata"]);
    not_root.sort();
    assert_eq!(p, not_root);
    // "x-kubernetes-embedded-resource, with root=true"
    let (got, p) = pruned(embedded_input(), embedded_schema(), true);
    let mut want = json!({"apiVersion":"foo/v1","kind":"Foo","metadata":{"name":"instance","unspecified":"bar"}});
    body(&mut want);
    assert_eq!(got, want);
    assert_eq!(p, pruned_paths);
}

fn defaulted(input: &str, s: Value) -> Value {
    let mut v: Value = serde_json::from_str(input).unwrap();
    let s = schema(s);
    drop_nulls(&mut v, &s);
    default(&mut v, &s);
    v
}

#[test]
fn test_default() {
    let abc = json!({"properties": {"a": {"default": "A"}, "b": {"default": "B"}, "c": {"default": "C"}}});
    let cases: Vec<(&str, &str, Value, Value)> = vec![
        ("scalar", "4", json!({"default": "foo"}), json!(4)),
        (
            "scalar array",
            "[1,2]",
            json!({"items": {"default": "foo"}}),
            json!([1, 2]),
        ),
        (
            "object array",
            r#"[{"a":1},{"b":1},{"c":1}]"#,
            json!({"items": abc}),
            json!([{"a":1,"b":"B","c":"C"},{"a":"A","b":1,"c":"C"},{"a":"A","b":"B","c":1}]),
        ),
        (
            "object array object",
            r#"{"array":[{"a":1},{"b":2}],"object":{"a":1},"additionalProperties":{"x":{"a":1},"y":{"b":2}}}"#,
            json!({"properties": {
                "array": {"items": {"properties": {"a": {"default": "A"}, "b": {"default": "B"}}}},
                "object": {"properties": {"a": {"default": "N"}, "b": {"default": "O"}}},
                "additionalProperties": {"additionalProperties": {"properties": {
                    "a": {"default": "alpha"}, "b": {"default": "beta"}}}},
                "foo": {"default": "bar"}}}),
            json!({"array":[{"a":1,"b":"B"},{"a":"A","b":2}],"object":{"a":1,"b":"O"},
                   "additionalProperties":{"x":{"a":1,"b":"beta"},"y":{"a":"alpha","b":2}},"foo":"bar"}),
        ),
        (
            "empty and null",
            r#"[{},{"a":1},{"a":0},{"a":0.0},{"a":""},{"a":null},{"a":[]},{"a":{}}]"#,
            json!({"items": {"properties": {"a": {"default": "A"}}}}),
            json!([{"a":"A"},{"a":1},{"a":0},{"a":0.0},{"a":""},{"a":"A"},{"a":[]},{"a":{}}]),
        ),
        (
            "null in nullable list",
            "[null]",
            json!({"nullable": true, "items": {"properties": {"a": {"default": "A"}}}}),
            json!([null]),
        ),
        (
            "null in non-nullable list",
            "[null]",
            json!({"items": {"default": "A"}}),
            json!(["A"]),
        ),
        (
            "null in nullable object",
            r#"{"a": null}"#,
            json!({"properties": {"a": {"nullable": true, "default": "A"}}}),
            json!({"a": null}),
        ),
        (
            "null in non-nullable object",
            r#"{"a": null}"#,
            json!({"properties": {"a": {"default": "A"}}}),
            json!({"a": "A"}),
        ),
        (
            "null in nullable object with additionalProperties",
            r#"{"a": null}"#,
            json!({"additionalProperties": {"nullable": true, "default": "A"}}),
            json!({"a": null}),
        ),
        (
            "null in non-nullable object with additionalProperties",
            r#"{"a": null}"#,
            json!({"additionalProperties": {"default": "A"}}),
            json!({"a": "A"}),
        ),
        (
            "null unknown field",
            r#"{"a": null}"#,
            json!({"additionalProperties": true}),
            json!({"a": null}),
        ),
    ];
    for (name, input, s, want) in cases {
        assert_eq!(defaulted(input, s), want, "{name}");
    }
}

#[test]
fn test_prune_non_nullable_nulls_without_defaults() {
    let s = json!({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "string", "nullable": true},
        "c": {"type": "string", "default": "C"},
        "m": {"type": "object", "additionalProperties": {"type": "string"}}}});
    let got = defaulted(r#"{"a": null, "b": null, "c": null, "m": {"x": null}}"#, s);
    assert_eq!(got, json!({"b": null, "c": "C", "m": {}}));
}

fn reservation_schema() -> Schema {
    schema(json!({"type": "object", "properties": {"spec": {
        "type": "object", "required": ["owners", "template"],
        "properties": {
            "ttl": {"type": "string"},
            "owners": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string", "minLength": 1}}}},
            "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "allocateOnce": {"type": "boolean", "default": true},
            "priority": {"type": "integer", "minimum": 0, "maximum": 100},
            "policy": {"type": "string", "enum": ["Aligned", "Restricted"]},
            "size": {"x-kubernetes-int-or-string": true, "pattern": "^[0-9]+[KMG]?$"},
            "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set",
                     "items": {"type": "string", "maxLength": 5}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "required": ["name"],
                                "properties": {"name": {"type": "string"}}}},
            "at": {"type": "string", "format": "date-time"}}}}}))
}

fn messages(v: &Value, old: Option<&Value>) -> Vec<String> {
    let mut m: Vec<String> = validate(v, &reservation_schema(), old)
        .iter()
        .map(crate::apiserver::cause::Cause::message)
        .collect();
    m.sort();
    m
}

#[test]
fn every_cause_with_kube_openapi_wording() {
    let bad = json!({"spec": {"ttl": 12, "owners": "everyone", "template": 5}});
    assert_eq!(
        messages(&bad, None),
        vec![
            "spec.owners: Invalid value: \"string\": spec.owners in body must be of type array: \"string\"",
            "spec.template: Invalid value: \"integer\": spec.template in body must be of type object: \"integer\"",
            "spec.ttl: Invalid value: \"integer\": spec.ttl in body must be of type string: \"integer\"",
        ]
    );
    assert_eq!(
        messages(&json!({"spec": {}}), None),
        vec![
            "spec.owners: Required value",
            "spec.template: Required value"
        ]
    );
    let bad = json!({"spec": {"owners": [{"name": ""}], "template": {}, "priority": 101,
        "policy": "Loose", "size": "12X", "tags": ["a", "a", "toolong"],
        "ports": [{"name": "x"}, {"name": "x"}], "at": "yesterday"}});
    assert_eq!(
        messages(&bad, None),
        vec![
            "spec.at: Invalid value: \"yesterday\": spec.at in body must be of type date-time: \"yesterday\"",
            "spec.owners[0].name: Invalid value: \"\": spec.owners[0].name in body should be at least 1 chars long",
            "spec.policy: Unsupported value: \"Loose\": supported values: \"Aligned\", \"Restricted\"",
            "spec.ports[1]: Duplicate value: map[string]interface {}{\"name\":\"x\"}",
            "spec.priority: Invalid value: 101: spec.priority in body should be less than or equal to 100",
            "spec.size: Invalid value: \"12X\": spec.size in body should match '^[0-9]+[KMG]?$'",
            "spec.tags: Too many: 3: must have at most 2 items",
            "spec.tags[1]: Duplicate value: \"a\"",
            "spec.tags[2]: Too long: may not be more than 5 bytes",
        ]
    );
    let ok = json!({"spec": {"owners": [], "template": {"x": 1}, "size": 5, "at": "2026-12-02T01:02:03Z"}});
    assert!(messages(&ok, None).is_empty());
}

#[test]
fn ratcheting_lets_unchanged_invalid_fields_be() {
    let old = json!({"spec": {"owners": [], "template": {}, "priority": 500, "policy": "Loose"}});
    let mut new = old.clone();
    new["spec"]["ttl"] = "1h".into();
    assert!(
        messages(&new, Some(&old)).is_empty(),
        "unchanged fields ratchet"
    );
    new["spec"]["priority"] = 600.into();
    assert_eq!(
        messages(&new, Some(&old)),
        vec![
            "spec.priority: Invalid value: 600: spec.priority in body should be less than or equal to 100"
        ]
    );
    assert_eq!(messages(&new, None).len(), 2, "a create does not ratchet");
}

#[test]
fn structural_schema_rules() {
    let crd = |s: Value| {
        json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": s}}]}})
    };
    let msgs = |s: Value| -> Vec<String> {
        check_crd(&crd(s), None)
            .iter()
            .map(|c| c.message())
            .collect()
    };
    assert!(msgs(json!({"type": "object", "properties": {"spec": {"type": "object"}}})).is_empty());
    let at = "spec.versions[0].schema.openAPIV3Schema";
    assert_eq!(
        msgs(json!({"properties": {"spec": {"properties": {"a": {"type": "array"}}}}})),
        vec![
            format!("{at}.type: Required value: must not be empty at the root"),
            format!(
                "{at}.properties[spec].type: Required value: must not be empty for specified object fields"
            ),
            format!("{at}.properties[spec].properties[a].items: Required value: must be specified"),
        ]
    );
    assert_eq!(
        msgs(json!({"type": "object", "properties": {"a": {"type": "integer", "default": "x"}}})),
        vec![format!(
            "{at}.properties[a].default: Invalid value: \"string\": {at}.properties[a].default in body must be of type integer: \"string\""
        )]
    );
    assert!(
        msgs(json!({"type": "object", "properties": {"a": {"type": "object", "$ref": "#/x"}}}))
            .contains(&format!(
                "{at}.properties[a].$ref: Forbidden: $ref is not supported"
            ))
    );
    let two = json!({"spec": {"versions": [{"name": "v1", "storage": true}, {"name": "v2", "storage": true}]}});
    assert!(
        check_crd(&two, None)[0]
            .message()
            .contains("exactly one version marked as storage")
    );
    let old = json!({"status": {"storedVersions": ["v1beta1"]}});
    let msgs: Vec<String> = check_crd(&crd(json!({"type": "object"})), Some(&old))
        .iter()
        .map(|c| c.message())
        .collect();
    assert_eq!(
        msgs,
        vec!["status.storedVersions[0]: Invalid value: \"v1beta1\": must appear in spec.versions"]
    );
}

#[test]
fn date_time_formats_kube_accepts() {
    for ok in [
        "2026-12-02T01:02:03Z",
        "2026-12-02T01:02:03.123456+01:00",
        "2026-12-02T01:02",
        "2026-12-02 01:02:03",
    ] {
        assert!(formats::format_ok("date-time", ok), "{ok}");
    }
    for bad in [
        "2026-12-02",
        "yesterday",
        "2026-13-02T01:02:03Z",
        "2026-12-02T1:02:03Z",
    ] {
        assert!(!formats::format_ok("date-time", bad), "{bad}");
    }
}

fn crd_files(dir: &str) -> Vec<(String, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if !v.is_null() {
                out.push((path.display().to_string(), v));
            }
        }
    }
    out
}

/// Every CRD koord ships and every CRD of Koordinator's chart v1.8.0 is structural and
/// compiles; what koord's manager writes into a NodeSLO passes both.
#[test]
fn koord_and_koordinator_crds_are_structural() {
    let mut nodeslo = Vec::new();
    for dir in ["manifests/base/crds", "tests/fixtures/koordinator/crds"] {
        let crds = crd_files(dir);
        assert!(crds.len() >= 10, "{dir}");
        for (file, crd) in crds {
            let causes: Vec<String> = check_crd(&crd, None).iter().map(|c| c.message()).collect();
            assert!(causes.is_empty(), "{file}: {causes:?}");
            for v in crd["spec"]["versions"].as_array().unwrap() {
                let s = compile(&v["schema"]["openAPIV3Schema"]).unwrap();
                if crd["spec"]["names"]["kind"] == "NodeSLO" {
                    nodeslo.push((file.clone(), s));
                }
            }
        }
    }
    assert_eq!(nodeslo.len(), 2);
    let node: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    let cfg = crate::api::sloconfig::SloConfig::default();
    let spec = crate::manager::controllers::nodeslo::desired_spec(&cfg, &node);
    let obj = json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
        "metadata": {"name": "n1"}, "spec": serde_json::to_value(spec).unwrap()});
    for (file, s) in nodeslo {
        let mut v = obj.clone();
        prune(&mut v, &s, true);
        default(&mut v, &s);
        let causes: Vec<String> = validate(&v, &s, None).iter().map(|c| c.message()).collect();
        assert!(causes.is_empty(), "{file}: {causes:?}");
    }
}
