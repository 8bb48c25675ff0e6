//! The history check (see `tests/history/mod.rs`) at bench size: `HISTORY_CLIENTS`
//! clients (default 8) and `HISTORY_WATCHERS` watchers (3) on `HISTORY_KEYS` ConfigMaps
//! (8) through `HISTORY_LIVES` lifetimes (10) of `HISTORY_LIFE_MS` (3000) each, ended by
//! SIGKILL, each stopped `HISTORY_PAUSE_MS` (500; 0: never) with SIGSTOP halfway. Prints
//! the operation counts and every violation; exits 1 on any.

mod common;
#[path = "../tests/history/mod.rs"]
mod history;

use std::time::Duration;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seed = env(
        "HISTORY_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    let cfg = history::Config {
        keys: env("HISTORY_KEYS", 8) as usize,
        clients: env("HISTORY_CLIENTS", 8) as usize,
        watchers: env("HISTORY_WATCHERS", 3) as usize,
        lives: env("HISTORY_LIVES", 10) as usize,
        life: Duration::from_millis(env("HISTORY_LIFE_MS", 3000)),
        pause: Duration::from_millis(env("HISTORY_PAUSE_MS", 500)),
        seed,
    };
    println!("history: {cfg:?}");
    let dir = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_koord"));
    let started = std::time::Instant::now();
    let ports = (common::free_port(), common::free_port());
    let r = history::run(bin, dir.path(), ports.0, ports.1, &cfg).await;
    println!(
        "history: {} operations ({} acknowledged writes, {} unanswered), {} watch events, \
         {} relists, {} kills in {:.1} s: {} violations",
        r.ops,
        r.acknowledged_writes,
        r.unknown,
        r.events,
        r.relists,
        cfg.lives - 1,
        started.elapsed().as_secs_f64(),
        r.violations.len()
    );
    for v in &r.violations {
        println!("  {v}");
    }
    if !r.violations.is_empty() {
        std::process::exit(1);
    }
}
