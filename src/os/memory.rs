//! Giving freed heap back to the system. A role that rebuilds a large structure
//! periodically (the descheduler's pass, a cache's relist) leaves glibc's arenas full of
//! free holes between long-lived objects; they count as RSS until trimmed.

/// Returns free heap pages to the system (glibc `malloc_trim`); a no-op elsewhere.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and only walks the allocator's own state.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes the allocator holds for live objects and bytes it holds free, when it can say.
pub fn heap() -> Option<(usize, usize)> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let mi = unsafe { libc::mallinfo2() };
        Some((mi.uordblks, mi.fordblks))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}
