//! koord: Koordinator rebuilt in Rust as one binary. `--role` picks what a process does;
//! roles share only `kernel`, `os` and `api` (the layering test below keeps it so).

pub mod api;
pub mod apiserver;
pub mod cli;
pub mod config;
pub mod controllers;
pub mod descheduler;
pub mod device_daemon;
pub mod docs;
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

#[cfg(test)]
mod import_graph;

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
        &["docs"],
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
                    // The import graph's reader is test code of the crate root.
                    matches!(
                        module.as_str(),
                        "lib" | "main" | "import_graph" | "import_graph_tests"
                    ),
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

    pub(crate) use crate::import_graph::file_graph;

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
}
