//! koord-scheduler feature gates (`--feature-gates` in Koordinator, `scheduler.featureGates`
//! here) with Koordinator's defaults (`pkg/features/scheduler_features.go`). The informer
//! switches for volume and disruption APIs need nothing from koord, which watches none of
//! those APIs; they count as implemented.

use crate::kernel::features::{GateTable, gate};

/// (name, Koordinator's default, implemented by koord).
pub const SCHEDULER_GATES: GateTable = GateTable {
    role: "scheduler",
    gates: &[
        gate("CompatibleCSIStorageCapacity", false, true),
        gate("DisableCSIStorageCapacityInformer", false, true),
        gate("CompatiblePodDisruptionBudget", false, true),
        gate("DisablePodDisruptionBudgetInformer", false, true),
        gate("DisableDynamicResourceAllocationInformer", false, true),
        gate("ResizePod", false, false),
        gate("MultiQuotaTree", false, false),
        gate("ElasticQuotaIgnorePodOverhead", false, false),
        gate("ElasticQuotaIgnoreTerminatingPod", false, false),
        gate("ElasticQuotaImmediateIgnoreTerminatingPod", false, false),
        gate("ElasticQuotaGuaranteeUsage", false, false),
        gate("DisableDefaultQuota", false, false),
        gate("SupportParentQuotaSubmitPod", false, false),
        gate("LazyReservationRestore", false, false),
        gate("OmitNodeLabelsForReservation", false, false),
        gate("SkipReservationFitsNode", false, false),
        gate("DevicePluginAdaption", false, false),
        gate("CleanExpiredReservationAllocated", false, false),
        gate("SkipFilterWithNominatedPods", false, false),
        gate("DynamicSchedulerCheck", true, false),
        gate("CSIStorageCapacity", true, true),
        gate("GenericEphemeralVolume", true, true),
        gate("PodDisruptionBudget", true, true),
        gate("SyncBarrier", false, false),
        gate("CrossSchedulerNomination", false, false),
        gate("GangPendingPodsConditionPatch", true, false),
        gate("EnableInlineBatchSchedule", false, false),
        gate("EnableBatchScheduleNodeSnapshot", true, false),
    ],
};
