//! `koord --role=all --embedded` watches each kind once: the roles and the workload
//! controllers share one list+watch per kind through the in-process bus (a role's watch of
//! its own node's objects is served from the same watch). Counted from the embedded API
//! server's request log.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Koord, wait_until};

#[test]
fn all_roles_in_one_process_watch_each_kind_once() {
    let _cpu = common::cpu_exclusive();
    let dir = tempfile::tempdir().unwrap();
    let koord = Koord::embedded(
        dir.path(),
        &["--sim-nodes=1"],
        &[
            ("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false"),
            (
                "KOORD_COMMON__LOG_LEVEL",
                "koord::apiserver::http=debug,warn",
            ),
        ],
    );
    let watches = || -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for line in plain(&koord.logs())
            .lines()
            .filter(|l| l.contains("watch=true"))
        {
            let Some(path) = line
                .split("path=")
                .nth(1)
                .and_then(|p| p.split_whitespace().next())
            else {
                continue;
            };
            *out.entry(path.trim_matches('"').to_string()).or_default() += 1;
        }
        out
    };
    // Every role watches pods, nodes, NodeMetrics and NodeSLOs; wait until all did.
    let kinds = [
        "/api/v1/pods",
        "/api/v1/nodes",
        "/apis/slo.koordinator.sh/v1alpha1/nodemetrics",
    ];
    assert!(
        wait_until(Duration::from_secs(30), || {
            let w = watches();
            kinds.iter().all(|k| w.contains_key(*k))
        }),
        "{}",
        koord.logs()
    );
    std::thread::sleep(Duration::from_secs(3));
    let w = watches();
    let repeated: Vec<_> = w.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        repeated.is_empty(),
        "watched more than once: {repeated:?}\nall: {w:?}"
    );
    drop(koord);
}

/// The log without its colour codes.
fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
