//! The memcg page-cache limit of Alibaba Cloud Linux / Anolis kernels, per pod, as
//! Koordinator's cgreconcile writes it from the pod's memoryQOS: `memory.pagecache_limit.size`
//! from `pageCacheLimitSize` (capped by the pod's memory limit) or `pageCacheLimitPercent`
//! of that limit, `memory.pagecache_limit.enable` switched on with a size (and off by an
//! explicit 0), or set by `pageCacheEnable`; `memory.pagecache_limit.sync` from
//! `pageCacheReclaimSync` (asynchronous by default). The files exist only on those kernels:
//! elsewhere the executor finds no knob and writes nothing.

use k8s_openapi::api::core::v1::Pod;

use super::executor::Update;
use crate::api::extension::resources::{BATCH_MEMORY, MEMORY};
use crate::api::pod::{container_limits, pod_level};
use crate::api::slo::nodeslo::MemoryQOS;
use crate::os::{CgroupDir, Resource};

/// The pod's memory limit in bytes, -1 when unlimited: a BE pod's batch-memory limits (all
/// containers must have one), any other pod's pod-level limit or its containers' limits.
pub fn pod_memory_limit(pod: &Pod, be: bool) -> i64 {
    let Some(spec) = pod.spec.as_ref() else {
        return -1;
    };
    if be {
        let limits: Option<Vec<i64>> = spec
            .containers
            .iter()
            .map(|c| {
                container_limits(c)
                    .get(BATCH_MEMORY)
                    .copied()
                    .filter(|v| *v > 0)
            })
            .collect();
        let sum = limits.map_or(0, |l| l.iter().sum::<i64>());
        return if sum > 0 { sum } else { -1 };
    }
    if let Some(own) = pod_level(spec, |r| r.limits.as_ref()).get(MEMORY) {
        return *own;
    }
    let limits: Vec<i64> = spec
        .containers
        .iter()
        .filter_map(|c| container_limits(c).get(MEMORY).copied())
        .collect();
    match limits.is_empty() {
        true => -1,
        false => limits.iter().sum(),
    }
}

/// The pod-level page-cache files `q` asks for (none when it sets no page-cache field).
pub fn updates(q: &MemoryQOS, limit: i64, dir: &CgroupDir) -> Vec<Update> {
    let size = match (q.page_cache_limit_size, q.page_cache_limit_percent) {
        (Some(s), _) if limit > 0 => Some(s.min(limit)),
        (Some(s), _) => Some(s),
        (None, Some(p)) if limit > 0 => Some(limit * p / 100),
        _ => None,
    };
    let (mut enable, mut sync) = (None, None);
    let size = match size {
        Some(s) if s > 0 => {
            enable = Some(1);
            sync = Some(i64::from(q.page_cache_reclaim_sync == Some(true)));
            Some(s)
        }
        Some(_) => {
            enable = Some(0);
            Some(0)
        }
        None => None,
    };
    if let Some(on) = q.page_cache_enable {
        enable = Some(i64::from(on));
    }
    [
        (Resource::MemoryPageCacheLimitEnable, enable),
        (Resource::MemoryPageCacheLimitSize, size),
        (Resource::MemoryPageCacheLimitSync, sync),
    ]
    .into_iter()
    .filter_map(|(r, v)| Some(Update::new(r, dir.clone(), v?.to_string())))
    .collect()
}

#[cfg(test)]
#[path = "pagecache_tests.rs"]
mod tests;
