//! Cgroup clean-up shared by the workers and the runtime's orphan scan.

use super::*;

/// Kills whatever is left in a cgroup and removes it (children first).
pub fn reap_cgroup(ctx: &Ctx, dir: &CgroupDir) {
    for child in ctx.cgroups.children(dir) {
        reap_cgroup(ctx, &dir.join(&child));
    }
    for _ in 0..50 {
        let pids = ctx.cgroups.procs(dir).unwrap_or_default();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            let _ = signal(pid, SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Err(e) = ctx.cgroups.remove(dir) {
        tracing::warn!(dir = %dir.as_str(), error = %e, "removing a cgroup failed");
    }
}
