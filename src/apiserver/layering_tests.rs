//! The API server's own layers, lowest first: storage and the registry at the bottom, the
//! error type above them, the semantics of objects (defaulting, validation, admission),
//! then HTTP, then the controllers that act through HTTP's write paths (namespaces). A file
//! may name only apiserver modules of lower layers, or its own (items of `mod.rs`, the
//! room's top, are not modules). Test code may reach anywhere.

const LAYERS: &[&[&str]] = &[
    &["cause"],
    &["schema", "podspec", "label_keys", "kinds"],
    &[
        "registry",
        "humanize",
        "schemas",
        "proto",
        "fieldmanager",
        "defaults",
        "security",
    ],
    &["store", "table_workloads", "table_storage"],
    &["table_core"],
    &["error", "table", "podgc", "protection"],
    &["sa_admission", "crd_lifecycle"],
    // The PV binder runs the protection controllers' pass after its own.
    &[
        "semantics",
        "limits",
        "objectmeta",
        "openapi",
        "validate",
        "pvbinder",
        "auth",
        "endpoints",
    ],
    &["admission", "bootstrap", "node", "sim"],
    &["http"],
    &["namespaces", "sa_controller", "aggregation", "crd_cleanup"],
];

fn layer(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

#[test]
fn apiserver_arrows_only_point_down() {
    let mut wrong = Vec::new();
    for (from, to) in super::super::layering::file_graph() {
        if from.len() < 2 || from[0] != "apiserver" {
            continue;
        }
        let Some(own) = layer(&from[1]) else {
            wrong.push(format!("apiserver/{} has no layer", from[1]));
            continue;
        };
        for t in to {
            if t.len() < 2 || t[0] != "apiserver" || t[1] == from[1] {
                continue;
            }
            if layer(&t[1]).is_none_or(|l| l >= own) {
                wrong.push(format!("{} uses {}", from.join("/"), t.join("/")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows pointing up or sideways:\n{}",
        wrong.join("\n")
    );
}
