//! This process's own figures, as Prometheus' standard process collector reports them:
//! CPU seconds, resident and virtual memory, start time, open and allowed descriptors.

/// One reading of `/proc/self`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelfStat {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: f64,
    pub open_fds: u64,
    pub max_fds: u64,
}

/// Reads `/proc/self`; None when /proc is not there.
pub fn read() -> Option<SelfStat> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let btime = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<u64>().ok())?;
    let f = parse_stat(&stat)?;
    let ticks = super::system::clock_ticks() as f64;
    let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    Some(SelfStat {
        cpu_seconds: (f.utime + f.stime) as f64 / ticks,
        resident_bytes: f.rss_pages * page_size(),
        virtual_bytes: f.vsize,
        start_time_seconds: btime as f64 + f.starttime as f64 / ticks,
        open_fds,
        max_fds: super::tuning::nofile_soft_limit(),
    })
}

/// The fields of `/proc/<pid>/stat` the collector needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFields {
    pub utime: u64,
    pub stime: u64,
    pub starttime: u64,
    pub vsize: u64,
    pub rss_pages: u64,
}

/// Parses `/proc/<pid>/stat` after the command name (which may hold spaces and
/// parentheses, so the last `)` ends it).
pub fn parse_stat(content: &str) -> Option<StatFields> {
    let rest = &content[content.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): field n is f[n - 3].
    let at = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(StatFields {
        utime: at(14)?,
        stime: at(15)?,
        starttime: at(22)?,
        vsize: at(23)?,
        rss_pages: at(24)?,
    })
}

pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf(3) takes an integer name and returns an integer; no memory is shared.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 { v as u64 } else { 4096 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_with_an_awkward_name() {
        let line = "4242 (koord (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 12345 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let f = parse_stat(line).unwrap();
        assert_eq!(
            f,
            StatFields {
                utime: 250,
                stime: 50,
                starttime: 12345,
                vsize: 104_857_600,
                rss_pages: 2560
            }
        );
        assert!(parse_stat("4242 (truncated").is_none());
        assert!(parse_stat("4242 (x) S 1").is_none());
    }

    #[test]
    fn reads_this_process() {
        let Some(s) = read() else {
            eprintln!("skipped: no /proc");
            return;
        };
        assert!(s.resident_bytes > 0 && s.open_fds > 0 && s.start_time_seconds > 1.0e9);
    }
}
