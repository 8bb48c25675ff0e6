//! The history check at CI size: 4 clients and 2 watchers on 6 ConfigMaps through 4
//! lifetimes of `koord --embedded` (3 SIGKILLs, each lifetime paused 400 ms with SIGSTOP
//! on the way); `benches/history.rs` runs it bigger.

#[path = "../history/check_tests.rs"]
mod check_tests;
#[path = "../history/mod.rs"]
mod harness;

use std::time::Duration;

use crate::common::free_port;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_history_is_linearizable() {
    let _cpu = crate::common::cpu_exclusive();
    let dir = tempfile::tempdir().unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("history seed: {seed}");
    let cfg = harness::Config {
        keys: 6,
        clients: 4,
        watchers: 2,
        lives: 4,
        life: Duration::from_millis(1500),
        pause: Duration::from_millis(400),
        seed,
    };
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_koord"));
    let r = harness::run(bin, dir.path(), free_port(), free_port(), &cfg).await;
    eprintln!(
        "{} operations, {} acknowledged writes, {} unanswered, {} watch events, {} relists",
        r.ops, r.acknowledged_writes, r.unknown, r.events, r.relists
    );
    assert!(
        r.violations.is_empty(),
        "{} violations (seed {seed}):\n{}",
        r.violations.len(),
        r.violations
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        r.acknowledged_writes > 100,
        "too few writes to mean anything"
    );
    assert!(r.events > 100, "too few watch events to mean anything");
}
