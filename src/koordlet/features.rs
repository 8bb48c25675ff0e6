//! koordlet feature gates with Koordinator's defaults (`pkg/features/koordlet_features.go`
//! and the runtime-hook gates). Set with `koordlet.featureGates: {Name: bool}`.

use std::collections::BTreeMap;

/// (name, default).
pub const GATES: &[(&str, bool)] = &[
    ("BECPUSuppress", true),
    ("CPUBurst", true),
    ("RdtResctrl", true),
    ("NodeTopologyReport", true),
    ("GroupIdentity", true),
    ("CPUSetAllocator", true),
    ("BatchResource", true),
    ("AuditEvents", false),
    ("AuditEventsHTTPHandler", false),
    ("BECPUManager", false),
    ("BECPUEvict", false),
    ("CPUEvict", false),
    ("CPUAllocatableEvict", false),
    ("BEMemoryEvict", false),
    ("MemoryEvict", false),
    ("MemoryAllocatableEvict", false),
    ("SystemConfig", false),
    ("ResctrlCollector", false),
    ("CgroupReconcile", false),
    ("Accelerators", false),
    ("RDMADevices", false),
    ("CPICollector", false),
    ("Libpfm4", false),
    ("PSICollector", false),
    ("BlkIOReconcile", false),
    ("ColdPageCollector", false),
    ("HugePageReport", false),
    ("PodResourcesProxy", false),
    ("HamiCoreVGPUMonitor", false),
    ("PerCPUMetric", false),
    ("NodeMetricPromMetrics", false),
    ("GPUEnvInject", false),
    ("RDMADeviceInject", false),
    ("CPUNormalization", false),
    ("CoreSched", false),
    ("TerwayQoS", false),
    ("TCNetworkQoS", false),
    ("Resctrl", false),
    ("OOMScoreAdj", false),
];

/// The gates in force: defaults with the configured overrides.
#[derive(Debug, Clone)]
pub struct Gates(BTreeMap<String, bool>);

impl Gates {
    pub fn new(overrides: &BTreeMap<String, bool>) -> Gates {
        let mut m: BTreeMap<String, bool> =
            GATES.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        for (k, v) in overrides {
            m.insert(k.clone(), *v);
        }
        Gates(m)
    }

    pub fn enabled(&self, name: &str) -> bool {
        self.0.get(name).copied().unwrap_or(false)
    }
}

/// Names that are not koordlet gates.
pub fn unknown(overrides: &BTreeMap<String, bool>) -> Vec<String> {
    overrides
        .keys()
        .filter(|k| !GATES.iter().any(|(g, _)| g == k))
        .cloned()
        .collect()
}
