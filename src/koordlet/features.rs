//! koordlet feature gates with Koordinator's defaults (`pkg/features/koordlet_features.go`
//! and the runtime-hook gates). Set with `koordlet.featureGates: {Name: bool}`. Gates koord
//! does not act on yet are accepted (Koordinator configs keep working); switching one on
//! earns a warning at start (an error when `common.strict`).

use crate::kernel::features::{Gate, GateTable, gate};

pub use crate::kernel::features::Gates;

// Koordinator's gates of this component, each checked by name at compile time.
pub const BECPU_SUPPRESS: Gate = gate("BECPUSuppress", true, true);
pub const CPU_BURST: Gate = gate("CPUBurst", true, true);
pub const RDT_RESCTRL: Gate = gate("RdtResctrl", true, true);
pub const NODE_TOPOLOGY_REPORT: Gate = gate("NodeTopologyReport", true, true);
pub const GROUP_IDENTITY: Gate = gate("GroupIdentity", true, true);
pub const CPU_SET_ALLOCATOR: Gate = gate("CPUSetAllocator", true, true);
pub const BATCH_RESOURCE: Gate = gate("BatchResource", true, true);
pub const AUDIT_EVENTS: Gate = gate("AuditEvents", false, true);
pub const AUDIT_EVENTS_HTTP_HANDLER: Gate = gate("AuditEventsHTTPHandler", false, true);
pub const BECPU_MANAGER: Gate = gate("BECPUManager", false, true);
pub const BECPU_EVICT: Gate = gate("BECPUEvict", false, true);
pub const CPU_EVICT: Gate = gate("CPUEvict", false, true);
pub const CPU_ALLOCATABLE_EVICT: Gate = gate("CPUAllocatableEvict", false, true);
pub const BE_MEMORY_EVICT: Gate = gate("BEMemoryEvict", false, true);
pub const MEMORY_EVICT: Gate = gate("MemoryEvict", false, true);
pub const MEMORY_ALLOCATABLE_EVICT: Gate = gate("MemoryAllocatableEvict", false, true);
pub const SYSTEM_CONFIG: Gate = gate("SystemConfig", false, true);
pub const RESCTRL_COLLECTOR: Gate = gate("ResctrlCollector", false, true);
pub const CGROUP_RECONCILE: Gate = gate("CgroupReconcile", false, true);
pub const ACCELERATORS: Gate = gate("Accelerators", false, true);
pub const RDMA_DEVICES: Gate = gate("RDMADevices", false, true);
pub const CPI_COLLECTOR: Gate = gate("CPICollector", false, true);
pub const LIBPFM4: Gate = gate("Libpfm4", false, false);
pub const PSI_COLLECTOR: Gate = gate("PSICollector", false, true);
pub const BLK_IO_RECONCILE: Gate = gate("BlkIOReconcile", false, true);
pub const COLD_PAGE_COLLECTOR: Gate = gate("ColdPageCollector", false, true);
pub const HUGE_PAGE_REPORT: Gate = gate("HugePageReport", false, false);
pub const POD_RESOURCES_PROXY: Gate = gate("PodResourcesProxy", false, true);
pub const HAMI_CORE_VGPU_MONITOR: Gate = gate("HamiCoreVGPUMonitor", false, true);
pub const PER_CPU_METRIC: Gate = gate("PerCPUMetric", false, true);
pub const NODE_METRIC_PROM_METRICS: Gate = gate("NodeMetricPromMetrics", false, false);
pub const GPU_ENV_INJECT: Gate = gate("GPUEnvInject", false, true);
pub const RDMA_DEVICE_INJECT: Gate = gate("RDMADeviceInject", false, true);
pub const CPU_NORMALIZATION: Gate = gate("CPUNormalization", false, true);
pub const CORE_SCHED: Gate = gate("CoreSched", false, true);
pub const TERWAY_QO_S: Gate = gate("TerwayQoS", false, true);
pub const TC_NETWORK_QO_S: Gate = gate("TCNetworkQoS", false, true);
pub const RESCTRL: Gate = gate("Resctrl", false, true);
pub const OOM_SCORE_ADJ: Gate = gate("OOMScoreAdj", false, true);

/// (name, Koordinator's default, implemented by koord).
pub const KOORDLET_GATES: GateTable = GateTable {
    role: "koordlet",
    gates: &[
        BECPU_SUPPRESS,
        CPU_BURST,
        RDT_RESCTRL,
        NODE_TOPOLOGY_REPORT,
        GROUP_IDENTITY,
        CPU_SET_ALLOCATOR,
        BATCH_RESOURCE,
        AUDIT_EVENTS,
        AUDIT_EVENTS_HTTP_HANDLER,
        BECPU_MANAGER,
        BECPU_EVICT,
        CPU_EVICT,
        CPU_ALLOCATABLE_EVICT,
        BE_MEMORY_EVICT,
        MEMORY_EVICT,
        MEMORY_ALLOCATABLE_EVICT,
        SYSTEM_CONFIG,
        RESCTRL_COLLECTOR,
        CGROUP_RECONCILE,
        ACCELERATORS,
        RDMA_DEVICES,
        CPI_COLLECTOR,
        LIBPFM4,
        PSI_COLLECTOR,
        BLK_IO_RECONCILE,
        COLD_PAGE_COLLECTOR,
        HUGE_PAGE_REPORT,
        POD_RESOURCES_PROXY,
        HAMI_CORE_VGPU_MONITOR,
        PER_CPU_METRIC,
        NODE_METRIC_PROM_METRICS,
        GPU_ENV_INJECT,
        RDMA_DEVICE_INJECT,
        CPU_NORMALIZATION,
        CORE_SCHED,
        TERWAY_QO_S,
        TC_NETWORK_QO_S,
        RESCTRL,
        OOM_SCORE_ADJ,
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    /// BECPUManager acts (the cpuset hook's BE pools, cpusuppress standing aside), so asking
    /// for it switches it on without a warning.
    #[test]
    fn be_cpu_manager_is_honoured_when_asked_for() {
        let user = std::collections::BTreeMap::from([("BECPUManager".to_string(), true)]);
        assert!(KOORDLET_GATES.from_user(&user).on(BECPU_MANAGER));
        assert!(
            !KOORDLET_GATES
                .from_user(&Default::default())
                .on(BECPU_MANAGER)
        );
        assert!(KOORDLET_GATES.unsupported(&user).is_empty());
    }

    /// The collectors of issue 41 each run behind their gate, which must switch on.
    #[test]
    fn collector_gates_switch_on() {
        for g in [RESCTRL_COLLECTOR, COLD_PAGE_COLLECTOR, PER_CPU_METRIC] {
            let user = std::collections::BTreeMap::from([(g.name.to_string(), true)]);
            assert!(KOORDLET_GATES.from_user(&user).on(g), "{}", g.name);
        }
    }
}
