//! Process-wide settings made once at start.

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
