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

/// Serves allocations of 1 MiB and more from their own mappings, so freeing a large object
/// (a big ConfigMap leaving the watch history) returns its memory to the system. glibc
/// otherwise raises this threshold as large blocks are freed and keeps them in the heap.
pub fn return_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before threads allocate much.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
