//! The logical cgroup files the koordlet reads and writes, and their v1/v2 names.

use super::Subsystem;

/// Logical cgroup files (`pkg/koordlet/util/system/cgroup_resource.go`); each maps to a v1 and a v2 file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    CpuShares,
    CfsQuota,
    CfsPeriod,
    CfsBurst,
    CpuStat,
    CpuacctUsage,
    CpuIdle,
    BvtWarpNs,
    CpusetCpus,
    CpusetMems,
    MemoryLimit,
    MemoryUsage,
    MemoryStat,
    MemoryNumaStat,
    /// kidled's per-cgroup idle page histogram (Alibaba Cloud Linux).
    MemoryIdlePageStats,
    MemoryMin,
    MemoryLow,
    MemoryHigh,
    MemoryWmarkRatio,
    MemoryWmarkScaleFactor,
    MemoryWmarkMinAdj,
    MemoryPriority,
    MemoryUsePriorityOom,
    MemoryOomGroup,
    /// The memcg page-cache limit (Alibaba Cloud Linux / Anolis).
    MemoryPageCacheLimitEnable,
    MemoryPageCacheLimitSize,
    MemoryPageCacheLimitSync,
    MemoryOomEvents,
    CpuPressure,
    MemoryPressure,
    IoPressure,
    Procs,
    Tasks,
    /// The class a cgroup's sockets are sent in (cgroup v1 only).
    NetClsClassId,
}

impl Resource {
    /// The cgroup v1 file name, as Koordinator names resource types (`cpuset.cpus`).
    pub fn v1_name(self) -> &'static str {
        self.files().1
    }

    /// (v1 subsystem, v1 file, v2 file).
    pub(super) fn files(self) -> (Subsystem, &'static str, &'static str) {
        use Resource::*;
        use Subsystem as S;
        match self {
            CpuShares => (S::Cpu, "cpu.shares", "cpu.weight"),
            CfsQuota => (S::Cpu, "cpu.cfs_quota_us", "cpu.max"),
            CfsPeriod => (S::Cpu, "cpu.cfs_period_us", "cpu.max"),
            CfsBurst => (S::Cpu, "cpu.cfs_burst_us", "cpu.max.burst"),
            CpuStat => (S::Cpu, "cpu.stat", "cpu.stat"),
            CpuacctUsage => (S::Cpuacct, "cpuacct.usage", "cpu.stat"),
            CpuIdle => (S::Cpu, "cpu.idle", "cpu.idle"),
            BvtWarpNs => (S::Cpu, "cpu.bvt_warp_ns", "cpu.bvt_warp_ns"),
            CpusetCpus => (S::Cpuset, "cpuset.cpus", "cpuset.cpus"),
            CpusetMems => (S::Cpuset, "cpuset.mems", "cpuset.mems"),
            MemoryLimit => (S::Memory, "memory.limit_in_bytes", "memory.max"),
            MemoryUsage => (S::Memory, "memory.usage_in_bytes", "memory.current"),
            MemoryStat => (S::Memory, "memory.stat", "memory.stat"),
            MemoryNumaStat => (S::Memory, "memory.numa_stat", "memory.numa_stat"),
            MemoryIdlePageStats => (
                S::Memory,
                "memory.idle_page_stats",
                "memory.idle_page_stats",
            ),
            MemoryMin => (S::Memory, "memory.min", "memory.min"),
            MemoryLow => (S::Memory, "memory.low", "memory.low"),
            MemoryHigh => (S::Memory, "memory.high", "memory.high"),
            MemoryWmarkRatio => (S::Memory, "memory.wmark_ratio", "memory.wmark_ratio"),
            MemoryWmarkScaleFactor => (
                S::Memory,
                "memory.wmark_scale_factor",
                "memory.wmark_scale_factor",
            ),
            MemoryWmarkMinAdj => (S::Memory, "memory.wmark_min_adj", "memory.wmark_min_adj"),
            MemoryPriority => (S::Memory, "memory.priority", "memory.priority"),
            MemoryUsePriorityOom => (
                S::Memory,
                "memory.use_priority_oom",
                "memory.use_priority_oom",
            ),
            MemoryOomGroup => (S::Memory, "memory.oom.group", "memory.oom.group"),
            MemoryPageCacheLimitEnable => (
                S::Memory,
                "memory.pagecache_limit.enable",
                "memory.pagecache_limit.enable",
            ),
            MemoryPageCacheLimitSize => (
                S::Memory,
                "memory.pagecache_limit.size",
                "memory.pagecache_limit.size",
            ),
            MemoryPageCacheLimitSync => (
                S::Memory,
                "memory.pagecache_limit.sync",
                "memory.pagecache_limit.sync",
            ),
            MemoryOomEvents => (S::Memory, "memory.oom_control", "memory.events"),
            CpuPressure => (S::Cpuacct, "cpu.pressure", "cpu.pressure"),
            MemoryPressure => (S::Cpuacct, "memory.pressure", "memory.pressure"),
            IoPressure => (S::Cpuacct, "io.pressure", "io.pressure"),
            Procs => (S::Cpu, "cgroup.procs", "cgroup.procs"),
            Tasks => (S::Cpu, "tasks", "cgroup.threads"),
            NetClsClassId => (S::NetCls, "net_cls.classid", "net_cls.classid"),
        }
    }

    pub fn subsystem(self) -> Subsystem {
        self.files().0
    }
}
