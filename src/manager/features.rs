//! koord-manager feature gates (`--feature-gates` in Koordinator; `manager.featureGates`
//! here) with Koordinator's defaults. Gates whose behaviour koord does not implement yet
//! stay off with a warning when switched on (refused when `common.strict`).

use crate::kernel::features::{Gate, GateTable, gate};

pub use crate::kernel::features::Gates;

// Koordinator's gates of this component, each checked by name at compile time.
pub const WEBHOOK_FRAMEWORK: Gate = gate("WebhookFramework", true, true);
pub const POD_MUTATING_WEBHOOK: Gate = gate("PodMutatingWebhook", true, true);
pub const POD_VALIDATING_WEBHOOK: Gate = gate("PodValidatingWebhook", true, true);
pub const ELASTIC_MUTATING_WEBHOOK: Gate = gate("ElasticMutatingWebhook", true, true);
pub const ELASTIC_VALIDATING_WEBHOOK: Gate = gate("ElasticValidatingWebhook", true, true);
pub const NODE_MUTATING_WEBHOOK: Gate = gate("NodeMutatingWebhook", false, true);
pub const NODE_VALIDATING_WEBHOOK: Gate = gate("NodeValidatingWebhook", false, true);
pub const CONFIG_MAP_VALIDATING_WEBHOOK: Gate = gate("ConfigMapValidatingWebhook", false, true);
pub const RESERVATION_MUTATING_WEBHOOK: Gate = gate("ReservationMutatingWebhook", false, true);
pub const BINDING_ADMISSION_WEBHOOK: Gate = gate("BindingAdmissionWebhook", false, true);
pub const COLOCATION_PROFILE_SKIP_MUTATING_RESOURCES: Gate =
    gate("ColocationProfileSkipMutatingResources", false, true);
pub const COLOCATION_PROFILE_SKIP_VALIDATING_PRIORITY: Gate =
    gate("ColocationProfileSkipValidatingPriority", false, true);
pub const COLOCATION_PROFILE_CONTROLLER: Gate = gate("ColocationProfileController", false, true);
pub const MULTI_QUOTA_TREE: Gate = gate("MultiQuotaTree", false, true);
pub const ELASTIC_QUOTA_IGNORE_POD_OVERHEAD: Gate =
    gate("ElasticQuotaIgnorePodOverhead", false, false);
pub const ELASTIC_QUOTA_GUARANTEE_USAGE: Gate = gate("ElasticQuotaGuaranteeUsage", false, false);
pub const ELASTIC_QUOTA_ENABLE_UPDATE_RESOURCE_KEY: Gate =
    gate("ElasticQuotaEnableUpdateResourceKey", false, true);
pub const ELASTIC_QUOTA_EVALUATION_TRANSFORM_POD: Gate =
    gate("ElasticQuotaEvaluationTransformPod", false, false);
pub const DISABLE_DEFAULT_QUOTA: Gate = gate("DisableDefaultQuota", false, true);
pub const SUPPORT_PARENT_QUOTA_SUBMIT_POD: Gate = gate("SupportParentQuotaSubmitPod", false, true);
pub const ENABLE_QUOTA_ADMISSION: Gate = gate("EnableQuotaAdmission", false, true);
pub const ENABLE_QUOTA_ADMISSION_ON_UPDATE: Gate =
    gate("EnableQuotaAdmissionOnUpdate", false, true);
pub const ENABLE_SYNC_GPU_SHARED_RESOURCE: Gate = gate("EnableSyncGPUSharedResource", false, true);
pub const VALIDATE_POD_DEVICE_RESOURCE: Gate = gate("ValidatePodDeviceResource", false, true);
pub const ENABLE_POD_ENHANCED_VALIDATOR: Gate = gate("EnablePodEnhancedValidator", false, true);
pub const DISABLE_EXTENDED_RESOURCE_SPEC: Gate = gate("DisableExtendedResourceSpec", false, true);
pub const DISABLE_DEVICE_RESOURCE_SPEC: Gate = gate("DisableDeviceResourceSpec", false, true);
pub const PRIORITY_TRANSFORMER: Gate = gate("PriorityTransformer", false, false);
pub const PREEMPTION_POLICY_TRANSFORMER: Gate = gate("PreemptionPolicyTransformer", false, false);
pub const REPLACE_RESOURCES_TRANSFORMER: Gate = gate("ReplaceResourcesTransformer", false, false);

/// (name, Koordinator's default, implemented by koord).
pub const MANAGER_GATES: GateTable = GateTable {
    role: "manager",
    gates: &[
        WEBHOOK_FRAMEWORK,
        POD_MUTATING_WEBHOOK,
        POD_VALIDATING_WEBHOOK,
        ELASTIC_MUTATING_WEBHOOK,
        ELASTIC_VALIDATING_WEBHOOK,
        NODE_MUTATING_WEBHOOK,
        NODE_VALIDATING_WEBHOOK,
        CONFIG_MAP_VALIDATING_WEBHOOK,
        RESERVATION_MUTATING_WEBHOOK,
        BINDING_ADMISSION_WEBHOOK,
        COLOCATION_PROFILE_SKIP_MUTATING_RESOURCES,
        COLOCATION_PROFILE_SKIP_VALIDATING_PRIORITY,
        COLOCATION_PROFILE_CONTROLLER,
        MULTI_QUOTA_TREE,
        ELASTIC_QUOTA_IGNORE_POD_OVERHEAD,
        ELASTIC_QUOTA_GUARANTEE_USAGE,
        ELASTIC_QUOTA_ENABLE_UPDATE_RESOURCE_KEY,
        ELASTIC_QUOTA_EVALUATION_TRANSFORM_POD,
        DISABLE_DEFAULT_QUOTA,
        SUPPORT_PARENT_QUOTA_SUBMIT_POD,
        ENABLE_QUOTA_ADMISSION,
        ENABLE_QUOTA_ADMISSION_ON_UPDATE,
        ENABLE_SYNC_GPU_SHARED_RESOURCE,
        VALIDATE_POD_DEVICE_RESOURCE,
        ENABLE_POD_ENHANCED_VALIDATOR,
        DISABLE_EXTENDED_RESOURCE_SPEC,
        DISABLE_DEVICE_RESOURCE_SPEC,
        PRIORITY_TRANSFORMER,
        PREEMPTION_POLICY_TRANSFORMER,
        REPLACE_RESOURCES_TRANSFORMER,
    ],
};

/// Koordinator's defaults for the manager.
pub fn defaults() -> Gates {
    MANAGER_GATES.defaults()
}
