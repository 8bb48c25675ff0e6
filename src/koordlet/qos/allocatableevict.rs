//! CPUAllocatableEvict and MemoryAllocatableEvict (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`, `memoryevict/memory_evict.go`): when the
//! pods at or below `allocatableEvictPriorityThreshold` request more of the node's
//! `batch-*`/`mid-*` account than `…AllocatableEvictThresholdPercent` of its allocatable,
//! evict opted-in pods of that account's priority class (largest request first, after the
//! CPUEvict order) until the requests are back at `…AllocatableEvictLowerPercent`. The pure decision,
//! then the round and its two registry entries.
//!
//! Unlike Koordinator, plain `cpu`/`memory` requests never form a task: no pod class
//! "owns" them, and Koordinator would then evict every candidate without ever meeting the
//! target.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::context::{QosCtx, count};
use super::evictor::{Evictor, evict_uid};
use super::runner::{Entry, Round, Strategy};
use super::usageevict::{candidate, victims};
use crate::api::extension::priority::{PriorityClass, pod_priority_class_with_default};
use crate::api::extension::resources::{BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY};
use crate::api::pod::{amount, container_requests};
use crate::api::slo::nodeslo::ResourceThresholdStrategy;
use crate::koordlet::features;
use crate::koordlet::informer::States;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;

/// The settings of one of the two features, validated as Koordinator does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub threshold: i64,
    pub lower: i64,
    pub priority_threshold: i32,
}

pub fn settings(s: &ResourceThresholdStrategy, cpu: bool) -> Result<Settings, String> {
    let (t, l, name) = if cpu {
        (
            s.cpu_allocatable_evict_threshold_percent,
            s.cpu_allocatable_evict_lower_percent,
            "cpuAllocatableEvict",
        )
    } else {
        (
            s.memory_allocatable_evict_threshold_percent,
            s.memory_allocatable_evict_lower_percent,
            "memoryAllocatableEvict",
        )
    };
    let threshold = t.ok_or(format!("{name}ThresholdPercent is not set"))?;
    if threshold < 0 {
        return Err(format!("{name}ThresholdPercent {threshold} is negative"));
    }
    let lower = l.ok_or(format!("{name}LowerPercent is not set"))?;
    if lower >= threshold {
        return Err(format!(
            "{name}LowerPercent {lower} must be below the threshold {threshold}"
        ));
    }
    let priority_threshold = s
        .allocatable_evict_priority_threshold
        .ok_or("allocatableEvictPriorityThreshold is not set")?;
    let mid_top = PriorityClass::Mid.range().map_or(7999, |(_, hi)| hi);
    if priority_threshold > mid_top {
        return Err(format!(
            "allocatableEvictPriorityThreshold {priority_threshold} is above {mid_top}: koord-prod pods must not be evicted"
        ));
    }
    Ok(Settings {
        threshold,
        lower,
        priority_threshold,
    })
}

/// The account a pod's request is charged to, and the amount (milli-cores or bytes).
pub fn charged(pod: &Pod, cpu: bool) -> Option<(&'static str, i64)> {
    let name = match (pod_priority_class_with_default(pod), cpu) {
        (PriorityClass::Batch, true) => BATCH_CPU,
        (PriorityClass::Batch, false) => BATCH_MEMORY,
        (PriorityClass::Mid, true) => MID_CPU,
        (PriorityClass::Mid, false) => MID_MEMORY,
        _ => return None,
    };
    let spec = pod.spec.as_ref()?;
    let sum = spec
        .containers
        .iter()
        .map(|c| container_requests(c).get(name).copied().unwrap_or(0).max(0))
        .sum();
    Some((name, sum))
}

/// One over-committed account.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub resource: &'static str,
    pub requested: i64,
    pub allocatable: i64,
    pub release: i64,
}

/// Accounts whose requests exceed the threshold; an account the node does not offer at
/// all (missing or 0) must release everything charged to it.
pub fn tasks(
    pods: &[&Pod],
    allocatable: &BTreeMap<String, Quantity>,
    cpu: bool,
    s: &Settings,
) -> Vec<Task> {
    let mut requested: BTreeMap<&'static str, i64> = BTreeMap::new();
    for p in pods {
        let prio = p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        if prio > s.priority_threshold {
            continue;
        }
        if let Some((name, v)) = charged(p, cpu) {
            *requested.entry(name).or_default() += v;
        }
    }
    requested
        .into_iter()
        .filter(|(_, r)| *r > 0)
        .filter_map(|(name, r)| {
            let alloc = allocatable.get(name).map_or(0, |q| amount(name, q));
            let release = if alloc <= 0 {
                r
            } else if r as f64 / alloc as f64 > s.threshold as f64 / 100.0 {
                (r as f64 - s.lower as f64 / 100.0 * alloc as f64) as i64
            } else {
                return None;
            };
            Some(Task {
                resource: name,
                requested: r,
                allocatable: alloc,
                release,
            })
        })
        .collect()
}

/// One CPUAllocatableEvict (`cpu`) or MemoryAllocatableEvict round (`pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go`, `memoryevict/memory_evict.go`):
/// per over-committed batch/mid account, evict opted-in pods charged to it. Returns the
/// keys evicted.
pub async fn allocatable_pass(
    client: &kube::Client,
    evictor: &Evictor,
    states: &States,
    cpu: bool,
) -> Vec<String> {
    let s = &states.slo().threshold;
    let feature = if cpu {
        "CPUAllocatableEvict"
    } else {
        "MemoryAllocatableEvict"
    };
    if s.enable != Some(true) {
        return Vec::new();
    }
    let st = match settings(s, cpu) {
        Ok(st) => st,
        Err(e) => {
            tracing::debug!(feature, reason = %e, "skipped: invalid settings");
            return Vec::new();
        }
    };
    let Some(node) = states.node.as_ref() else {
        return Vec::new();
    };
    let empty = Default::default();
    let alloc = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .unwrap_or(&empty);
    let pods: Vec<&Pod> = states
        .pods
        .iter()
        .map(|p| &*p.pod)
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded") | Some("Failed"))
        })
        .collect();
    let mut skip = evictor.recent();
    let mut out = Vec::new();
    for t in tasks(&pods, alloc, cpu, &st) {
        let cands = pods
            .iter()
            .filter_map(|p| {
                let (res, req) = charged(p, cpu)?;
                (res == t.resource).then_some(())?;
                candidate(p, feature, Some(st.priority_threshold), req)
            })
            .collect();
        let msg = format!(
            "{} requested {} of {} allocatable ({}% > {}%); releasing {}",
            t.resource,
            t.requested,
            t.allocatable,
            t.requested * 100 / t.allocatable.max(1),
            st.threshold,
            t.release
        );
        for v in victims(cands, t.release, &skip) {
            if evict_uid(client, evictor, states, &v.uid, feature, &msg).await {
                skip.insert(v.uid.clone());
                out.push(v.key);
            }
        }
    }
    out
}
/// CPUAllocatableEvict / MemoryAllocatableEvict every second; same cool-downs.
pub struct AllocatableEvict {
    pub client: kube::Client,
    pub evictor: Arc<Evictor>,
    pub cpu: bool,
}

impl Strategy for AllocatableEvict {
    fn name(&self) -> &'static str {
        if self.cpu {
            "cpuallocatableevict"
        } else {
            "memoryallocatableevict"
        }
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let (name, cool) = if self.cpu {
                ("CPUAllocatableEvict", 20)
            } else {
                ("MemoryAllocatableEvict", 4)
            };
            let evicted = allocatable_pass(&self.client, &self.evictor, states, self.cpu).await;
            if !evicted.is_empty() {
                count(ctx, name, "eviction".into(), evicted.len() as u64);
            }
            Round::cool_down_if(!evicted.is_empty(), cool)
        }
        .boxed()
    }
}

/// CPUAllocatableEvict.
pub const CPU: Entry = Entry {
    gate: features::CPU_ALLOCATABLE_EVICT,
    build: |d| {
        Box::new(AllocatableEvict {
            client: d.client.clone(),
            evictor: d.evictor.clone(),
            cpu: true,
        })
    },
};

/// MemoryAllocatableEvict.
pub const MEMORY: Entry = Entry {
    gate: features::MEMORY_ALLOCATABLE_EVICT,
    build: |d| {
        Box::new(AllocatableEvict {
            client: d.client.clone(),
            evictor: d.evictor.clone(),
            cpu: false,
        })
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, class: &str, prio: i32, cpu: &str) -> Pod {
        let res = if class == "koord-batch" {
            BATCH_CPU
        } else {
            MID_CPU
        };
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "d", "uid": name},
            "spec": {"priority": prio, "priorityClassName": class,
                "containers": [{"name": "c", "resources": {"requests": {res: cpu}}}]}}),
        )
        .unwrap()
    }

    fn cfg(t: i64, l: i64) -> ResourceThresholdStrategy {
        ResourceThresholdStrategy {
            cpu_allocatable_evict_threshold_percent: Some(t),
            cpu_allocatable_evict_lower_percent: Some(l),
            allocatable_evict_priority_threshold: Some(5999),
            ..Default::default()
        }
    }

    #[test]
    fn settings_are_checked() {
        assert!(settings(&cfg(110, 100), true).is_ok());
        assert!(
            settings(&cfg(100, 100), true)
                .unwrap_err()
                .contains("LowerPercent")
        );
        let mut c = cfg(110, 100);
        c.allocatable_evict_priority_threshold = Some(9000);
        assert!(settings(&c, true).unwrap_err().contains("7999"));
        assert!(
            settings(&cfg(110, 100), false)
                .unwrap_err()
                .contains("memoryAllocatableEvictThresholdPercent")
        );
    }

    #[test]
    fn overcommitted_accounts_release_down_to_the_lower_percent() {
        let s = settings(&cfg(110, 100), true).unwrap();
        let a = pod("a", "koord-batch", 5000, "6000");
        let b = pod("b", "koord-batch", 5500, "6000");
        let m = pod("m", "koord-mid", 7500, "1000");
        let alloc: BTreeMap<String, Quantity> = [
            (BATCH_CPU.to_string(), Quantity("10000".into())),
            (MID_CPU.to_string(), Quantity("4000".into())),
        ]
        .into();
        // batch: 12000 / 10000 = 120 % > 110 %: release 12000 − 10000. The mid pod is above
        // the priority threshold 5999 and not counted.
        assert_eq!(
            tasks(&[&a, &b, &m], &alloc, true, &s),
            vec![Task {
                resource: BATCH_CPU,
                requested: 12000,
                allocatable: 10000,
                release: 2000
            }]
        );
        // At 110 % exactly nothing happens.
        let c = pod("c", "koord-batch", 5000, "5000");
        assert!(tasks(&[&a, &c], &alloc, true, &s).is_empty());
        // No batch account on the node: everything charged to it goes.
        let none = BTreeMap::new();
        assert_eq!(tasks(&[&a], &none, true, &s)[0].release, 6000);
        assert_eq!(charged(&m, true), Some((MID_CPU, 1000)));
        assert_eq!(charged(&m, false), Some((MID_MEMORY, 0)));
    }
}
