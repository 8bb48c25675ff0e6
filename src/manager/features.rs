//! koord-manager feature gates (`--feature-gates` in Koordinator; `manager.featureGates`
//! here) with Koordinator's defaults. Gates whose behaviour koord does not implement yet
//! stay off with a warning when switched on (refused when `common.strict`).

use crate::kernel::features::{GateTable, gate};

pub use crate::kernel::features::Gates;

/// (name, Koordinator's default, implemented by koord).
pub const MANAGER_GATES: GateTable = GateTable {
    role: "manager",
    gates: &[
        gate("WebhookFramework", true, true),
        gate("PodMutatingWebhook", true, true),
        gate("PodValidatingWebhook", true, true),
        gate("ElasticMutatingWebhook", true, true),
        gate("ElasticValidatingWebhook", true, true),
        gate("NodeMutatingWebhook", false, true),
        gate("NodeValidatingWebhook", false, true),
        gate("ConfigMapValidatingWebhook", false, true),
        gate("ReservationMutatingWebhook", false, true),
        gate("BindingAdmissionWebhook", false, true),
        gate("ColocationProfileSkipMutatingResources", false, true),
        gate("ColocationProfileSkipValidatingPriority", false, true),
        gate("ColocationProfileController", false, true),
        gate("MultiQuotaTree", false, true),
        gate("ElasticQuotaIgnorePodOverhead", false, false),
        gate("ElasticQuotaGuaranteeUsage", false, false),
        gate("ElasticQuotaEnableUpdateResourceKey", false, true),
        gate("ElasticQuotaEvaluationTransformPod", false, false),
        gate("DisableDefaultQuota", false, true),
        gate("SupportParentQuotaSubmitPod", false, true),
        gate("EnableQuotaAdmission", false, true),
        gate("EnableQuotaAdmissionOnUpdate", false, true),
        gate("EnableSyncGPUSharedResource", false, true),
        gate("ValidatePodDeviceResource", false, true),
        gate("EnablePodEnhancedValidator", false, true),
        gate("DisableExtendedResourceSpec", false, true),
        gate("DisableDeviceResourceSpec", false, true),
        gate("PriorityTransformer", false, false),
        gate("PreemptionPolicyTransformer", false, false),
        gate("ReplaceResourcesTransformer", false, false),
    ],
};

/// Koordinator's defaults for the manager.
pub fn defaults() -> Gates {
    MANAGER_GATES.defaults()
}
