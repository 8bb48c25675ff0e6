//! koord: Koordinator rebuilt in Rust as one binary. `--role` picks what a process does;
//! roles share only `kernel`, `os` and `api` (the layering test below keeps it so).

pub mod api;
pub mod apiserver;
pub mod cli;
pub mod config;
pub mod controllers;
pub mod descheduler;
pub mod device_daemon;
pub mod explain;
pub mod kernel;
pub mod koordlet;
pub mod manager;
pub mod manifests;
pub mod noderuntime;
pub mod os;
pub mod run;
pub mod runtime_proxy;
pub mod scheduler;
pub mod simulate;

/// The layers, lowest first: a module may use only modules of strictly lower layers, so
/// there is no import circle and roles never import each other.
#[cfg(test)]
pub(crate) mod layering {
    const LAYERS: &[&[&str]] = &[
        &["api"],
        &["os"],
        &["kernel"],
        &[
            "koordlet",
            "manager",
            "scheduler",
            "descheduler",
            "runtime_proxy",
            "device_daemon",
            "controllers",
        ],
        &["noderuntime"],
        &["apiserver", "explain", "manifests"],
        &["simulate"],
        &["config"],
        &["cli"],
        &["run"],
    ];

    fn layer(m: &str) -> Option<usize> {
        LAYERS.iter().position(|l| l.contains(&m))
    }

    pub(crate) fn sources(path: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        if path.is_dir() {
            for e in std::fs::read_dir(path).unwrap().flatten() {
                sources(&e.path(), out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.to_path_buf());
        }
    }

    /// Top-level modules a file names as `crate::x`, ignoring comments.
    fn uses(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for part in line.split("crate::").skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        }
        out
    }

    #[test]
    fn arrows_only_point_down() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut wrong = Vec::new();
        for entry in std::fs::read_dir(&src).unwrap().flatten() {
            let path = entry.path();
            let Some(module) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .map(str::to_string)
            else {
                continue;
            };
            let Some(own) = layer(&module) else {
                assert!(
                    matches!(module.as_str(), "lib" | "main"),
                    "src/{module} has no layer"
                );
                continue;
            };
            let mut files = Vec::new();
            sources(&path, &mut files);
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap();
                for used in uses(&text) {
                    if used == module {
                        continue;
                    }
                    match layer(&used) {
                        Some(l) if l < own => {}
                        _ => wrong.push(format!("{} uses crate::{used}", f.display())),
                    }
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "arrows pointing up or sideways:\n{}",
            wrong.join("\n")
        );
    }

    /// An identifier's leading characters (module names).
    pub(crate) fn ident(s: &str) -> String {
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    }

    /// A file's text without comment lines and without its inline `mod tests`.
    fn code(text: &str) -> String {
        let body = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
        body.lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The paths a file names through `crate::` and `super::` (braced groups expanded one
    /// level), as module paths from the crate root.
    fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        // `super` of `a/b/mod.rs` ([a, b]) and of `a/b.rs` ([a, b]) is [a] alike.
        let parent: Vec<String> = module[..module.len().saturating_sub(1)].to_vec();
        let mut rest = text;
        while let Some(at) = rest.find(['c', 's']) {
            let tail = &rest[at..];
            let boundary = rest[..at]
                .chars()
                .last()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let (mut base, after) = if boundary && tail.starts_with("crate::") {
                (Vec::new(), &tail["crate::".len()..])
            } else if boundary && tail.starts_with("super::") {
                let mut b = parent.clone();
                let mut t = &tail["super::".len()..];
                while let Some(r) = t.strip_prefix("super::") {
                    b.pop();
                    t = r;
                }
                (b, t)
            } else {
                rest = &rest[at + 1..];
                continue;
            };
            let mut t = after;
            loop {
                let id = ident(t);
                if id.is_empty() {
                    break;
                }
                base.push(id.clone());
                t = &t[id.len()..];
                match t.strip_prefix("::") {
                    Some(r) => t = r,
                    None => break,
                }
            }
            if let Some(group) = t.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let mut p = base.clone();
                    for seg in item.trim().split("::") {
                        let id = ident(seg.trim());
                        if id.is_empty() || id == "self" {
                            break;
                        }
                        p.push(id);
                    }
                    out.push(p);
                }
            }
            out.push(base);
            rest = t;
        }
        out
    }

    /// `src/a/b/mod.rs` → [a, b]; `src/a/c.rs` → [a, c].
    fn module_of(rel: &std::path::Path) -> Vec<String> {
        let mut parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
            parts.pop();
        }
        parts
    }

    /// The import graph between the crate's files (non-test code): an arrow for every
    /// `crate::`/`super::` path, to the file that defines the longest prefix of it.
    pub(crate) fn file_graph()
    -> std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<Vec<String>>> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let files: Vec<_> = files
            .into_iter()
            .filter(|f| {
                let n = f.file_name().unwrap().to_string_lossy();
                !n.ends_with("tests.rs") && n != "test_util.rs"
            })
            .collect();
        let modules: std::collections::BTreeSet<Vec<String>> = files
            .iter()
            .map(|f| module_of(f.strip_prefix(&src).unwrap()))
            .collect();
        let mut graph = std::collections::BTreeMap::new();
        for f in &files {
            let rel = f.strip_prefix(&src).unwrap();
            let module = module_of(rel);
            let text = code(&std::fs::read_to_string(f).unwrap());
            let mut to = std::collections::BTreeSet::new();
            for p in named_paths(&module, &text) {
                let target = (1..=p.len())
                    .rev()
                    .map(|n| p[..n].to_vec())
                    .find(|m| modules.contains(m));
                if let Some(t) = target.filter(|t| *t != module) {
                    to.insert(t);
                }
            }
            graph.insert(module, to);
        }
        graph
    }

    #[test]
    fn no_import_circles_between_files() {
        let graph = file_graph();
        // Every file that reaches itself again, with the way back.
        let mut circles = Vec::new();
        for start in graph.keys() {
            let mut seen = std::collections::BTreeSet::new();
            let mut stack = vec![(start.clone(), vec![start.join("/")])];
            while let Some((at, way)) = stack.pop() {
                for next in graph.get(&at).into_iter().flatten() {
                    if next == start {
                        circles.push(way.join(" -> ") + " -> " + &start.join("/"));
                    } else if seen.insert(next.clone()) {
                        let mut w = way.clone();
                        w.push(next.join("/"));
                        stack.push((next.clone(), w));
                    }
                }
            }
        }
        assert!(
            circles.is_empty(),
            "import circles:\n{}",
            circles.join("\n")
        );
    }

    #[test]
    fn paths_resolve_to_files() {
        let m = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let text =
            "use super::{error::ApiError, store::Store};\nlet x = crate::kernel::http::Body;";
        let named = named_paths(&m(&["apiserver", "semantics"]), text);
        // Paths stop at the first item (a type), enough to find the file.
        assert!(named.contains(&m(&["apiserver", "error"])), "{named:?}");
        assert!(named.contains(&m(&["apiserver", "store"])));
        assert!(named.contains(&m(&["kernel", "http"])));
        let up = named_paths(
            &m(&["apiserver", "http", "write"]),
            "super::super::store::x",
        );
        assert_eq!(up, [m(&["apiserver", "store", "x"])]);
    }
}
