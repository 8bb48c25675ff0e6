//! Crash and pause points for fault tests (as Sieve and FoundationDB place them): a point
//! named in the environment variable `KOORDTEST_FAULTS` (comma-separated `name`, or
//! `name@n` for the n-th time it is reached; outside koord's `KOORD_` configuration) kills
//! the process with SIGKILL right there, as kill -9 or the OOM killer would, between two
//! steps whose order matters. `name:pause` (or `name@n:pause`) stops the process with
//! SIGSTOP instead, as a long GC pause, a frozen VM or a stalled disk would; the test goes
//! on with SIGCONT. Unset (always, outside tests), a point costs a look at an empty list.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The environment variable naming the points to crash at.
pub const ENV: &str = "KOORDTEST_FAULTS";

struct Armed {
    name: String,
    at: u32,
    pause: bool,
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
            let (s, pause) = s.strip_suffix(":pause").map_or((s, false), |s| (s, true));
            let (name, at) = s.split_once('@').unwrap_or((s, "1"));
            Armed {
                name: name.to_string(),
                at: at.parse().unwrap_or(1).max(1),
                pause,
                reached: AtomicU32::new(0),
            }
        })
        .collect()
}

/// Crash (or pause) here when this point is armed and reached for the armed time.
pub fn point(name: &str) {
    for a in armed().iter().filter(|a| a.name == name) {
        if a.reached.fetch_add(1, Ordering::SeqCst) + 1 != a.at {
            continue;
        }
        if a.pause {
            tracing::error!(point = name, "{ENV}: stopping the process here");
            // SAFETY: raise(3) sends SIGSTOP to this thread, so this thread takes it on
            // the way out of the call and stops there with every other one (sent to the
            // process, another thread may take it while this one runs on for a while).
            unsafe { libc::raise(libc::SIGSTOP) };
            tracing::info!(point = name, "{ENV}: continued");
        } else {
            tracing::error!(point = name, "{ENV}: killing the process here");
            // SAFETY: kill(2) on our own pid; a SIGKILL ends every thread at once.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_counts_parse() {
        let a = parse(
            " scheduler.after-bind@3, descheduler.after-reservation ,,scheduler.before-bind@2:pause",
        );
        let got: Vec<(&str, u32, bool)> =
            a.iter().map(|a| (a.name.as_str(), a.at, a.pause)).collect();
        assert_eq!(
            got,
            vec![
                ("scheduler.after-bind", 3, false),
                ("descheduler.after-reservation", 1, false),
                ("scheduler.before-bind", 2, true)
            ]
        );
        assert!(parse("").is_empty());
    }
}
