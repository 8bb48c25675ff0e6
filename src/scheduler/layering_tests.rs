//! The scheduler's own layers, lowest first: `model < framework < plugins < cycle/live`
//! (explain, outside, drives the cycle too). A file may name only scheduler modules of
//! lower layers, or its own; test code (`tests.rs`, `*_tests.rs`, `test_util.rs`, inline
//! `mod tests`) may reach up, as it only builds fixtures.

const LAYERS: &[&[&str]] = &[
    &["model", "features", "access"],
    &["framework"],
    &["plugins"],
    &["compat", "binder"],
    &[
        "config",
        "status_writer",
        "reservation_live",
        "volume_binder",
        "quota_bootstrap",
        "live_sync",
        "live_watch",
    ],
    &["metrics", "queue", "cycle", "live_storage"],
    &["explanation"],
    &["live"],
];

fn layer(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
        .collect()
}

/// The scheduler module a path names, from a file at `module` (its module path inside
/// `scheduler`): `crate::scheduler::x`, or `super::…` climbing out of the file's module.
fn named(module: &[String], rest: &str, absolute: bool) -> Option<String> {
    if absolute {
        return Some(ident(rest)).filter(|n| !n.is_empty());
    }
    let mut at = module.len().checked_sub(1)?;
    let mut rest = rest;
    while let Some(r) = rest.strip_prefix("super::") {
        at = at.checked_sub(1)?;
        rest = r;
    }
    let name = if at == 0 {
        ident(rest)
    } else {
        module[0].clone()
    };
    Some(name).filter(|n| !n.is_empty())
}

/// Scheduler modules a file's non-test code names.
fn uses(module: &[String], text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("mod tests") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        for part in line.split("crate::scheduler::").skip(1) {
            out.extend(named(module, part, true));
        }
        for (i, _) in line.match_indices("super::") {
            let before = &line[..i];
            if before.ends_with("super::") || before.ends_with("crate::") {
                continue;
            }
            out.extend(named(module, &line[i + "super::".len()..], false));
        }
    }
    out
}

/// `scheduler/plugins/numa/mod.rs` → [plugins, numa]; `live_act.rs` (live's `#[path]`
/// child) → [live, act]; `metrics_pods.rs` → [metrics, pods]. `live_watch.rs`,
/// `live_storage.rs` and `live_sync.rs` are modules of their own, below `live`.
fn module_path(rel: &std::path::Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if let Some(child) = parts[0].strip_prefix("live_").map(str::to_string)
        && parts.len() == 1
        && !["watch", "storage", "sync"].contains(&child.as_str())
    {
        parts = vec!["live".into(), child];
    }
    if let Some(child) = parts[0].strip_prefix("metrics_").map(str::to_string)
        && parts.len() == 1
    {
        parts = vec!["metrics".into(), child];
    }
    parts
}

#[test]
fn scheduler_arrows_only_point_down() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scheduler");
    let mut files = Vec::new();
    super::super::layering::sources(&root, &mut files);
    let mut wrong = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy();
        if name.ends_with("tests.rs") || name == "test_util.rs" || rel == "mod.rs" {
            continue;
        }
        let module = module_path(rel);
        let Some(own) = layer(&module[0]) else {
            wrong.push(format!("src/scheduler/{} has no layer", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(&f).unwrap();
        for used in uses(&module, &text) {
            match layer(&used) {
                _ if used == module[0] => {}
                Some(l) if l < own => {}
                Some(_) => wrong.push(format!("{} uses scheduler::{used}", rel.display())),
                // Items of scheduler/mod.rs itself (types, functions), not modules.
                None => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows pointing up or sideways:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn paths_resolve_from_the_file_that_names_them() {
    let p = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cluster = p(&["framework", "cluster"]);
    assert_eq!(
        named(&cluster, "types::NodeInfo", false),
        Some("framework".into())
    );
    assert_eq!(
        named(&cluster, "super::plugins::x", false),
        Some("plugins".into())
    );
    assert_eq!(
        named(&p(&["cycle"]), "framework::X", false),
        Some("framework".into())
    );
    assert_eq!(
        named(&p(&["framework"]), "plugins::x", false),
        Some("plugins".into())
    );
    assert_eq!(
        uses(
            &cluster,
            "use crate::scheduler::plugins::numa;\n// crate::scheduler::live\n"
        ),
        vec!["plugins".to_string()]
    );
    assert_eq!(
        module_path(std::path::Path::new("plugins/numa/mod.rs")),
        p(&["plugins", "numa"])
    );
    assert_eq!(
        module_path(std::path::Path::new("live_act.rs")),
        p(&["live", "act"])
    );
}
