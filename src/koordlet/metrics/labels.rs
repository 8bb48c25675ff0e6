//! The label names of the koordlet's families whose label sets are built per call
//! (`Pairs`), as Koordinator names them, for the metrics reference. The it test that reads
//! `/metrics` checks every exposed series against this table.

const NODE_RES: &[&str] = &["node", "resource", "unit"];
const CONTAINER: &[&str] = &[
    "node",
    "pod_name",
    "pod_namespace",
    "pod_uid",
    "container_name",
    "container_id",
];

const PREDICTOR: &[&str] = &["node", "predictor", "resource", "unit"];
const NUMA: &[&str] = &["node", "numa_node_id", "resource", "unit"];
const STATUS: &[&str] = &["node", "status"];
const CONTAINER_SPEC: &[&str] = &[
    "node",
    "resource",
    "unit",
    "pod_uid",
    "pod_name",
    "pod_namespace",
    "container_id",
    "container_name",
];

pub const PAIRS: &[(&str, &[&str])] = &[
    (
        "koordlet_kubelet_request_duration_seconds",
        &["verb", "path", "code"],
    ),
    ("koordlet_be_suppress_cpu_cores", &["node", "type"]),
    ("koordlet_node_resource_allocatable", NODE_RES),
    ("koordlet_node_metric_node_usage", NODE_RES),
    ("koordlet_node_metric_system_usage", NODE_RES),
    ("koordlet_node_predicted_resource_peak", PREDICTOR),
    ("koordlet_node_predicted_resource_reclaimable", PREDICTOR),
    ("koordlet_node_metric_numa_node_usage", NUMA),
    ("koordlet_node_metric_numa_system_usage", NUMA),
    ("koordlet_collect_node_cpu_info_status", STATUS),
    ("koordlet_collect_node_numa_info_status", STATUS),
    ("koordlet_collect_node_local_storage_info_status", STATUS),
    (
        "koordlet_host_application_resource_usage",
        &[
            "node",
            "host_application_name",
            "resource",
            "priority_class",
            "qos",
        ],
    ),
    ("koordlet_pod_eviction", &["node", "reason"]),
    ("koordlet_container_resource_requests", CONTAINER_SPEC),
    ("koordlet_container_resource_limits", CONTAINER_SPEC),
    (
        "koordlet_runtime_hook_invoked_duration_milliseconds",
        &["node", "hook", "stage", "status"],
    ),
    (
        "koordlet_runtime_hook_reconciler_invoked_duration_milliseconds",
        &["node", "level", "resource_type", "status"],
    ),
    (
        "koordlet_resource_update_duration_milliseconds",
        &["type", "status"],
    ),
    (
        "koordlet_pod_eviction_detail",
        &["node", "pod_namespace", "pod_name", "reason"],
    ),
    (
        "koordlet_container_oom_score_adj",
        &[
            "node",
            "pod_name",
            "pod_namespace",
            "pod_uid",
            "container_name",
        ],
    ),
    ("koordlet_container_scaled_cfs_burst_us", CONTAINER),
    ("koordlet_container_scaled_cfs_quota_us", CONTAINER),
    (
        "koordlet_container_core_sched_cookie",
        &[
            "node",
            "pod_name",
            "pod_namespace",
            "pod_uid",
            "container_name",
            "container_id",
            "core_sched_group",
            "core_sched_cookie",
        ],
    ),
    (
        "koordlet_core_sched_cookie_manage_status",
        &["node", "core_sched_group", "status"],
    ),
    ("koordlet_cpuset_share_pool_info", &["node", "cpu"]),
    ("koordlet_cpuset_be_share_pool_info", &["node", "cpu"]),
    (
        "koordlet_container_cpi",
        &[
            "node",
            "container_id",
            "container_name",
            "pod_uid",
            "pod_name",
            "pod_namespace",
            "cpi_field",
        ],
    ),
    (
        "koordlet_resctrl_llc_occupancy",
        &["node", "cache_id", "qos"],
    ),
    (
        "koordlet_resctrl_memory_bandwidth",
        &["node", "cache_id", "qos", "mb_type"],
    ),
    (
        "koordlet_pod_psi",
        &[
            "node",
            "pod_uid",
            "pod_name",
            "pod_namespace",
            "psi_resource_type",
            "psi_precision",
            "psi_degree",
            "cpu_full_supported",
        ],
    ),
    (
        "koordlet_container_psi",
        &[
            "node",
            "container_id",
            "container_name",
            "pod_uid",
            "pod_name",
            "pod_namespace",
            "psi_resource_type",
            "psi_precision",
            "psi_degree",
            "cpu_full_supported",
        ],
    ),
    (
        "koordlet_node_priority_resource_reclaimable",
        &["node", "priority", "resource", "unit"],
    ),
    (
        "koordlet_node_resource_priority_reclaimable_status",
        &["node", "priority"],
    ),
];
