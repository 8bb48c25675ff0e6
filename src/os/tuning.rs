//! Process-wide settings made once at start: open-file limit and allocator tuning.

/// Raises the soft open-file limit to the hard one (as Go programs do at start), so the
/// servers' connection caps have room.
pub fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// The soft open-file limit (1024 when it cannot be read).
pub fn nofile_soft_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct we pass.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
    if ok { lim.rlim_cur } else { 1024 }
}

/// Caps glibc's per-thread malloc arenas; must run before the runtime's threads start.
/// A no-op on other C libraries, which do not have arenas.
pub fn limit_malloc_arenas(max: i32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator tuning; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, max);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = max;
}

/// Tells the kernel to read the binary's pages only as they are used: no read-ahead around
/// a page fault. With the disk's read-ahead (8 MiB on this machine's virtio disk) each
/// first touch of a new part of the binary pulls megabytes of it into the page cache, and
/// the kernel's fault-around then maps cached neighbours into the process: `koord
/// --version` alone read 47 of the binary's 62 MiB. Measured on this machine's 6.18 kernel
/// with Python's mmap on a cold copy: 251 scattered touches of a read-only mapping cache
/// 1 MiB with this advice, all 62 MiB without — but an executable mapping is read around
/// whatever the advice, so this helps the read-only data (symbols, unwind tables,
/// constants), not the code. Called first thing in `main`; changes nothing when the binary
/// is already cached.
pub fn lazy_code_pages() {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    for (start, end) in exe_ranges(&maps, &exe.to_string_lossy()) {
        // SAFETY: the range is one of this process's own file mappings, as the kernel
        // listed it; MADV_RANDOM only changes read-ahead and never touches the contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_RANDOM);
        }
    }
}

/// Gives back the binary's pages a node agent mapped while starting. Before `main` the
/// dynamic loader's first faults read most of the binary (see `lazy_code_pages`) and map
/// large parts of its read-only data. This unmaps the binary's read-only pages that hold
/// only file contents (never the relocated RELRO data, which has anonymous pages) and
/// drops the binary's cached pages no other process maps; read-only data is then read back
/// a page at a time as used (the koordlet's read-only segment: 2.9 → 0.9 MiB resident).
/// Code is read around again by the kernel whatever we advise, so its pages come back as
/// they run. Called once, before the runtime's threads start.
pub fn shed_cached_code() {
    use std::os::fd::AsRawFd;
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    // Everything prepared first: between the unmapping and the dropping, as little of the
    // binary's code as possible runs (a page used there keeps its cached folio).
    let (Ok(file), Ok(smaps)) = (
        std::fs::File::open(&exe),
        std::fs::read_to_string("/proc/self/smaps"),
    ) else {
        return;
    };
    unmap_file_only(&smaps, &exe.to_string_lossy());
    // SAFETY: posix_fadvise takes an open descriptor and plain integers.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// Unmaps the binary's code and read-only data from a long-running node agent, keeping
/// them in the page cache: what the agent runs again is mapped back by the next fault (a
/// minor one, no disk read), so between two calls the RSS holds the code the agent ran
/// since the last one — its collection, report and QoS loops — and not what it ran once
/// (start-up, configuration, TLS set-up, the informer's first list). Each fault maps a
/// window of cached neighbours (the kernel's fault-around: 64 KiB by default, 128 KiB
/// measured on this project's VMs), so this is cheap: a few hundred minor faults a minute
/// for the koordlet. Node agents call it every minute (`run`).
pub fn shed_idle_code() {
    let (Ok(exe), Ok(smaps)) = (
        std::fs::read_link("/proc/self/exe"),
        std::fs::read_to_string("/proc/self/smaps"),
    ) else {
        return;
    };
    unmap_file_only(&smaps, &exe.to_string_lossy());
}

fn unmap_file_only(smaps: &str, exe: &str) {
    for (start, end) in file_only_ranges(smaps, exe) {
        // SAFETY: a read-only private mapping of our own binary with no anonymous
        // (written) page: its pages equal the file's, so dropping them only costs a fault
        // that maps them back (a debugger's or uprobe's written page makes the range
        // anonymous, and it is skipped).
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The mappings of `path` in a `/proc/<pid>/smaps` text that are not writable and hold no
/// anonymous page.
fn file_only_ranges(smaps: &str, path: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let (Some(first), Some(second)) = (f.next(), f.next()) else {
            continue;
        };
        if let Some((a, b)) = first.split_once('-')
            && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
        {
            let ours = line.split_whitespace().nth(5) == Some(path) && !second.contains('w');
            current = ours.then_some((a, b));
            continue;
        }
        if first == "Anonymous:"
            && let Some(range) = current.take()
            && second == "0"
        {
            out.push(range);
        }
    }
    out
}

/// The address ranges of the mappings of `path` in a `/proc/<pid>/maps` text.
fn exe_ranges(maps: &str, path: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter(|l| l.split_whitespace().nth(5) == Some(path))
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

/// Serves allocations of 512 KiB and more from their own mappings, so freeing a large
/// object (a big ConfigMap leaving the watch history) returns its memory to the system.
/// glibc otherwise raises this threshold as large blocks are freed and keeps them in the
/// heap. 512 KiB, not more, for sled: every store allocates 41 zeroed metric histograms of
/// exactly 512 KiB that it never writes (`no_metrics`); from the heap, glibc's `calloc`
/// clears the part of each that overlaps the old top of the heap — ~90 KiB each, 3.7 MiB
/// resident in the koordlet — while a fresh mapping is zero already and stays untouched.
pub fn return_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before threads allocate much.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 512 << 10);
    }
}

/// Returns the allocator's free pages to the kernel. glibc keeps freed memory for reuse,
/// so after a burst (a watch's initial list, ten thousand pods bound) it stays resident
/// for good; Go's runtime scavenges it, glibc needs asking. Returns whether anything was
/// released; does nothing off glibc.
pub fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes a plain integer and touches only the allocator's own
        // state, under the allocator's locks; any thread may call it at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Asks the CPU to start loading the cache line at `p` into every cache level, without
/// waiting and without faulting. The scheduler calls it a few nodes ahead of the one it
/// filters, so each node's separately allocated state is in cache by the time a plugin
/// reads it.
#[inline(always)]
pub fn prefetch<T: ?Sized>(p: &T) {
    prefetch_line((p as *const T).cast::<u8>());
}

/// [`prefetch`] for every cache line `v` spans, up to `max` bytes.
#[inline(always)]
pub fn prefetch_all<T: ?Sized>(v: &T, max: usize) {
    let base = (v as *const T).cast::<u8>();
    for off in (0..std::mem::size_of_val(v).min(max)).step_by(64) {
        prefetch_line(base.wrapping_add(off));
    }
}

#[inline(always)]
fn prefetch_line(addr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: prefetch is a hint: it neither reads memory architecturally nor faults,
        // whatever the address (callers pass addresses inside live objects anyway).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(addr.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    #[test]
    fn trim_after_freeing_a_burst_does_not_disturb_the_heap() {
        let burst: Vec<Vec<u8>> = (0..2048).map(|i| vec![i as u8; 4096]).collect();
        let kept = burst[7].clone();
        drop(burst);
        super::trim_heap();
        assert_eq!(kept, vec![7u8; 4096]);
        let again: Vec<u8> = vec![1; 1 << 20];
        assert_eq!(again.len(), 1 << 20);
    }

    /// The test binary drops its own code pages and goes on running: what it runs next is
    /// mapped back from the page cache.
    #[test]
    fn shedding_idle_code_keeps_the_process_running() {
        super::shed_idle_code();
        let sum: u64 = (1..=1000u64).map(|i| i * i).sum();
        assert_eq!(sum, 333_833_500);
        super::shed_idle_code();
        let text = format!("{:?}", std::collections::BTreeMap::from([(1, "a")]));
        assert_eq!(text, r#"{1: "a"}"#);
    }

    #[test]
    fn the_executables_mappings_are_found_by_path() {
        let maps = "55d0c0000000-55d0c0100000 r--p 00000000 fd:01 42 /usr/bin/koord
55d0c0100000-55d0c2000000 r-xp 00100000 fd:01 42 /usr/bin/koord
7f0000000000-7f0000100000 r-xp 00000000 fd:01 7 /usr/lib/libc.so.6
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
";
        let r = super::exe_ranges(maps, "/usr/bin/koord");
        assert_eq!(
            r,
            [
                (0x55d0c0000000, 0x55d0c0100000),
                (0x55d0c0100000, 0x55d0c2000000)
            ]
        );
        let smaps = "55d0c0000000-55d0c0100000 r--p 00000000 fd:01 42 /usr/bin/koord
Rss: 8 kB
Anonymous: 0 kB
55d0c0100000-55d0c2000000 r-xp 00100000 fd:01 42 /usr/bin/koord
Anonymous: 0 kB
55d0c2000000-55d0c2100000 r--p 02000000 fd:01 42 /usr/bin/koord
Anonymous: 912 kB
55d0c2100000-55d0c2110000 rw-p 02100000 fd:01 42 /usr/bin/koord
Anonymous: 0 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 7 /usr/lib/libc.so.6
Anonymous: 0 kB
";
        assert_eq!(
            super::file_only_ranges(smaps, "/usr/bin/koord"),
            [
                (0x55d0c0000000, 0x55d0c0100000),
                (0x55d0c0100000, 0x55d0c2000000)
            ],
            "never the relocated (anonymous) or writable data"
        );
        // It runs on this process without harm.
        super::lazy_code_pages();
    }
}
