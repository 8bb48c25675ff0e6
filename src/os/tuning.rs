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
}
