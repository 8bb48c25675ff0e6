//! koord-scheduler feature gates (`--feature-gates` in Koordinator, `scheduler.featureGates`
//! here) with Koordinator's defaults (`pkg/features/scheduler_features.go`).
//! `DisableCSIStorageCapacityInformer` stops the CSIDriver and CSIStorageCapacity watches
//! (no capacity is checked then); the other informer switches need nothing from koord.

use crate::kernel::features::{Gate, GateTable, gate};

// Koordinator's gates of this component, each checked by name at compile time.
pub const COMPATIBLE_CSI_STORAGE_CAPACITY: Gate = gate("CompatibleCSIStorageCapacity", false, true);
pub const DISABLE_CSI_STORAGE_CAPACITY_INFORMER: Gate =
    gate("DisableCSIStorageCapacityInformer", false, true);
pub const COMPATIBLE_POD_DISRUPTION_BUDGET: Gate =
    gate("CompatiblePodDisruptionBudget", false, true);
pub const DISABLE_POD_DISRUPTION_BUDGET_INFORMER: Gate =
    gate("DisablePodDisruptionBudgetInformer", false, true);
pub const DISABLE_DYNAMIC_RESOURCE_ALLOCATION_INFORMER: Gate =
    gate("DisableDynamicResourceAllocationInformer", false, true);
pub const RESIZE_POD: Gate = gate("ResizePod", false, false);
pub const MULTI_QUOTA_TREE: Gate = gate("MultiQuotaTree", false, false);
pub const ELASTIC_QUOTA_IGNORE_POD_OVERHEAD: Gate =
    gate("ElasticQuotaIgnorePodOverhead", false, false);
pub const ELASTIC_QUOTA_IGNORE_TERMINATING_POD: Gate =
    gate("ElasticQuotaIgnoreTerminatingPod", false, false);
pub const ELASTIC_QUOTA_IMMEDIATE_IGNORE_TERMINATING_POD: Gate =
    gate("ElasticQuotaImmediateIgnoreTerminatingPod", false, false);
pub const ELASTIC_QUOTA_GUARANTEE_USAGE: Gate = gate("ElasticQuotaGuaranteeUsage", false, false);
pub const DISABLE_DEFAULT_QUOTA: Gate = gate("DisableDefaultQuota", false, false);
pub const SUPPORT_PARENT_QUOTA_SUBMIT_POD: Gate = gate("SupportParentQuotaSubmitPod", false, false);
pub const LAZY_RESERVATION_RESTORE: Gate = gate("LazyReservationRestore", false, false);
pub const OMIT_NODE_LABELS_FOR_RESERVATION: Gate =
    gate("OmitNodeLabelsForReservation", false, false);
pub const SKIP_RESERVATION_FITS_NODE: Gate = gate("SkipReservationFitsNode", false, false);
pub const DEVICE_PLUGIN_ADAPTION: Gate = gate("DevicePluginAdaption", false, true);
pub const CLEAN_EXPIRED_RESERVATION_ALLOCATED: Gate =
    gate("CleanExpiredReservationAllocated", false, false);
pub const SKIP_FILTER_WITH_NOMINATED_PODS: Gate = gate("SkipFilterWithNominatedPods", false, false);
pub const DYNAMIC_SCHEDULER_CHECK: Gate = gate("DynamicSchedulerCheck", true, false);
pub const CSI_STORAGE_CAPACITY: Gate = gate("CSIStorageCapacity", true, true);
pub const GENERIC_EPHEMERAL_VOLUME: Gate = gate("GenericEphemeralVolume", true, true);
pub const POD_DISRUPTION_BUDGET: Gate = gate("PodDisruptionBudget", true, true);
pub const SYNC_BARRIER: Gate = gate("SyncBarrier", false, false);
pub const CROSS_SCHEDULER_NOMINATION: Gate = gate("CrossSchedulerNomination", false, false);
pub const GANG_PENDING_PODS_CONDITION_PATCH: Gate =
    gate("GangPendingPodsConditionPatch", true, false);
pub const ENABLE_INLINE_BATCH_SCHEDULE: Gate = gate("EnableInlineBatchSchedule", false, true);
// Koordinator's open-source build leaves its snapshot hooks as no-ops; so does koord (the
// batch runs on the scheduler's own cache).
pub const ENABLE_BATCH_SCHEDULE_NODE_SNAPSHOT: Gate =
    gate("EnableBatchScheduleNodeSnapshot", true, true);

/// (name, Koordinator's default, implemented by koord).
pub const SCHEDULER_GATES: GateTable = GateTable {
    role: "scheduler",
    gates: &[
        COMPATIBLE_CSI_STORAGE_CAPACITY,
        DISABLE_CSI_STORAGE_CAPACITY_INFORMER,
        COMPATIBLE_POD_DISRUPTION_BUDGET,
        DISABLE_POD_DISRUPTION_BUDGET_INFORMER,
        DISABLE_DYNAMIC_RESOURCE_ALLOCATION_INFORMER,
        RESIZE_POD,
        MULTI_QUOTA_TREE,
        ELASTIC_QUOTA_IGNORE_POD_OVERHEAD,
        ELASTIC_QUOTA_IGNORE_TERMINATING_POD,
        ELASTIC_QUOTA_IMMEDIATE_IGNORE_TERMINATING_POD,
        ELASTIC_QUOTA_GUARANTEE_USAGE,
        DISABLE_DEFAULT_QUOTA,
        SUPPORT_PARENT_QUOTA_SUBMIT_POD,
        LAZY_RESERVATION_RESTORE,
        OMIT_NODE_LABELS_FOR_RESERVATION,
        SKIP_RESERVATION_FITS_NODE,
        DEVICE_PLUGIN_ADAPTION,
        CLEAN_EXPIRED_RESERVATION_ALLOCATED,
        SKIP_FILTER_WITH_NOMINATED_PODS,
        DYNAMIC_SCHEDULER_CHECK,
        CSI_STORAGE_CAPACITY,
        GENERIC_EPHEMERAL_VOLUME,
        POD_DISRUPTION_BUDGET,
        SYNC_BARRIER,
        CROSS_SCHEDULER_NOMINATION,
        GANG_PENDING_PODS_CONDITION_PATCH,
        ENABLE_INLINE_BATCH_SCHEDULE,
        ENABLE_BATCH_SCHEDULE_NODE_SNAPSHOT,
    ],
};
