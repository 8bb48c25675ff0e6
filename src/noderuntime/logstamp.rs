//! When each log line was written, for `kubectl logs --timestamps` and `--since`.
//!
//! Containers write their log files directly (so they keep running across a koord restart,
//! which a pipe through koord would not survive). Instead, while a container runs, its
//! worker notes every second how long the file has grown, in `<attempt>.ts` next to
//! `<attempt>.log`: lines of `<length> <unix nanoseconds>`. A line's time is the first note
//! that covers its end, so it is exact to within that second.

use std::io::Write;
use std::path::{Path, PathBuf};

use k8s_openapi::jiff::Timestamp;

/// How often a running container's log growth is noted.
pub const STAMP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

pub fn stamps_path(log: &Path) -> PathBuf {
    log.with_extension("ts")
}

/// Notes the growth of one log file.
#[derive(Debug)]
pub struct Stamper {
    log: PathBuf,
    seen: u64,
}

impl Stamper {
    pub fn new(log: PathBuf) -> Self {
        let seen = read(&log).last().map_or(0, |s| s.0);
        Stamper { log, seen }
    }

    pub fn tick(&mut self) {
        let Ok(len) = std::fs::metadata(&self.log).map(|m| m.len()) else {
            return;
        };
        if len <= self.seen {
            return;
        }
        let line = format!("{len} {}\n", Timestamp::now().as_nanosecond());
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(stamps_path(&self.log))
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if written.is_ok() {
            self.seen = len;
        }
    }
}

/// The notes of a log file, in order: (length, time).
pub fn read(log: &Path) -> Vec<(u64, Timestamp)> {
    let text = std::fs::read_to_string(stamps_path(log)).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (len, ns) = l.split_once(' ')?;
            let t = Timestamp::from_nanosecond(ns.parse().ok()?).ok()?;
            Some((len.parse().ok()?, t))
        })
        .collect()
}

/// The time of a line ending at byte `end`: the first note that covers it, else now
/// (written since the last note).
pub fn time_of(stamps: &[(u64, Timestamp)], end: u64) -> Timestamp {
    let i = stamps.partition_point(|(len, _)| *len < end);
    stamps.get(i).map_or_else(Timestamp::now, |s| s.1)
}

/// kubelet's `--timestamps` form: RFC 3339 with nanoseconds.
pub fn format(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_take_the_first_note_that_covers_them() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("1.log");
        std::fs::write(&log, "a\n").unwrap();
        let mut s = Stamper::new(log.clone());
        s.tick();
        std::fs::write(&log, "a\nbb\n").unwrap();
        s.tick();
        s.tick();
        let notes = read(&log);
        assert_eq!(notes.iter().map(|n| n.0).collect::<Vec<_>>(), vec![2, 5]);
        assert_eq!(time_of(&notes, 2), notes[0].1);
        assert_eq!(time_of(&notes, 5), notes[1].1);
        assert!(time_of(&notes, 9) >= notes[1].1);
        assert_eq!(
            format(Timestamp::from_second(1).unwrap()),
            "1970-01-01T00:00:01.000000000Z"
        );
        // A restarted worker resumes after what was noted.
        assert_eq!(Stamper::new(log).seen, 5);
    }
}
