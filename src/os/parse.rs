//! Pure parsers for the kernel's text files. Each takes `&str` and has its own error;
//! readers only add the path.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("missing field {0:?}")]
    Missing(&'static str),
    #[error("invalid number {value:?} for {field:?}")]
    Number { field: String, value: String },
    #[error("malformed line {0:?}")]
    Line(String),
}

fn num<T: std::str::FromStr>(field: &str, value: &str) -> Result<T, ParseError> {
    value.parse().map_err(|_| ParseError::Number {
        field: field.to_string(),
        value: value.to_string(),
    })
}

/// The aggregate `cpu` line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTicks {
    /// Busy ticks as Koordinator counts them: user + nice + system + irq + softirq
    /// (iowait and steal excluded).
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }
}

fn cpu_line(line: &str) -> Result<CpuTicks, ParseError> {
    let f: Vec<&str> = line.split_whitespace().skip(1).collect();
    if f.len() < 7 {
        return Err(ParseError::Line(line.to_string()));
    }
    let g = |i: usize, name: &str| -> Result<u64, ParseError> {
        f.get(i).map_or(Ok(0), |v| num(name, v))
    };
    Ok(CpuTicks {
        user: g(0, "user")?,
        nice: g(1, "nice")?,
        system: g(2, "system")?,
        idle: g(3, "idle")?,
        iowait: g(4, "iowait")?,
        irq: g(5, "irq")?,
        softirq: g(6, "softirq")?,
        steal: g(7, "steal")?,
    })
}

/// `/proc/stat`: the aggregate `cpu` line and the per-CPU lines (index = CPU id).
pub fn proc_stat(content: &str) -> Result<(CpuTicks, Vec<(usize, CpuTicks)>), ParseError> {
    let mut total = None;
    let mut per_cpu = Vec::new();
    for line in content.lines() {
        let Some(head) = line.split_whitespace().next() else {
            continue;
        };
        if head == "cpu" {
            total = Some(cpu_line(line)?);
        } else if let Some(id) = head.strip_prefix("cpu") {
            per_cpu.push((num("cpu id", id)?, cpu_line(line)?));
        }
    }
    Ok((total.ok_or(ParseError::Missing("cpu"))?, per_cpu))
}

/// The values of `keys` in a flat `key value` file (cpu.stat, memory.stat), in their
/// order, without building a map: the koordlet parses a few hundred of these a second, and
/// a map's allocations were a tenth of its instructions. Every line must still be `key value`; only the wanted
/// keys' values are parsed.
pub fn flat_fields<const N: usize>(
    content: &str,
    keys: [&str; N],
) -> Result<[Option<i64>; N], ParseError> {
    let mut out = [None; N];
    for line in content.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(k) = it.next() else { continue };
        let (Some(v), None) = (it.next(), it.next()) else {
            return Err(ParseError::Line(line.to_string()));
        };
        if let Some(i) = keys.iter().position(|w| *w == k) {
            out[i] = Some(num(k, v)?);
        }
    }
    Ok(out)
}

/// Throttling counters from `cpu.stat` (v1 or v2 keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    /// Nanoseconds.
    pub throttled_ns: u64,
}

pub fn cpu_stat(content: &str) -> Result<CpuStat, ParseError> {
    let [periods, throttled, time_ns, time_us] = flat_fields(
        content,
        [
            "nr_periods",
            "nr_throttled",
            "throttled_time",
            "throttled_usec",
        ],
    )?;
    let get =
        |v: Option<i64>, k: &'static str| v.ok_or(ParseError::Missing(k)).map(|v| v.max(0) as u64);
    let throttled_ns = match time_ns {
        Some(ns) => ns.max(0) as u64,
        None => get(time_us, "throttled_usec")? * 1000,
    };
    Ok(CpuStat {
        nr_periods: get(periods, "nr_periods")?,
        nr_throttled: get(throttled, "nr_throttled")?,
        throttled_ns,
    })
}

/// `cpuacct.usage` (nanoseconds).
pub fn cpuacct_usage(content: &str) -> Result<u64, ParseError> {
    num("cpuacct.usage", content.trim())
}

/// A single integer file (`memory.current`, `memory.usage_in_bytes`).
pub fn single_int(content: &str) -> Result<i64, ParseError> {
    let t = content.trim();
    if t == "max" { Ok(-1) } else { num("value", t) }
}

/// Pod/container memory without page cache from `memory.stat`: anonymous + unevictable
/// (v1 `total_*` keys, v2 plain keys).
pub fn memory_without_cache(content: &str) -> Result<u64, ParseError> {
    let f = flat_fields(
        content,
        [
            "total_inactive_anon",
            "total_active_anon",
            "total_unevictable",
            "inactive_anon",
            "active_anon",
            "unevictable",
        ],
    )?;
    // v1 files carry the hierarchical `total_*` keys; v2 files only the plain ones.
    let (keys, first) = if f[0].is_some() {
        (&f[..3], "total_inactive_anon")
    } else {
        (&f[3..], "inactive_anon")
    };
    let mut sum = 0i64;
    for v in keys {
        sum += v.ok_or(ParseError::Missing(first))?;
    }
    Ok(sum.max(0) as u64)
}

/// One line of a PSI file: `some avg10=0.00 avg60=0.00 avg300=0.00 total=0`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PsiLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total: u64,
}

/// A cpuset list (`0-3,8,10-11`) as CPU ids.
pub fn cpuset(content: &str) -> Result<Vec<u32>, ParseError> {
    crate::api::cpuset::parse(content).map_err(|e| ParseError::Line(e.0))
}

pub use crate::api::cpuset::format as format_cpuset;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_table() {
        let text = "cpu  100 5 50 1000 7 3 2 9 0 0\ncpu0 60 5 30 500 3 2 1 4 0 0\ncpu1 40 0 20 500 4 1 1 5 0 0\nintr 1 2\nctxt 3\n";
        let (total, per) = proc_stat(text).unwrap();
        assert_eq!(total.busy(), 100 + 5 + 50 + 3 + 2);
        assert_eq!(per.len(), 2);
        assert_eq!(per[1].0, 1);
        assert_eq!(per[1].1.user, 40);
        for bad in [
            "",
            "intr 1",
            "cpu 1 2",
            "cpu a b c d e f g",
            "cpuX 1 2 3 4 5 6 7\ncpu 1 2 3 4 5 6 7",
        ] {
            assert!(proc_stat(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cgroup_files_table() {
        assert_eq!(cpuacct_usage("123456789\n").unwrap(), 123_456_789);
        assert!(cpuacct_usage("n/a").is_err());
        assert_eq!(single_int("max\n").unwrap(), -1);
        assert_eq!(single_int("4096").unwrap(), 4096);
        let v1 = cpu_stat("nr_periods 10\nnr_throttled 4\nthrottled_time 5000\n").unwrap();
        assert_eq!(
            v1,
            CpuStat {
                nr_periods: 10,
                nr_throttled: 4,
                throttled_ns: 5000
            }
        );
        let v2 = cpu_stat("usage_usec 9\nuser_usec 1\nsystem_usec 1\nnr_periods 10\nnr_throttled 4\nthrottled_usec 5\n").unwrap();
        assert_eq!(v2.throttled_ns, 5000);
        assert!(cpu_stat("nr_periods 1\n").is_err());
        assert!(cpu_stat("nr_periods x\n").is_err());
        let m1 = "cache 100\nrss 50\ntotal_cache 1000\ntotal_inactive_anon 10\ntotal_active_anon 20\ntotal_unevictable 5\ntotal_inactive_file 7\n";
        assert_eq!(memory_without_cache(m1).unwrap(), 35);
        let m2 = "anon 30\nfile 100\ninactive_anon 10\nactive_anon 20\nunevictable 1\ninactive_file 50\n";
        assert_eq!(memory_without_cache(m2).unwrap(), 31);
        assert!(memory_without_cache("anon 1\n").is_err());
        assert!(memory_without_cache("total_inactive_anon 1 2\n").is_err());
    }

    #[test]
    fn cpusets() {
        assert_eq!(
            cpuset("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(cpuset("").unwrap(), Vec::<u32>::new());
        assert!(cpuset("3-1").is_err());
        assert!(cpuset("a").is_err());
        assert_eq!(format_cpuset(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpuset(&[]), "");
    }
}
