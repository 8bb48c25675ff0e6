//! koord-manager feature gates (`--feature-gates` in Koordinator; `manager.featureGates`
//! here) with Koordinator's defaults. Gates whose behaviour koord does not implement yet
//! are rejected when switched on, so a config never silently does less than it says.

use std::collections::BTreeMap;

/// (name, default, implemented)
const GATES: &[(&str, bool, bool)] = &[
    ("WebhookFramework", true, true),
    ("PodMutatingWebhook", true, true),
    ("PodValidatingWebhook", true, true),
    ("ElasticMutatingWebhook", true, true),
    ("ElasticValidatingWebhook", true, true),
    ("NodeMutatingWebhook", false, true),
    ("NodeValidatingWebhook", false, true),
    ("ConfigMapValidatingWebhook", false, true),
    ("ReservationMutatingWebhook", false, false),
    ("BindingAdmissionWebhook", false, false),
    ("ColocationProfileSkipMutatingResources", false, true),
    ("ColocationProfileSkipValidatingPriority", false, true),
    ("ColocationProfileController", false, false),
    ("MultiQuotaTree", false, false),
    ("ElasticQuotaIgnorePodOverhead", false, false),
    ("ElasticQuotaGuaranteeUsage", false, false),
    ("ElasticQuotaEnableUpdateResourceKey", false, true),
    ("ElasticQuotaEvaluationTransformPod", false, false),
    ("DisableDefaultQuota", false, true),
    ("SupportParentQuotaSubmitPod", false, true),
    ("EnableQuotaAdmission", false, false),
    ("EnableQuotaAdmissionOnUpdate", false, false),
    ("EnableSyncGPUSharedResource", false, false),
    ("ValidatePodDeviceResource", false, false),
    ("EnablePodEnhancedValidator", false, false),
    ("DisableExtendedResourceSpec", false, true),
    ("DisableDeviceResourceSpec", false, true),
    ("PriorityTransformer", false, false),
    ("PreemptionPolicyTransformer", false, false),
    ("ReplaceResourcesTransformer", false, false),
];

/// Effective gate values: defaults overridden by the user's map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gates(BTreeMap<&'static str, bool>);

impl Default for Gates {
    fn default() -> Self {
        Gates(GATES.iter().map(|(n, d, _)| (*n, *d)).collect())
    }
}

impl Gates {
    /// Checks the user's map: unknown names and unimplemented gates switched on are errors.
    pub fn from_user(user: &BTreeMap<String, bool>) -> Result<Gates, String> {
        let mut gates = Gates::default();
        for (name, on) in user {
            let Some((known, _, implemented)) = GATES.iter().find(|(n, _, _)| n == name) else {
                return Err(format!("unknown feature gate {name:?}"));
            };
            if *on && !implemented {
                return Err(format!(
                    "feature gate {name} is not implemented by koord yet; leave it off"
                ));
            }
            gates.0.insert(known, *on);
        }
        Ok(gates)
    }

    pub fn enabled(&self, name: &str) -> bool {
        self.0.get(name).copied().unwrap_or(false)
    }

    /// A copy with one gate set (tests, benches).
    pub fn with(mut self, name: &'static str, on: bool) -> Gates {
        self.0.insert(name, on);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let g = Gates::default();
        assert!(g.enabled("PodMutatingWebhook") && !g.enabled("ConfigMapValidatingWebhook"));
        let user = BTreeMap::from([("ConfigMapValidatingWebhook".to_string(), true)]);
        assert!(
            Gates::from_user(&user)
                .unwrap()
                .enabled("ConfigMapValidatingWebhook")
        );
        let bad = BTreeMap::from([("NoSuchGate".to_string(), true)]);
        assert!(Gates::from_user(&bad).unwrap_err().contains("NoSuchGate"));
        let unimpl = BTreeMap::from([("EnableQuotaAdmission".to_string(), true)]);
        assert!(
            Gates::from_user(&unimpl)
                .unwrap_err()
                .contains("not implemented")
        );
        let off = BTreeMap::from([("EnableQuotaAdmission".to_string(), false)]);
        assert!(Gates::from_user(&off).is_ok());
    }
}
