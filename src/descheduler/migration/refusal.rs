//! Why the evictor filters (DefaultEvictor's and MigrationController's) leave a pod alone,
//! worded as the descheduler's reasons.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("pod is a mirror pod")]
    Mirror,
    #[error("pod is a DaemonSet pod")]
    DaemonSet,
    #[error("pod is a static pod")]
    Static,
    #[error("pod is terminating")]
    Terminating,
    #[error("pod does not have any ownerRefs")]
    NoOwner,
    #[error("pod has system critical priority")]
    SystemCritical,
    #[error("pod has higher priority than specified priority class threshold")]
    AbovePriorityThreshold,
    #[error("pod has local storage and descheduler is not configured with evictLocalStoragePods")]
    LocalStorage,
    #[error("pod has a PVC and descheduler is configured to ignore PVC pods")]
    Pvc,
    #[error(
        "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as unschedulable"
    )]
    NodeFit,
    #[error("pod labels do not match the labelSelector filter in the policy parameter")]
    LabelSelector,
    #[error("pod's namespace is not evictable")]
    Namespace,
    #[error("pod has the maximum eviction cost")]
    MaxEvictionCost,
    #[error("pod already has a PodMigrationJob in flight")]
    InFlight,
    /// ReservationFirst needs a scheduler that knows Reservations.
    #[error("pod's scheduler {0} does not support Reservation")]
    NoReservationScheduler(String),
    #[error(
        "pod fails the following checks: expectedReplicas (replicas {replicas}, maxMigrating {max_migrating}, maxUnavailable {max_unavailable})"
    )]
    ExpectedReplicas {
        replicas: i32,
        max_migrating: i32,
        max_unavailable: i32,
    },
    /// A `maxMigrating…` / `maxUnavailablePerWorkload` limit already reached.
    #[error("{limit} {max} reached ({count} migrating)")]
    Limit {
        limit: String,
        max: i32,
        count: usize,
    },
}
