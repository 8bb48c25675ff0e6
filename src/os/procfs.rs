//! /proc and PSI files through procfs-core's parsers (the `procfs` project's I/O-free
//! half: its types parse from any reader, so koord's rooted host layer — `/host-proc`,
//! fake trees in tests — stays). procfs-core slices strings by byte offsets without
//! bounds checks in places (a key's last byte in meminfo, `line[5..]` in pressure
//! records), so each wrapper admits only input those slices cannot break: ASCII, as the
//! kernel writes these files. Anything else is a `ParseError`, never a panic.
//!
//! Not through procfs: `/proc/stat` (its per-CPU list drops the CPU ids, which differ from
//! list positions once a CPU is offline), `/proc/meminfo`'s two numbers a second (below),
//! NUMA `node<N>/meminfo` (a format procfs does not read), `/proc/<pid>/stat` (procfs slices at `(`−1 and `)`+2, panicking on truncated
//! lines) and cgroup files (procfs has no parsers for them): see `parse.rs`.

use procfs_core::FromRead;

use super::parse::{ParseError, PsiLine};

fn ascii(content: &str, what: &'static str) -> Result<(), ParseError> {
    if content.is_ascii() {
        Ok(())
    } else {
        Err(ParseError::Line(format!("{what}: not ASCII")))
    }
}

fn failed(what: &str, e: procfs_core::ProcError) -> ParseError {
    ParseError::Line(format!("{what}: {e}"))
}

/// `MemTotal - MemFree` of `/proc/meminfo`, in bytes: the node's memory usage with page
/// cache (Koordinator's `usageWithPageCache`).
pub fn memory_used_with_cache(content: &str) -> Result<u64, ParseError> {
    let total = meminfo_bytes(content, "MemTotal")?;
    Ok(total.saturating_sub(meminfo_bytes(content, "MemFree")?))
}

/// `MemTotal - MemAvailable` of `/proc/meminfo`, in bytes: Koordinator's node memory
/// usage without page cache.
pub fn memory_used(content: &str) -> Result<u64, ParseError> {
    let total = meminfo_bytes(content, "MemTotal")?;
    Ok(total.saturating_sub(meminfo_bytes(content, "MemAvailable")?))
}

/// One `/proc/meminfo` field in bytes ("MemTotal:  16384 kB"). Read by hand: the node
/// collector wants two numbers every second, and procfs-core's `Meminfo` builds a map
/// of all fifty-odd lines for them.
fn meminfo_bytes(content: &str, key: &'static str) -> Result<u64, ParseError> {
    let rest = content
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| *k == key).map(|(_, v)| v))
        .ok_or(ParseError::Missing(key))?;
    let mut f = rest.split_whitespace();
    let n: u64 = f
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| ParseError::Line(format!("meminfo: {key}:{rest}")))?;
    Ok(match f.next() {
        Some("kB") => n.saturating_mul(1024),
        _ => n,
    })
}

/// (vendor id, flags) of the first processor in `/proc/cpuinfo`.
pub fn cpu_flags(content: &str) -> Result<(String, Vec<String>), ParseError> {
    ascii(content, "cpuinfo")?;
    let info =
        procfs_core::CpuInfo::from_read(content.as_bytes()).map_err(|e| failed("cpuinfo", e))?;
    let vendor = info.get_field(0, "vendor_id").unwrap_or_default();
    let flags = info.flags(0).unwrap_or_default();
    Ok((
        vendor.to_string(),
        flags.into_iter().map(str::to_string).collect(),
    ))
}

/// `cpu.pressure` / `memory.pressure` / `io.pressure` (system or cgroup): `some` and, when
/// the kernel writes it, `full`.
pub fn psi(content: &str) -> Result<(PsiLine, Option<PsiLine>), ParseError> {
    ascii(content, "pressure")?;
    let mut some = None;
    let mut full = None;
    for line in content.lines().filter(|l| !l.trim().is_empty()) {
        // parse_pressure_record reads from byte 5 on: `some ` / `full ` must be whole.
        let slot = match line.get(..5) {
            Some("some ") => &mut some,
            Some("full ") => &mut full,
            _ => return Err(ParseError::Line(line.to_string())),
        };
        let r = procfs_core::parse_pressure_record(line).map_err(|e| failed("pressure", e))?;
        *slot = Some(PsiLine {
            avg10: f64::from(r.avg10),
            avg60: f64::from(r.avg60),
            avg300: f64::from(r.avg300),
            total: r.total,
        });
    }
    Ok((some.ok_or(ParseError::Missing("some"))?, full))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_the_kernel_formats() {
        let mem = "MemTotal:       16384 kB\nMemFree:  1 kB\nMemAvailable:   4096 kB\nBuffers: 0 kB\nCached: 0 kB\nSwapCached: 0 kB\nActive: 0 kB\nInactive: 0 kB\nActive(anon): 0 kB\nInactive(anon): 0 kB\nActive(file): 0 kB\nInactive(file): 0 kB\nUnevictable: 0 kB\nMlocked: 0 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\nDirty: 0 kB\nWriteback: 0 kB\nAnonPages: 0 kB\nMapped: 0 kB\nShmem: 0 kB\nSlab: 0 kB\nSReclaimable: 0 kB\nSUnreclaim: 0 kB\nKernelStack: 0 kB\nPageTables: 0 kB\nNFS_Unstable: 0 kB\nBounce: 0 kB\nWritebackTmp: 0 kB\nCommitLimit: 0 kB\nCommitted_AS: 0 kB\nVmallocTotal: 0 kB\nVmallocUsed: 0 kB\nVmallocChunk: 0 kB\n";
        assert_eq!(memory_used(mem).unwrap(), (16384 - 4096) * 1024);
        assert_eq!(memory_used_with_cache(mem).unwrap(), (16384 - 1) * 1024);
        let cpu = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu rdt_a cat_l3\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: fpu rdt_a cat_l3\n";
        let (vendor, flags) = cpu_flags(cpu).unwrap();
        assert_eq!(vendor, "GenuineIntel");
        assert!(flags.contains(&"cat_l3".to_string()));
        let p = "some avg10=1.50 avg60=0.00 avg300=0.00 total=123\n";
        let (some, full) = psi(p).unwrap();
        assert_eq!((some.total, full.is_none()), (123, true));
        assert!((some.avg10 - 1.5).abs() < 1e-6);
        let p = "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2\n";
        assert_eq!(psi(p).unwrap().1.unwrap().total, 2);
        assert!(psi("some").is_err() && psi("sóme avg10=1").is_err());
        assert!(memory_used("é 5\n").is_err());
        assert!(
            memory_used("MemTotal: 5 kB\n").is_err(),
            "MemAvailable missing"
        );
        assert!(memory_used("MemTotal: x kB\nMemAvailable: 1 kB\n").is_err());
    }

    #[test]
    fn psi_table() {
        let (some, full) = psi("some avg10=1.50 avg60=0.20 avg300=0.00 total=1234\nfull avg10=0.50 avg60=0.10 avg300=0.00 total=99\n").unwrap();
        assert_eq!((some.avg10, some.total), (1.5, 1234));
        assert_eq!(full.unwrap().avg10, 0.5);
        let (_, none) = psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").unwrap();
        assert!(
            none.is_none(),
            "v1 cpu.pressure on old kernels has no full line"
        );
        for bad in ["", "some avg10", "other avg10=1", "some avg10=x"] {
            assert!(psi(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in "[ -~\n\té()]{0,200}") {
            let _ = memory_used(&text);
            let _ = cpu_flags(&text);
            let _ = psi(&text);
        }
    }
}
