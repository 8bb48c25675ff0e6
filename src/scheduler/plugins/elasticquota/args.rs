//! `ElasticQuotaArgs` with Koordinator's v1 defaults (`apis/config/v1/defaults.go`).

use crate::api::field::FieldError;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::api::extension::resources::{CPU, MEMORY};
use crate::api::pod::{Amounts, amounts};
use crate::api::quota::ResourceList;
use crate::scheduler::framework::quotas::QuotaSettings;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Raw {
    delay_evict_time: Option<String>,
    revoke_pod_interval: Option<String>,
    default_quota_group_max: Option<ResourceList>,
    system_quota_group_max: Option<ResourceList>,
    quota_group_namespace: Option<String>,
    monitor_all_quotas: Option<bool>,
    enable_check_parent_quota: Option<bool>,
    enable_runtime_quota: Option<bool>,
    enable_min_quota_scale: Option<bool>,
    disable_default_quota_preemption: Option<bool>,
    enable_queue_hint: Option<bool>,
    quota_snapshot_update_interval: Option<String>,
    hook_plugins: Option<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    pub delay_evict_time: Duration,
    pub revoke_pod_interval: Duration,
    pub quota_group_namespace: String,
    pub monitor_all_quotas: bool,
    pub enable_check_parent_quota: bool,
    pub enable_runtime_quota: bool,
    pub disable_default_quota_preemption: bool,
    /// `enableQueueHint`: a pending pod moves back only for a change in its own quota tree
    /// that may give it room (Koordinator's QueueingHints; default off).
    pub enable_queue_hint: bool,
    pub settings: QuotaSettings,
}

/// MaxInt64/5 of cpu and memory: the default and system quotas' unbounded max.
fn huge() -> Amounts {
    let v = i64::MAX / 5;
    Amounts::from([(CPU.to_string(), v), (MEMORY.to_string(), v)])
}

use crate::api::duration::field_or as duration;

impl Args {
    pub fn parse(v: Option<&Value>) -> Result<Args, FieldError> {
        let raw: Raw = crate::scheduler::plugins::plain_args(v)?;
        if raw.hook_plugins.as_ref().is_some_and(|h| !h.is_empty()) {
            return Err(FieldError::new(
                "hookPlugins",
                "quota hook plugins are not supported",
            ));
        }
        let max_or_huge = |l: &Option<ResourceList>| match l {
            Some(l) if !l.is_empty() => amounts(Some(l)),
            _ => huge(),
        };
        // koord reads the quota tree live: no snapshot to refresh on an interval.
        let _ = &raw.quota_snapshot_update_interval;
        Ok(Args {
            delay_evict_time: duration(
                "delayEvictTime",
                raw.delay_evict_time.as_deref(),
                Duration::from_secs(120),
            )?,
            revoke_pod_interval: duration(
                "revokePodInterval",
                raw.revoke_pod_interval.as_deref(),
                Duration::from_secs(1),
            )?,
            quota_group_namespace: raw
                .quota_group_namespace
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "koordinator-system".into()),
            monitor_all_quotas: raw.monitor_all_quotas.unwrap_or(false),
            enable_check_parent_quota: raw.enable_check_parent_quota.unwrap_or(false),
            enable_runtime_quota: raw.enable_runtime_quota.unwrap_or(true),
            disable_default_quota_preemption: raw.disable_default_quota_preemption.unwrap_or(true),
            enable_queue_hint: raw.enable_queue_hint.unwrap_or(false),
            settings: QuotaSettings {
                enable_min_quota_scale: raw.enable_min_quota_scale.unwrap_or(true),
                default_max: max_or_huge(&raw.default_quota_group_max),
                system_max: max_or_huge(&raw.system_quota_group_max),
            },
        })
    }
}
