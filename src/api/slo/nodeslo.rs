//! NodeSLO: the per-node QoS strategy the manager renders from `slo-controller-config`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub type ExtensionsMap = BTreeMap<String, Value>;

#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[kube(
    group = "slo.koordinator.sh",
    version = "v1alpha1",
    kind = "NodeSLO",
    doc = "NodeSLO is the Schema for the nodeslos API",
    plural = "nodeslos",
    status = "NodeSLOStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct NodeSLOSpec {
    /// BE pods are limited when node usage passes these thresholds.
    #[serde(rename = "resourceUsedThresholdWithBE")]
    pub resource_used_threshold_with_be: Option<ResourceThresholdStrategy>,
    #[serde(rename = "resourceQOSStrategy")]
    pub resource_qos_strategy: Option<ResourceQOSStrategy>,
    pub cpu_burst_strategy: Option<CPUBurstStrategy>,
    pub system_strategy: Option<SystemStrategy>,
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::extensions_map")]
    pub extensions: Option<ExtensionsMap>,
    pub host_applications: Option<Vec<HostApplicationSpec>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NodeSLOStatus {}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceThresholdStrategy {
    pub enable: Option<bool>,
    #[schemars(range(min = 0, max = 100))]
    pub cpu_suppress_threshold_percent: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub cpu_suppress_min_percent: Option<i64>,
    /// `cpuset` (default), `cfsQuota`, or koord's `cpuIdle` (besteffort runs as `cpu.idle`).
    pub cpu_suppress_policy: Option<String>,
    #[schemars(range(min = 0, max = 100))]
    pub memory_evict_threshold_percent: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub memory_evict_lower_percent: Option<i64>,
    #[serde(rename = "cpuEvictBESatisfactionUpperPercent")]
    pub cpu_evict_be_satisfaction_upper_percent: Option<i64>,
    #[serde(rename = "cpuEvictBESatisfactionLowerPercent")]
    pub cpu_evict_be_satisfaction_lower_percent: Option<i64>,
    #[serde(rename = "cpuEvictBEUsageThresholdPercent")]
    pub cpu_evict_be_usage_threshold_percent: Option<i64>,
    pub cpu_evict_time_window_seconds: Option<i64>,
    /// `evictByRealLimit` (default) or `evictByAllocatable`.
    pub cpu_evict_policy: Option<String>,
    #[schemars(range(min = 0, max = 100))]
    pub cpu_evict_threshold_percent: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub cpu_evict_lower_percent: Option<i64>,
    #[schemars(range(min = 0))]
    pub memory_allocatable_evict_threshold_percent: Option<i64>,
    #[schemars(range(min = 0))]
    pub memory_allocatable_evict_lower_percent: Option<i64>,
    #[schemars(range(min = 0))]
    pub cpu_allocatable_evict_threshold_percent: Option<i64>,
    #[schemars(range(min = 0))]
    pub cpu_allocatable_evict_lower_percent: Option<i64>,
    pub evict_enabled_priority_threshold: Option<i32>,
    pub allocatable_evict_priority_threshold: Option<i32>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQOSStrategy {
    pub policies: Option<ResourceQOSPolicies>,
    pub lsr_class: Option<ResourceQOS>,
    pub ls_class: Option<ResourceQOS>,
    pub be_class: Option<ResourceQOS>,
    pub system_class: Option<ResourceQOS>,
    pub cgroup_root: Option<ResourceQOS>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQOSPolicies {
    /// `groupIdentity` (default) or `coreSched`.
    pub cpu_policy: Option<String>,
    /// `tc` (default) or `terway-qos`.
    #[serde(rename = "netQOSPolicy")]
    pub net_qos_policy: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ResourceQOS {
    #[serde(rename = "cpuQOS")]
    pub cpu_qos: Option<CPUQOSCfg>,
    #[serde(rename = "memoryQOS")]
    pub memory_qos: Option<MemoryQOSCfg>,
    #[serde(rename = "blkioQOS")]
    pub blkio_qos: Option<BlkIOQOSCfg>,
    #[serde(rename = "resctrlQOS")]
    pub resctrl_qos: Option<ResctrlQOSCfg>,
    #[serde(rename = "networkQOS")]
    pub network_qos: Option<NetworkQOSCfg>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CPUQOS {
    pub group_identity: Option<i64>,
    pub sched_idle: Option<i64>,
    pub core_expeller: Option<bool>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct CPUQOSCfg {
    pub enable: Option<bool>,
    #[serde(flatten)]
    pub cpu_qos: CPUQOS,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryQOS {
    #[schemars(range(min = 0))]
    pub min_limit_percent: Option<i64>,
    #[schemars(range(min = 0))]
    pub low_limit_percent: Option<i64>,
    #[schemars(range(min = 0))]
    pub throttling_percent: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub wmark_ratio: Option<i64>,
    #[schemars(range(min = 1, max = 1000))]
    pub wmark_scale_permill: Option<i64>,
    #[schemars(range(min = -25, max = 50))]
    pub wmark_min_adj: Option<i64>,
    /// `memory.pagecache_limit.enable`, the per-memcg switch.
    pub page_cache_enable: Option<bool>,
    /// `memory.pagecache_limit.size` as a percentage of the pod's memory limit.
    #[schemars(range(min = 0, max = 100))]
    pub page_cache_limit_percent: Option<i64>,
    /// `memory.pagecache_limit.size` in bytes (over the percentage; capped by the limit).
    pub page_cache_limit_size: Option<i64>,
    /// `memory.pagecache_limit.sync`: reclaim synchronously.
    pub page_cache_reclaim_sync: Option<bool>,
    pub priority_enable: Option<i64>,
    pub priority: Option<i64>,
    pub oom_kill_group: Option<i64>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct MemoryQOSCfg {
    pub enable: Option<bool>,
    #[serde(flatten)]
    pub memory_qos: MemoryQOS,
}

/// Pod-level memory QoS (annotation `koordinator.sh/memoryQOS`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct PodMemoryQOSConfig {
    /// `default`, `none` or `auto`.
    pub policy: Option<String>,
    #[serde(flatten)]
    pub memory_qos: MemoryQOS,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IOCfg {
    #[schemars(range(min = 0))]
    #[serde(rename = "readIOPS")]
    pub read_iops: Option<i64>,
    #[schemars(range(min = 0))]
    #[serde(rename = "writeIOPS")]
    pub write_iops: Option<i64>,
    #[schemars(range(min = 0))]
    #[serde(rename = "readBPS")]
    pub read_bps: Option<i64>,
    #[schemars(range(min = 0))]
    #[serde(rename = "writeBPS")]
    pub write_bps: Option<i64>,
    #[schemars(range(min = 1, max = 100))]
    pub io_weight_percent: Option<i64>,
    pub read_latency: Option<i64>,
    pub write_latency: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub read_latency_percent: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub write_latency_percent: Option<i64>,
    pub enable_user_model: Option<bool>,
    #[schemars(range(min = 1))]
    #[serde(rename = "modelReadBPS")]
    pub model_read_bps: Option<i64>,
    #[schemars(range(min = 1))]
    #[serde(rename = "modelWriteBPS")]
    pub model_write_bps: Option<i64>,
    #[schemars(range(min = 1))]
    #[serde(rename = "modelReadSeqIOPS")]
    pub model_read_seq_iops: Option<i64>,
    #[schemars(range(min = 1))]
    #[serde(rename = "modelWriteSeqIOPS")]
    pub model_write_seq_iops: Option<i64>,
    #[schemars(range(min = 1))]
    #[serde(rename = "modelReadRandIOPS")]
    pub model_read_rand_iops: Option<i64>,
    #[schemars(range(min = 1))]
    #[serde(rename = "modelWriteRandIOPS")]
    pub model_write_rand_iops: Option<i64>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlockCfg {
    pub name: Option<String>,
    /// `device`, `volumegroup` or `podvolume`.
    #[serde(rename = "type")]
    pub block_type: Option<String>,
    /// `ioCfg`; Go's JSON decoding ignores case, and Koordinator's own pod annotation
    /// examples spell it `iocfg`.
    #[serde(default, alias = "iocfg")]
    pub io_cfg: IOCfg,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct BlkIOQOS {
    pub blocks: Option<Vec<BlockCfg>>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct BlkIOQOSCfg {
    pub enable: Option<bool>,
    #[serde(flatten)]
    pub blkio_qos: BlkIOQOS,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResctrlQOS {
    #[schemars(range(min = 0, max = 100))]
    pub cat_range_start_percent: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub cat_range_end_percent: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub mba_percent: Option<i64>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ResctrlQOSCfg {
    pub enable: Option<bool>,
    #[serde(flatten)]
    pub resctrl_qos: ResctrlQOS,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkQOS {
    #[schemars(extend("x-koord-default" = 0))]
    pub ingress_request: Option<IntOrString>,
    #[schemars(extend("x-koord-default" = 100))]
    pub ingress_limit: Option<IntOrString>,
    #[schemars(extend("x-koord-default" = 0))]
    pub egress_request: Option<IntOrString>,
    #[schemars(extend("x-koord-default" = 100))]
    pub egress_limit: Option<IntOrString>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NetworkQOSCfg {
    pub enable: Option<bool>,
    #[serde(flatten)]
    pub network_qos: NetworkQOS,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CPUBurstConfig {
    /// `none`, `cpuBurstOnly`, `cfsQuotaBurstOnly` or `auto`.
    pub policy: Option<String>,
    #[schemars(range(min = 0, max = 10000))]
    pub cpu_burst_percent: Option<i64>,
    pub cfs_quota_burst_percent: Option<i64>,
    pub cfs_quota_burst_period_seconds: Option<i64>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CPUBurstStrategy {
    #[serde(flatten)]
    pub config: CPUBurstConfig,
    pub share_pool_threshold_percent: Option<i64>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SystemStrategy {
    pub min_free_kbytes_factor: Option<i64>,
    pub watermark_scale_factor: Option<i64>,
    pub memcg_reap_back_ground: Option<i64>,
    pub sched_group_identity_enabled: Option<i64>,
    pub sched_idle_saver_wmark: Option<i64>,
    pub sched_features: Option<BTreeMap<String, bool>>,
    pub page_cache_limit_enabled: Option<i64>,
    pub total_network_bandwidth: Option<Quantity>,
}

/// QoS management for an out-of-band application on the node.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HostApplicationSpec {
    pub name: Option<String>,
    pub priority: Option<String>,
    pub qos: Option<String>,
    pub cgroup_path: Option<CgroupPath>,
    /// Koordinator's `HostApplicationStrategy` has no fields yet (its CRD prunes any).
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::empty_object")]
    pub strategy: Option<Value>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CgroupPath {
    /// `CgroupRoot`, `Kubepods`, `KubepodsBurstable` or `KubepodsBesteffort`.
    pub base: Option<String>,
    pub parent_dir: Option<String>,
    pub relative_path: Option<String>,
}
