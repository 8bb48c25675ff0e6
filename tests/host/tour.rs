//! The colocation tour of the book (docs/tour.md), run as a reader runs it: koord started
//! with the tour's own command line, then every other `sh` block of the page, in order, in
//! one bash script with kubectl and koord on PATH. Only what must differ on a shared test
//! machine is changed: HOME is a temporary directory (the tour works under `~/koord-tour`),
//! and the API server and admin endpoint take free ports instead of 6443 and 9316.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Koord, free_port, http_get, wait_until};

/// The page's `sh` blocks, in order.
fn blocks(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in page.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(b), "```") => {
                out.push(b.join("\n"));
                current = None;
            }
            (Some(b), _) => b.push(line),
            _ => {}
        }
    }
    out
}

/// The block that starts koord, as the arguments after `koord`, with `~` expanded.
fn start_args(block: &str, home: &Path) -> Option<Vec<String>> {
    let rest = block.trim().strip_prefix("koord ")?;
    let home = home.to_str()?;
    Some(
        rest.split_whitespace()
            .map(|a| a.replace('~', home))
            .collect(),
    )
}

#[test]
fn the_colocation_tour_runs_as_written() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("skipped: no kubectl on PATH");
        return;
    }
    if !common::is_root() {
        eprintln!("skipped: the tour's node runtime needs root for cgroups");
        return;
    }
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/tour.md"))
        .expect("docs/tour.md");
    let all = blocks(&page);
    let home = tempfile::tempdir().unwrap();
    let starts: Vec<usize> = (0..all.len())
        .filter(|i| start_args(&all[*i], home.path()).is_some())
        .collect();
    assert_eq!(starts.len(), 1, "one block starts koord: {all:#?}");
    let (api, admin) = (free_port(), free_port());
    let admin_addr: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    let ports = |text: &str| {
        text.replace("127.0.0.1:9316", &admin_addr.to_string())
            .replace("127.0.0.1:6443", &format!("127.0.0.1:{api}"))
    };
    let _cpu = common::cpu_exclusive();
    // What comes before koord starts (the tour's directory and configuration), then koord.
    let before = all[..starts[0]].join("\n");
    let after: Vec<String> = all[starts[0] + 1..].iter().map(|b| ports(b)).collect();
    let (ok, text) = run(home.path(), home.path(), &before);
    assert!(ok, "the tour failed before koord started:\n{text}");
    let mut args = start_args(&all[starts[0]], home.path()).unwrap();
    args.extend([
        "--embedded-addr".into(),
        format!("127.0.0.1:{api}"),
        "--admin-addr".into(),
        admin_addr.to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let koord = Koord::start(
        &args,
        &[("HOME", home.path().to_str().unwrap())],
        home.path(),
    );
    let ready = wait_until(Duration::from_secs(60), || {
        http_get(admin_addr, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    assert!(ready, "koord not ready:\n{}", koord.logs());
    let script = after
        .iter()
        .enumerate()
        .map(|(i, b)| format!("echo '=== tour block {}'\n{b}", starts[0] + 2 + i))
        .collect::<Vec<_>>()
        .join("\n");
    let tour_dir = home.path().join("koord-tour");
    let out = run(&tour_dir, home.path(), &script);
    if !out.0 {
        panic!("the tour failed:\n{}\n--- koord:\n{}", out.1, koord.logs());
    }
    assert!(out.1.contains("batch-cpu"), "{}", out.1);
    assert!(out.1.contains("evictPodSuccess"), "{}", out.1);
    drop(koord);
}

/// Runs `script` under bash (`-euo pipefail`, each command echoed) in `cwd`, with HOME and
/// PATH set as a reader's shell has them; whether it succeeded, and everything it printed.
fn run(cwd: &Path, home: &Path, script: &str) -> (bool, String) {
    let koord_dir = common::koord_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        koord_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("timeout")
        .args(["600", "bash", "-euxo", "pipefail", "-c", script])
        .current_dir(cwd)
        .env("HOME", home)
        .env("PATH", path)
        .env_remove("KUBECONFIG")
        .output()
        .expect("bash");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
