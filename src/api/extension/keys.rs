//! Label and annotation keys shared across roles.

pub const DOMAIN_PREFIX: &str = "koordinator.sh/";
pub const NODE_DOMAIN_PREFIX: &str = "node.koordinator.sh/";
pub const SCHEDULING_DOMAIN_PREFIX: &str = "scheduling.koordinator.sh/";

// Pod labels.
pub const LABEL_POD_QOS: &str = "koordinator.sh/qosClass";
pub const LABEL_POD_PRIORITY: &str = "koordinator.sh/priority";
pub const LABEL_POD_PRIORITY_CLASS: &str = "koordinator.sh/priority-class";
pub const LABEL_EVICTION_ENABLED: &str = "koordinator.sh/eviction-enabled";
pub const LABEL_CORE_SCHED_GROUP_ID: &str = "koordinator.sh/core-sched-group-id";
/// The scheduler profile for a pod, over its `spec.schedulerName` (`LabelSchedulerName`).
pub const LABEL_SCHEDULER_NAME: &str = "scheduling.koordinator.sh/scheduler-name";
/// Where the scheduler keeps `spec.schedulerName` when the label replaced it in its cache.
pub const ANNOTATION_ORIGINAL_SCHEDULER_NAME: &str =
    "internal.scheduling.koordinator.sh/original-scheduler-name";
pub const LABEL_CORE_SCHED_POLICY: &str = "koordinator.sh/core-sched-policy";
/// A Reservation's order among those a pod matches (the descheduler sets unix ms).
pub const LABEL_RESERVATION_ORDER: &str = "scheduling.koordinator.sh/reservation-order";
pub const LABEL_RESERVATION_IGNORED: &str = "scheduling.koordinator.sh/reservation-ignored";
pub const LABEL_QUOTA_NAME: &str = "quota.scheduling.koordinator.sh/name";

// Pod annotations.
pub const ANNOTATION_RESOURCE_SPEC: &str = "scheduling.koordinator.sh/resource-spec";
pub const ANNOTATION_RESOURCE_STATUS: &str = "scheduling.koordinator.sh/resource-status";
pub const ANNOTATION_DEVICE_ALLOCATED: &str = "scheduling.koordinator.sh/device-allocated";
pub const ANNOTATION_EXTENDED_RESOURCE_SPEC: &str = "node.koordinator.sh/extended-resource-spec";
pub const ANNOTATION_RESERVATION_ALLOCATED: &str =
    "scheduling.koordinator.sh/reservation-allocated";
pub const ANNOTATION_RESERVATION_AFFINITY: &str = "scheduling.koordinator.sh/reservation-affinity";
pub const ANNOTATION_RESERVE_POD: &str = "scheduling.koordinator.sh/reserve-pod";
pub const ANNOTATION_SOFT_EVICTION: &str = "scheduling.koordinator.sh/soft-eviction";
pub const ANNOTATION_EVICTION_COST: &str = "scheduling.koordinator.sh/eviction-cost";
pub const ANNOTATION_EVICTION_POLICY: &str = "koordinator.sh/eviction-policy";
pub const ANNOTATION_EVICTION_PRIORITY: &str = "koordinator.sh/eviction-priority";
pub const ANNOTATION_CPU_BURST: &str = "koordinator.sh/cpuBurst";
pub const ANNOTATION_CPU_QOS: &str = "koordinator.sh/cpuQOS";
pub const ANNOTATION_MEMORY_QOS: &str = "koordinator.sh/memoryQOS";
pub const ANNOTATION_BLKIO_QOS: &str = "koordinator.sh/blkioQOS";
pub const ANNOTATION_OOM_SCORE_ADJ: &str = "koordinator.sh/oom-score-adj";
pub const ANNOTATION_LOAD_SCALING_FACTORS: &str =
    "scheduling.koordinator.sh/load-estimated-scaling-factors";
pub const ANNOTATION_USAGE_THRESHOLDS: &str = "scheduling.koordinator.sh/usage-thresholds";
pub const ANNOTATION_GANG_NAME: &str = "gang.scheduling.koordinator.sh/name";
pub const ANNOTATION_GANG_MIN_NUM: &str = "gang.scheduling.koordinator.sh/min-available";
pub const LABEL_POD_GROUP: &str = "pod-group.scheduling.sigs.k8s.io";

// Node labels and annotations.
pub const ANNOTATION_NODE_RESERVATION: &str = "node.koordinator.sh/reservation";
pub const ANNOTATION_NODE_SYSTEM_QOS_RESOURCE: &str = "node.koordinator.sh/system-qos-resource";
pub const ANNOTATION_NODE_RAW_ALLOCATABLE: &str = "node.koordinator.sh/raw-allocatable";
pub const ANNOTATION_NODE_COLOCATION_STRATEGY: &str = "node.koordinator.sh/colocation-strategy";
pub const ANNOTATION_NODE_ORIGIN_EXTENDED_ALLOCATABLE: &str =
    "node.koordinator.sh/originExtendedAllocatable";
pub const ANNOTATION_NODE_THIRD_PARTY_ALLOCATIONS: &str =
    "node.koordinator.sh/thirdPartyAllocations";
pub const ANNOTATION_NODE_CPU_NORMALIZATION_RATIO: &str =
    "node.koordinator.sh/cpu-normalization-ratio";
pub const ANNOTATION_NODE_AMPLIFICATION_RATIO: &str =
    "node.koordinator.sh/resource-amplification-ratio";
pub const ANNOTATION_NODE_NETWORK_BANDWIDTH: &str = "node.koordinator.sh/network-bandwidth";
pub const ANNOTATION_NODE_CPU_TOPOLOGY: &str = "node.koordinator.sh/cpu-topology";
pub const ANNOTATION_NODE_CPU_BASIC_INFO: &str = "node.koordinator.sh/cpu-basic-info";
pub const LABEL_GPU_VENDOR: &str = "node.koordinator.sh/gpu-vendor";
pub const LABEL_GPU_MODEL: &str = "node.koordinator.sh/gpu-model";
pub const LABEL_GPU_DRIVER_VERSION: &str = "node.koordinator.sh/gpu-driver-version";
pub const LABEL_NODE_CPU_RECLAIM_RATIO: &str = "node.koordinator.sh/cpu-reclaim-ratio";
pub const LABEL_NODE_MEMORY_RECLAIM_RATIO: &str = "node.koordinator.sh/memory-reclaim-ratio";
pub const LABEL_NODE_MID_CPU_RESERVED_RATIO: &str =
    "node.koordinator.sh/mid-static-cpu-reserved-ratio";
pub const LABEL_NODE_MID_MEMORY_RESERVED_RATIO: &str =
    "node.koordinator.sh/mid-static-memory-reserved-ratio";
pub const LABEL_NODE_CPU_NORMALIZATION_ENABLED: &str =
    "node.koordinator.sh/cpu-normalization-enabled";

// ClusterColocationProfile.
pub const ANNOTATION_SKIP_UPDATE_RESOURCES: &str = "config.koordinator.sh/skip-update-resources";
pub const LABEL_CONTROLLER_MANAGED: &str = "config.koordinator.sh/controller-managed";

// Descheduler / migration.
pub const ANNOTATION_EVICT_REASON: &str = "koordinator.sh/evict-reason";
pub const ANNOTATION_EVICT_TRIGGER: &str = "koordinator.sh/evict-trigger";
pub const LABEL_EVICT_POLICY: &str = "koordinator.sh/evict-policy";

// Upstream Kubernetes keys koord reads.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const ANNOTATION_POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

// Job preemption (`apis/extension/preemption.go`, `schedule_explanation.go`).
pub const LABEL_DISABLE_PREEMPTIBLE: &str = "scheduling.koordinator.sh/disable-preemptible";
pub const LABEL_QUESTIONED_OBJECT_KEY: &str = "scheduling.koordinator.sh/questioned-object-key";

// ElasticQuota tree (`quota.scheduling.koordinator.sh/`).
pub const QUOTA_PREFIX: &str = "quota.scheduling.koordinator.sh/";
pub const LABEL_QUOTA_PARENT: &str = "quota.scheduling.koordinator.sh/parent";
pub const LABEL_QUOTA_IS_PARENT: &str = "quota.scheduling.koordinator.sh/is-parent";
pub const LABEL_QUOTA_TREE_ID: &str = "quota.scheduling.koordinator.sh/tree-id";
pub const LABEL_QUOTA_IS_ROOT: &str = "quota.scheduling.koordinator.sh/is-root";
pub const LABEL_QUOTA_PREEMPTIBLE: &str = "quota.scheduling.koordinator.sh/preemptible";
pub const LABEL_QUOTA_ALLOW_LENT: &str = "quota.scheduling.koordinator.sh/allow-lent-resource";
pub const LABEL_QUOTA_ALLOW_FORCE_UPDATE: &str =
    "quota.scheduling.koordinator.sh/allow-force-update";
pub const ANNOTATION_QUOTA_SHARED_WEIGHT: &str = "quota.scheduling.koordinator.sh/shared-weight";
pub const ANNOTATION_QUOTA_NAMESPACES: &str = "quota.scheduling.koordinator.sh/namespaces";
pub const ANNOTATION_QUOTA_STRICT_KEYS: &str =
    "quota.scheduling.koordinator.sh/max-strict-check-resource-keys";
pub const ANNOTATION_QUOTA_TOTAL_RESOURCE: &str = "quota.scheduling.koordinator.sh/total-resource";
pub const ANNOTATION_QUOTA_RUNTIME: &str = "quota.scheduling.koordinator.sh/runtime";
pub const ANNOTATION_QUOTA_REQUEST: &str = "quota.scheduling.koordinator.sh/request";
pub const ANNOTATION_QUOTA_CHILD_REQUEST: &str = "quota.scheduling.koordinator.sh/child-request";
pub const ANNOTATION_QUOTA_NON_PREEMPTIBLE_USED: &str =
    "quota.scheduling.koordinator.sh/non-preemptible-used";
pub const QUOTA_ROOT: &str = "koordinator-root-quota";
pub const QUOTA_SYSTEM: &str = "koordinator-system-quota";
pub const QUOTA_DEFAULT: &str = "koordinator-default-quota";

// Webhook switches on objects.
pub const LABEL_POD_MUTATING_UPDATE: &str = "pod.koordinator.sh/mutating-update";
pub const LABEL_CONFIGMAP_TYPE: &str = "koordinator.sh/configmap-type";
