//! Every relative link in README.md, ARCHITECTURE.md and the pages under `docs/` points at a
//! file that exists and, with `#anchor`, at a heading that page has (as GitHub and mdBook
//! name headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files the checks read.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out
}

/// Lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push(line);
        }
    }
    out
}

fn slug(heading: &str) -> String {
    let kept: String = heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .collect();
    kept.replace(' ', "-")
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in prose(text) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let base = slug(title.trim_start_matches('#'));
        let mut name = base.clone();
        let mut n = 0;
        while !out.insert(name.clone()) {
            n += 1;
            name = format!("{base}-{n}");
        }
    }
    out
}

/// `(target, line)` of every `[text](target)` that is not a URL.
fn links(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let end = tail.find(')').unwrap_or(tail.len());
            let target = tail[..end].split_whitespace().next().unwrap_or("");
            if !target.contains("://") && !target.starts_with("mailto:") && !target.is_empty() {
                out.push((target.to_string(), i + 1));
            }
            rest = &tail[end..];
        }
    }
    out
}

/// Checks the page's links; how many it checked.
fn check(page: &Path, bad: &mut Vec<String>) -> usize {
    let text = std::fs::read_to_string(page).unwrap();
    let dir = page.parent().unwrap();
    let prose_text = prose(&text).join("\n");
    let found = links(&prose_text);
    let checked = found.len();
    for (target, line) in found {
        let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let at = if file.is_empty() {
            page.to_path_buf()
        } else {
            dir.join(file)
        };
        let name = format!("{}:{line}: {target}", page.display());
        if !at.exists() {
            bad.push(format!("{name}: no such file"));
            continue;
        }
        let markdown = at.extension().is_some_and(|x| x == "md");
        if !anchor.is_empty() && markdown {
            let text = std::fs::read_to_string(&at).unwrap();
            if !anchors(&text).contains(anchor) {
                bad.push(format!("{name}: no such heading"));
            }
        }
    }
    checked
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut bad = Vec::new();
    let checked: usize = pages().iter().map(|p| check(p, &mut bad)).sum();
    assert!(
        checked > 0,
        "no relative link found: the check reads nothing"
    );
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn headings_are_named_as_github_names_them() {
    let text = "# Why is my pod pending? ScheduleExplanation\n## Trying a configuration (`koord simulate`)\n## Notes\n## Notes\n```\n# not a heading\n```\n";
    let a = anchors(text);
    assert!(
        a.contains("why-is-my-pod-pending-scheduleexplanation"),
        "{a:?}"
    );
    assert!(a.contains("trying-a-configuration-koord-simulate"), "{a:?}");
    assert!(a.contains("notes") && a.contains("notes-1"), "{a:?}");
    assert!(!a.contains("not-a-heading"));
    let l = links("see [a](#x) and [b](docs/y.md#z) and [c](https://e.org/#q)");
    assert_eq!(l, [("#x".to_string(), 1), ("docs/y.md#z".to_string(), 1)]);
}

/// What a reader of the user docs must not meet: the project's issue numbers (they cannot
/// look them up) and work-log narration (a page says what the code does today). The
/// performance history is a log by design; issue numbers stay out of it too.
#[test]
fn user_docs_speak_of_the_code_not_the_work_log() {
    let issue = regex::Regex::new(r"(?i)\bissues? #?\d+|(?:^|[\s(])#\d+\b").unwrap();
    let log = regex::Regex::new(
        r"(?i)\b(this session|last session|next session|the session's|this round|fixed on the way|before this (?:work|change))\b|\bTODO:|\bwas \d[\d,.]*",
    )
    .unwrap();
    let mut bad = Vec::new();
    let user_pages: Vec<PathBuf> = pages()
        .into_iter()
        .filter(|p| !p.ends_with("ARCHITECTURE.md"))
        .collect();
    assert!(user_pages.len() > 20, "{user_pages:?}");
    for page in &user_pages {
        let text = std::fs::read_to_string(page).unwrap();
        let history = page.ends_with("performance-history.md");
        for (n, line) in prose(&text).iter().enumerate() {
            let hit = issue
                .find(line)
                .or_else(|| log.find(line).filter(|_| !history));
            if let Some(m) = hit {
                bad.push(format!(
                    "{}: line {} of its prose: {:?}",
                    page.strip_prefix(root()).unwrap_or(page).display(),
                    n + 1,
                    m.as_str()
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Every page under docs/ is a chapter of the book (a page left out of SUMMARY.md is not
/// in the HTML book), and the book builds when mdbook is installed (`just docs` installs it).
#[test]
fn every_page_is_in_the_book_and_the_book_builds() {
    let summary = std::fs::read_to_string(root().join("docs/SUMMARY.md")).unwrap();
    let docs = root().join("docs");
    let missing: Vec<String> = pages()
        .iter()
        .filter_map(|p| p.strip_prefix(&docs).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p != "SUMMARY.md" && !summary.contains(&format!("]({p})")))
        .collect();
    assert!(missing.is_empty(), "not in docs/SUMMARY.md: {missing:?}");
    if std::process::Command::new("mdbook")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped the build: no mdbook on PATH (`just docs` installs it)");
        return;
    }
    let dest = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("mdbook")
        .arg("build")
        .arg("--dest-dir")
        .arg(dest.path())
        .current_dir(root())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(!log.contains("[ERROR]") && !log.contains("[WARN]"), "{log}");
    for page in [
        "index.html",
        "tour.html",
        "reference/metrics.html",
        "roles/koordlet.html",
    ] {
        assert!(dest.path().join(page).exists(), "{page} missing");
    }
}
