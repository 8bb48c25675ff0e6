//! The NodeSLO as the QoS strategies read it: each section once, with Koordinator's
//! defaults applied (`pkg/util/sloconfig/nodeslo_config.go`), computed when the NodeSLO
//! changes instead of per strategy, per pod, per tick.

use crate::api::slo::NodeSLO;
use crate::api::slo::nodeslo::{
    CPUBurstStrategy, HostApplicationSpec, ResourceQOSStrategy, ResourceThresholdStrategy,
    SystemStrategy,
};
use crate::api::sloconfig::overlay;
use crate::api::sloconfig::strategies::{default_cpu_burst, default_threshold};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SloView {
    /// `resourceUsedThresholdWithBE` over the defaults (cpusuppress, evictions).
    pub threshold: ResourceThresholdStrategy,
    /// `cpuBurstStrategy` over the defaults.
    pub cpu_burst: CPUBurstStrategy,
    /// `resourceQOSStrategy` as given (each class's sections default to off).
    pub resource_qos: ResourceQOSStrategy,
    /// `systemStrategy`; none means leave the kernel knobs alone.
    pub system: Option<SystemStrategy>,
    pub host_applications: Vec<HostApplicationSpec>,
}

impl SloView {
    pub fn new(slo: Option<&NodeSLO>) -> SloView {
        let spec = slo.map(|s| &s.spec);
        let user_threshold = spec
            .and_then(|s| s.resource_used_threshold_with_be.clone())
            .unwrap_or_default();
        let user_burst = spec
            .and_then(|s| s.cpu_burst_strategy.clone())
            .unwrap_or_default();
        SloView {
            threshold: overlay(&default_threshold(), &user_threshold),
            cpu_burst: overlay(&default_cpu_burst(), &user_burst),
            resource_qos: spec
                .and_then(|s| s.resource_qos_strategy.clone())
                .unwrap_or_default(),
            system: spec.and_then(|s| s.system_strategy.clone()),
            host_applications: spec
                .and_then(|s| s.host_applications.clone())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_without_a_nodeslo_and_under_partial_ones() {
        let none = SloView::new(None);
        assert_eq!(none.threshold, default_threshold());
        assert_eq!(none.cpu_burst, default_cpu_burst());
        let slo: NodeSLO = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "spec": {"resourceUsedThresholdWithBE": {"enable": true, "cpuSuppressThresholdPercent": 50}}
        }))
        .unwrap();
        let v = SloView::new(Some(&slo));
        assert_eq!(v.threshold.cpu_suppress_threshold_percent, Some(50));
        assert_eq!(
            v.threshold.memory_evict_threshold_percent,
            default_threshold().memory_evict_threshold_percent,
            "unset fields keep the defaults"
        );
    }
}
