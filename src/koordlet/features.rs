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

/// Gates koord acts on; the others are accepted (Koordinator configs keep working) but
/// switching one on only earns a warning.
pub const IMPLEMENTED: &[&str] = &[
    "BECPUSuppress",
    "CPUBurst",
    "RdtResctrl",
    "BatchResource",
    "BECPUEvict",
    "CPUEvict",
    "CPUAllocatableEvict",
    "BEMemoryEvict",
    "MemoryEvict",
    "MemoryAllocatableEvict",
    "SystemConfig",
    "CgroupReconcile",
    "BlkIOReconcile",
    "CPICollector",
    "PSICollector",
];

/// Gates explicitly switched on that koord does not implement yet.
pub fn not_implemented(overrides: &BTreeMap<String, bool>) -> Vec<String> {
    overrides
        .iter()
        .filter(|(k, on)| **on && !IMPLEMENTED.contains(&k.as_str()))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Names that are not koordlet gates.
pub fn unknown(overrides: &BTreeMap<String, bool>) -> Vec<String> {
    overrides
        .keys()
        .filter(|k| !GATES.iter().any(|(g, _)| g == k))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implemented_gates_are_gates_and_others_are_reported() {
        for g in IMPLEMENTED {
            assert!(GATES.iter().any(|(n, _)| n == g), "{g}");
        }
        let o: BTreeMap<String, bool> = [
            ("CPUBurst".to_string(), true),
            ("CoreSched".to_string(), true),
            ("Accelerators".to_string(), false),
        ]
        .into();
        assert_eq!(not_implemented(&o), ["CoreSched"]);
    }
}
