use super::*;

fn m(s: &[&str]) -> Module {
    s.iter().map(|x| x.to_string()).collect()
}

fn named(module: &[&str], text: &str) -> Vec<Module> {
    names(&m(module), text).named
}

#[test]
fn crate_and_super_paths_with_groups() {
    let text = "use super::{error::ApiError, store::Store};\nlet x = crate::kernel::http::Body;";
    let got = named(&["apiserver", "semantics"], text);
    assert!(
        got.contains(&m(&["apiserver", "error", "ApiError"])),
        "{got:?}"
    );
    assert!(got.contains(&m(&["apiserver", "store", "Store"])));
    assert!(got.contains(&m(&["kernel", "http", "Body"])));
    let up = named(&["apiserver", "http", "write"], "super::super::store::x");
    assert_eq!(up, [m(&["apiserver", "store", "x"])]);
}

#[test]
fn self_paths_and_nested_groups() {
    let text = "use self::a::{b::{C, d}, e as f};";
    let got = named(&["x"], text);
    assert_eq!(
        got,
        [
            m(&["x", "a", "b", "C"]),
            m(&["x", "a", "b", "d"]),
            m(&["x", "a", "e"])
        ]
    );
}

#[test]
fn bare_child_paths_after_mod() {
    let text = "pub mod nri;\nmod server;\npub struct C { pub nri: nri::Config }\n\
                fn f(server: u8) { server::start(); let nri = 1; }";
    let got = named(&["koordlet", "runtimehooks"], text);
    assert!(
        got.contains(&m(&["koordlet", "runtimehooks", "nri", "Config"])),
        "{got:?}"
    );
    assert!(got.contains(&m(&["koordlet", "runtimehooks", "server", "start"])));
    // A local variable named like a child is not a path; other crates' paths are not ours.
    let text = "mod nri;\nfn f() { let nri = 1; std::mem::drop(nri); k8s_openapi::api::X; }";
    assert!(named(&["a"], text).is_empty(), "{:?}", named(&["a"], text));
}

#[test]
fn reexports_are_followed_not_counted() {
    let said: BTreeMap<Module, FileNames> = [
        (
            m(&["a"]),
            names(
                &m(&["a"]),
                "mod b;\nmod c;\npub use b::Thing;\npub use c::*;",
            ),
        ),
        (m(&["a", "b"]), names(&m(&["a", "b"]), "pub struct Thing;")),
        (m(&["a", "c"]), names(&m(&["a", "c"]), "pub fn other() {}")),
        (
            m(&["d"]),
            names(&m(&["d"]), "use crate::a::{Thing, other};"),
        ),
    ]
    .into_iter()
    .collect();
    let texts: BTreeMap<Module, String> = [
        (
            m(&["a"]),
            "mod b;\nmod c;\npub use b::Thing;\npub use c::*;".to_string(),
        ),
        (m(&["a", "b"]), "pub struct Thing;".to_string()),
        (m(&["a", "c"]), "pub fn other() {}".to_string()),
        (m(&["d"]), String::new()),
    ]
    .into_iter()
    .collect();
    assert!(said[&m(&["a"])].named.is_empty(), "a re-export is no arrow");
    let to: Vec<_> = said[&m(&["d"])]
        .named
        .iter()
        .filter_map(|p| resolve(p, &said, &texts))
        .collect();
    assert_eq!(to, [m(&["a", "b"]), m(&["a", "c"])]);
}

#[test]
fn the_graph_sees_the_koordlet_wiring() {
    let graph = file_graph();
    let of = |s: &[&str]| graph.get(&m(s)).cloned().unwrap_or_default();
    // `runtimehooks/mod.rs` names `nri::Config` bare: an arrow the crate-path reader missed.
    assert!(
        of(&["koordlet", "runtimehooks"]).contains(&m(&["koordlet", "runtimehooks", "nri"])),
        "{:?}",
        of(&["koordlet", "runtimehooks"])
    );
}

#[test]
fn the_descheduler_framework_imports_none_of_its_plugins() {
    // The framework runs plugins through its interface and a registry it is given; the
    // plugins (LowNodeLoad, the upstream ones) use the framework, never the other way.
    let plugin = |m: &Module| {
        m.len() >= 2 && m[0] == "descheduler" && (m[1] == "plugins" || m[1] == "lownodeload")
    };
    let wrong: Vec<String> = file_graph()
        .into_iter()
        .filter(|(from, _)| from.starts_with(&m(&["descheduler", "framework"])))
        .flat_map(|(from, to)| {
            to.into_iter()
                .filter(plugin)
                .map(move |t| format!("{} -> {}", from.join("/"), t.join("/")))
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:?}");
}

#[test]
fn restricted_reexports_are_reexports() {
    for text in [
        "pub(crate) use b::Thing;",
        "pub(super) use b::Thing;",
        "pub(in crate::a) use b::Thing;",
    ] {
        let n = names(&m(&["a"]), &format!("mod b;\n{text}"));
        assert!(n.named.is_empty(), "{text}: {:?}", n.named);
        assert_eq!(
            n.reexports.get("Thing"),
            Some(&m(&["a", "b", "Thing"])),
            "{text}"
        );
    }
    // A private `use` of a child is an arrow.
    let n = names(&m(&["a"]), "mod b;\nuse b::Thing;");
    assert_eq!(n.named, [m(&["a", "b", "Thing"])]);
}
