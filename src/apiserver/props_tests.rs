//! Randomized: whatever a client sends, decoding, every patch type, selectors, quantities
//! and names end in a value or an error, never a panic.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::limits;
use super::registry::{Registry, ResourceInfo};
use super::store::Filter;
use crate::api::patch::{self, PatchType};
use crate::api::quantity;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z0-9./%$-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z]{1,6}",
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("status".to_string()),
                    Just("containers".to_string()),
                    Just("$patch".to_string()),
                    Just("$retainKeys".to_string()),
                    Just("$setElementOrder/containers".to_string()),
                    Just("$deleteFromPrimitiveList/finalizers".to_string()),
                    Just("name".to_string()),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_patch_ops() -> impl Strategy<Value = Value> {
    let op = prop::sample::select(vec![
        "add", "remove", "replace", "move", "copy", "test", "x",
    ]);
    let path = "(/[a-z0-9~-]{0,4}){0,4}";
    prop::collection::vec(
        (op, path, path, json_value()).prop_map(
            |(op, path, from, value)| json!({"op": op, "path": path, "from": from, "value": value}),
        ),
        0..5,
    )
    .prop_map(Value::Array)
}

fn infos() -> Vec<ResourceInfo> {
    let r = Registry::with_builtins();
    [
        ("", "pods"),
        ("", "nodes"),
        ("", "configmaps"),
        ("", "namespaces"),
        ("rbac.authorization.k8s.io", "clusterroles"),
    ]
    .iter()
    .filter_map(|(g, res)| r.get(g, res).map(|i| (*i).clone()))
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn decoding_any_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512),
                                       text in "[\\[\\]{}:, \n'\"a-z0-9-]{0,256}") {
        for input in [bytes.as_slice(), text.as_bytes()] {
            if limits::prescan_yaml(input).is_ok()
                && let Ok(v) = serde_yaml::from_slice::<Value>(input)
            {
                let _ = limits::check_body(&v);
            }
            if let Ok(v) = serde_json::from_slice::<Value>(input) {
                let _ = limits::check_body(&v);
            }
        }
    }

    #[test]
    fn every_patch_type_on_any_object_never_panics(doc in json_value(), p in json_value(),
                                                   ops in json_patch_ops(),
                                                   raw in prop::collection::vec(any::<u8>(), 0..64)) {
        let infos = infos();
        let patch_bytes = serde_json::to_vec(&p).unwrap();
        let ops_bytes = serde_json::to_vec(&ops).unwrap();
        for (kind, body) in [
            (PatchType::Merge, patch_bytes.as_slice()),
            (PatchType::Strategic, patch_bytes.as_slice()),
            (PatchType::Json, ops_bytes.as_slice()),
            (PatchType::Merge, raw.as_slice()),
            (PatchType::Apply, patch_bytes.as_slice()),
        ] {
            let Ok(new) = patch::apply(kind, &doc, body) else { continue };
            for info in &infos {
                if limits::check_result(info, "x", &new).is_err() {
                    continue;
                }
                let mut next = new.clone();
                for sub in [None, Some("status")] {
                    if super::semantics::prepare_update(info, &doc, &mut next, sub).is_ok() {
                        let _ = limits::check_object_quantities(info, "x", &next);
                    }
                }
            }
        }
    }

    #[test]
    fn selectors_never_panic(labels in "[a-z0-9=!,()/ .-]{0,40}|\\PC{0,40}",
                             fields in "[a-z.=!,]{0,40}|\\PC{0,40}") {
        let _ = Filter::parse(Some("ns".into()), Some(&labels), Some(&fields));
        let _ = crate::api::selector::Selector::parse(&labels);
    }

    #[test]
    fn quantities_never_panic(s in "[+-]?[0-9.]{0,30}[eEinumkKMGTP]{0,3}[+-]?[0-9]{0,8}|\\PC{0,20}") {
        if let Ok(p) = quantity::parse(&s) {
            let v = quantity::value(&s).unwrap();
            let m = quantity::milli(&s).unwrap();
            // Milli-units round up too, so they are within 1000 of a thousand units.
            prop_assert!(p.capped() || m <= v.saturating_mul(1000), "{s}: {m} {v}");
        }
    }

    #[test]
    fn names_never_panic(name in "[a-z0-9.-]{0,70}|\\PC{0,30}") {
        for info in infos() {
            let _ = limits::check_name(&info, &name);
        }
    }
}
