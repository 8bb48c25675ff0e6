//! Crash points for fault tests (as Sieve and FoundationDB place them): a point named in
//! the environment variable `KOORDTEST_FAULTS` (comma-separated `name`, or `name@n` for
//! the n-th time it is reached; outside koord's `KOORD_` configuration) kills the process
//! with SIGKILL right there, as kill -9 or the OOM killer would, between two steps whose
//! order matters. Unset (always, outside tests), a point costs a look at an empty list.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The environment variable naming the points to crash at.
pub const ENV: &str = "KOORDTEST_FAULTS";

struct Armed {
    name: String,
    at: u32,
    reached: AtomicU32,
}

fn armed() -> &'static [Armed] {
    static ARMED: OnceLock<Vec<Armed>> = OnceLock::new();
    ARMED.get_or_init(|| parse(&std::env::var(ENV).unwrap_or_default()))
}

fn parse(spec: &str) -> Vec<Armed> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (name, at) = s.split_once('@').unwrap_or((s, "1"));
            Armed {
                name: name.to_string(),
                at: at.parse().unwrap_or(1).max(1),
                reached: AtomicU32::new(0),
            }
        })
        .collect()
}

/// Crash here when this point is armed and reached for the armed time.
pub fn point(name: &str) {
    for a in armed().iter().filter(|a| a.name == name) {
        if a.reached.fetch_add(1, Ordering::SeqCst) + 1 == a.at {
            tracing::error!(point = name, "{ENV}: killing the process here");
            // SAFETY: kill(2) on our own pid; nothing after it runs.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_counts_parse() {
        let a = parse(" scheduler.after-bind@3, descheduler.after-reservation ,,");
        let got: Vec<(&str, u32)> = a.iter().map(|a| (a.name.as_str(), a.at)).collect();
        assert_eq!(
            got,
            vec![
                ("scheduler.after-bind", 3),
                ("descheduler.after-reservation", 1)
            ]
        );
        assert!(parse("").is_empty());
    }
}
