//! koordlet feature gates with Koordinator's defaults (`pkg/features/koordlet_features.go`
//! and the runtime-hook gates). Set with `koordlet.featureGates: {Name: bool}`. Gates koord
//! does not act on yet are accepted (Koordinator configs keep working); switching one on
//! earns a warning at start (an error when `common.strict`).

use crate::kernel::features::{GateTable, gate};

pub use crate::kernel::features::Gates;

/// (name, Koordinator's default, implemented by koord).
pub const KOORDLET_GATES: GateTable = GateTable {
    role: "koordlet",
    gates: &[
        gate("BECPUSuppress", true, true),
        gate("CPUBurst", true, true),
        gate("RdtResctrl", true, true),
        gate("NodeTopologyReport", true, true),
        gate("GroupIdentity", true, true),
        gate("CPUSetAllocator", true, true),
        gate("BatchResource", true, true),
        gate("AuditEvents", false, false),
        gate("AuditEventsHTTPHandler", false, false),
        gate("BECPUManager", false, false),
        gate("BECPUEvict", false, true),
        gate("CPUEvict", false, true),
        gate("CPUAllocatableEvict", false, true),
        gate("BEMemoryEvict", false, true),
        gate("MemoryEvict", false, true),
        gate("MemoryAllocatableEvict", false, true),
        gate("SystemConfig", false, true),
        gate("ResctrlCollector", false, false),
        gate("CgroupReconcile", false, true),
        gate("Accelerators", false, true),
        gate("RDMADevices", false, true),
        gate("CPICollector", false, true),
        gate("Libpfm4", false, false),
        gate("PSICollector", false, true),
        gate("BlkIOReconcile", false, true),
        gate("ColdPageCollector", false, false),
        gate("HugePageReport", false, false),
        gate("PodResourcesProxy", false, false),
        gate("HamiCoreVGPUMonitor", false, false),
        gate("PerCPUMetric", false, false),
        gate("NodeMetricPromMetrics", false, false),
        gate("GPUEnvInject", false, true),
        gate("RDMADeviceInject", false, true),
        gate("CPUNormalization", false, true),
        gate("CoreSched", false, true),
        gate("TerwayQoS", false, false),
        gate("TCNetworkQoS", false, false),
        gate("Resctrl", false, false),
        gate("OOMScoreAdj", false, true),
    ],
};
