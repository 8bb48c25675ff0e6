//! The import graph between the crate's files, as a reader of every `use` and every path
//! sees it: `crate::`, `super::` and `self::` paths, bare paths through a child module the
//! file declares (`mod nri;` … `nri::Config`), braced groups at any depth, and re-exports
//! followed to the file that defines the item (`pub use plugin::Hooks` in `nri/mod.rs`
//! makes `nri::Hooks` an arrow to `nri/plugin.rs`; the `pub use` itself is naming, not an
//! arrow). Test code (`*tests.rs`, `test_util.rs`, inline `mod tests`) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub(crate) type Module = Vec<String>;
pub(crate) type Graph = BTreeMap<Module, BTreeSet<Module>>;

/// A path as written, and the name `as` gives its leaf.
type Leaf = (Vec<String>, Option<String>);

/// What one file says: the paths it names and the names it re-exports.
#[derive(Default)]
struct FileNames {
    named: Vec<Module>,
    reexports: BTreeMap<String, Module>,
    globs: Vec<Module>,
}

/// `src/a/b/mod.rs` → [a, b]; `src/a/c.rs` → [a, c].
pub(crate) fn module_of(rel: &Path) -> Module {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// A file's text without comment lines and without its inline `mod tests`.
fn code(text: &str) -> String {
    let body = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier at the start of `s` (any case), or "".
fn word(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident_char(c)).unwrap_or(s.len());
    &s[..end]
}

/// The child modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn children(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub")
                .map_or(l, |r| r.trim_start_matches(|c: char| c != ' ' && c != 'm'));
            let rest = l.trim_start().strip_prefix("mod ")?;
            let name = word(rest);
            rest[name.len()..]
                .trim_start()
                .starts_with(';')
                .then(|| name.to_string())
        })
        .collect()
}

/// The paths a `use` tree or an expression path names, one per leaf, as written (with an
/// alias when `as` renames the leaf). `s` starts at the path's first segment; returns the
/// paths and the number of bytes the path took.
fn tree(s: &str) -> (Vec<Leaf>, usize) {
    let mut segs = Vec::new();
    let mut at = 0;
    loop {
        let rest = &s[at..];
        if let Some(group) = rest.strip_prefix('{') {
            let (inner, len) = braced(group);
            let mut out = Vec::new();
            for item in split_top(inner) {
                let item = item.trim();
                let (leaves, _) = tree(item);
                for (mut p, alias) in leaves {
                    if p.first().is_some_and(|f| f == "self") {
                        p.remove(0);
                    }
                    let mut full = segs.clone();
                    full.extend(p);
                    out.push((full, alias));
                }
            }
            return (out, at + 1 + len + 1);
        }
        if rest.starts_with('*') {
            segs.push("*".to_string());
            at += 1;
            break;
        }
        let w = word(rest);
        if w.is_empty() {
            break;
        }
        segs.push(w.to_string());
        at += w.len();
        match s[at..].strip_prefix("::") {
            Some(_) => at += 2,
            None => break,
        }
    }
    let alias = s[at..]
        .trim_start()
        .strip_prefix("as ")
        .map(|r| word(r.trim_start()).to_string());
    (vec![(segs, alias)], at)
}

/// The text inside a brace group (after its `{`) and its length up to the matching `}`.
fn braced(s: &str) -> (&str, usize) {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return (&s[..i], i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    (s, s.len())
}

/// `a, b::{c, d}, e` split at the commas outside braces.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[from..]);
    out
}

/// A path as written, made absolute from the crate root; None for paths outside the crate
/// (other crates, std, local names).
fn absolute(module: &[String], own: &BTreeSet<String>, segs: &[String]) -> Option<Module> {
    let first = segs.first()?;
    let (mut base, mut rest) = match first.as_str() {
        "crate" => (Vec::new(), &segs[1..]),
        "self" => (module.to_vec(), &segs[1..]),
        "super" => (module.to_vec(), segs),
        // A bare name is a child module only as the head of a longer path (`nri::Config`),
        // not a local variable that happens to share the name.
        c if own.contains(c) && segs.len() > 1 => (module.to_vec(), segs),
        _ => return None,
    };
    while let Some(("super", r)) = rest.split_first().map(|(f, r)| (f.as_str(), r)) {
        base.pop();
        rest = r;
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Whether the statement starting at `at` is a re-export (`pub use`, `pub(crate) use`, …).
fn reexport_at(text: &str, at: usize) -> bool {
    let before = text[..at].trim_end();
    let Some(head) = before.strip_suffix("use") else {
        return false;
    };
    let head = head.trim_end();
    if head.ends_with("pub") {
        return true;
    }
    // `pub(crate)`, `pub(super)`, `pub(in path)`: the parenthesis right after `pub`.
    head.strip_suffix(')')
        .and_then(|h| h.rfind("pub(").map(|i| &h[i + 4..]))
        .is_some_and(|inside| {
            inside
                .chars()
                .all(|c| c.is_alphanumeric() || c == ':' || c == ' ' || c == '_')
        })
}

/// Every path a file names, and what it re-exports.
fn names(module: &[String], text: &str) -> FileNames {
    let own = children(text);
    let mut out = FileNames::default();
    let mut at = 0;
    while at < text.len() {
        let c = text[at..].chars().next().unwrap_or(' ');
        let starts = is_ident_char(c)
            && text[..at].chars().last().is_none_or(|p| !is_ident_char(p))
            && !text[..at].ends_with("::");
        if !starts {
            at += c.len_utf8();
            continue;
        }
        let (leaves, len) = tree(&text[at..]);
        let reexport = reexport_at(text, at);
        // `pub(in crate::a)` names where an item is visible, not what the file uses.
        if text[..at].trim_end().ends_with("pub(in") {
            at += len.max(c.len_utf8());
            continue;
        }
        // A lone keyword (`crate` in `pub(crate)`, `self` in `&self`) names nothing.
        for (segs, alias) in leaves.into_iter().filter(|(s, _)| s.len() > 1) {
            let Some(mut abs) = absolute(module, &own, &segs) else {
                continue;
            };
            let glob = abs.last().is_some_and(|l| l == "*");
            if glob {
                abs.pop();
            }
            if !reexport {
                out.named.push(abs);
            } else if glob {
                out.globs.push(abs);
            } else if let Some(name) = alias.or_else(|| segs.last().cloned()) {
                out.reexports.insert(name, abs);
            }
        }
        at += len.max(c.len_utf8());
    }
    out
}

/// Whether a file's text defines an item called `name` (for glob re-exports).
fn defines(text: &str, name: &str) -> bool {
    [
        "fn", "struct", "enum", "trait", "type", "const", "static", "mod",
    ]
    .iter()
    .any(|k| text.contains(&format!("{k} {name}")))
}

/// The import graph between the crate's files (non-test code). An arrow up the module tree
/// (a file to its own room's `mod.rs`, or further up) is not drawn: a room's `mod.rs` holds
/// what its parts share and wires them, so its parts using it is the tree, not a circle.
/// Every other arrow is drawn: down into a child, sideways, across rooms.
pub(crate) fn file_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    crate::layering::sources(&src, &mut files);
    let mut texts = BTreeMap::new();
    for f in files {
        let n = f.file_name().unwrap().to_string_lossy().to_string();
        if n.ends_with("tests.rs") || n == "test_util.rs" {
            continue;
        }
        let module = module_of(f.strip_prefix(&src).unwrap());
        texts.insert(module, code(&std::fs::read_to_string(&f).unwrap()));
    }
    let said: BTreeMap<Module, FileNames> = texts
        .iter()
        .map(|(m, t)| (m.clone(), names(m, t)))
        .collect();
    let mut graph = Graph::new();
    for (module, names) in &said {
        let to = names
            .named
            .iter()
            .filter_map(|p| resolve(p, &said, &texts))
            .filter(|t| t != module && !module.starts_with(t))
            .collect();
        graph.insert(module.clone(), to);
    }
    graph
}

/// The file that defines what a path names: the longest module prefix, followed through
/// that module's re-exports.
fn resolve(
    path: &[String],
    said: &BTreeMap<Module, FileNames>,
    texts: &BTreeMap<Module, String>,
) -> Option<Module> {
    let mut path = path.to_vec();
    for _ in 0..8 {
        let m = (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|m| said.contains_key(m))?;
        let Some(item) = path.get(m.len()) else {
            return Some(m);
        };
        let names = &said[&m];
        let target = names.reexports.get(item).cloned().or_else(|| {
            names.globs.iter().find_map(|g| {
                let text = texts.get(g)?;
                (!defines(&texts[&m], item) && defines(text, item)).then(|| g.clone())
            })
        });
        match target {
            Some(t) if t != path[..=m.len()] => {
                let mut next = t;
                next.extend(path[m.len() + 1..].iter().cloned());
                path = next;
            }
            _ => return Some(m),
        }
    }
    None
}

#[cfg(test)]
#[path = "import_graph_tests.rs"]
mod tests;
