//! cgreconcile, memory QoS (`pkg/koordlet/qosmanager/plugins/cgreconcile/cgroup_reconcile.go`): `memory.min`/`low`/`high` per container
//! and pod from the class's `memoryQOS` percentages (pod annotation `koordinator.sh/memoryQOS`
//! on top), watermark/priority and page-cache limit knobs on pods (Anolis kernels; skipped
//! where absent, `pagecache.rs`), and the
//! QoS directories holding the sums of their pods' min/low.

use k8s_openapi::api::core::v1::Container;

use super::context::{QosCtx, count};
use super::executor::Executor;
use super::executor::Update;
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::keys::ANNOTATION_MEMORY_QOS;
use crate::api::extension::qos::{KubeQoS, QoSClass, kube_qos, pod_qos_class_with_default};
use crate::api::extension::resources::{BATCH_MEMORY, MEMORY};
use crate::api::pod::{container_limits, container_requests};
use crate::api::slo::nodeslo::{MemoryQOS, PodMemoryQOSConfig, ResourceQOS};
use crate::api::sloconfig::overlay;
use crate::koordlet::features;
use crate::koordlet::informer::{PodMeta, States};
use crate::os::{Cgroups, Resource};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;

const PAGE: i64 = 4096;

/// Everything off: what a class gets while its memoryQOS is not enabled.
pub fn none() -> MemoryQOS {
    MemoryQOS {
        min_limit_percent: Some(0),
        low_limit_percent: Some(0),
        throttling_percent: Some(0),
        wmark_ratio: Some(0),
        wmark_scale_permill: Some(50),
        wmark_min_adj: Some(0),
        priority_enable: Some(0),
        priority: Some(0),
        oom_kill_group: Some(0),
        ..Default::default()
    }
}

/// Koordinator's compiled per-class values (policy `auto`).
pub fn auto(class: QoSClass) -> MemoryQOS {
    let (ratio, adj) = match class {
        QoSClass::Be => (95, 50),
        QoSClass::System => (0, 0),
        _ => (95, -25),
    };
    MemoryQOS {
        wmark_ratio: Some(ratio),
        wmark_scale_permill: Some(if class == QoSClass::System { 50 } else { 20 }),
        wmark_min_adj: Some(adj),
        ..none()
    }
}

fn class_qos(states: &States, class: QoSClass) -> MemoryQOS {
    let strategy = &states.slo().resource_qos;
    let pick = |c: &Option<ResourceQOS>| c.as_ref().and_then(|r| r.memory_qos.clone());
    let cfg = match class {
        QoSClass::Lse | QoSClass::Lsr => pick(&strategy.lsr_class),
        QoSClass::Ls => pick(&strategy.ls_class),
        QoSClass::Be => pick(&strategy.be_class),
        QoSClass::System => pick(&strategy.system_class),
        QoSClass::None => None,
    };
    match cfg {
        Some(c) if c.enable == Some(true) => overlay(&none(), &c.memory_qos),
        _ => none(),
    }
}

/// The pod's effective config: class config, or the annotation's policy and fields.
pub fn pod_qos(states: &States, pod: &PodMeta) -> MemoryQOS {
    let class = pod_qos_class_with_default(&pod.pod);
    let base = class_qos(states, class);
    let ann: Option<PodMemoryQOSConfig> = pod
        .pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_MEMORY_QOS))
        .and_then(|s| serde_json::from_str(s).ok());
    let Some(ann) = ann else { return base };
    let start = match ann.policy.as_deref() {
        Some("none") => return none(),
        Some("auto") => auto(class),
        _ => base,
    };
    overlay(&start, &ann.memory_qos)
}

fn mem_of(c: &Container, be: bool) -> (i64, Option<i64>) {
    let name = if be { BATCH_MEMORY } else { MEMORY };
    (
        container_requests(c).get(name).copied().unwrap_or(0),
        container_limits(c).get(name).copied().filter(|v| *v > 0),
    )
}

/// (memory.min, memory.low, memory.high) for a request and limit.
pub fn min_low_high(q: &MemoryQOS, req: i64, limit: i64) -> (i64, i64, i64) {
    let pct = |p: Option<i64>| req * p.unwrap_or(0) / 100;
    let min = pct(q.min_limit_percent);
    let low = pct(q.low_limit_percent).max(min);
    let high = match q.throttling_percent.unwrap_or(0) {
        0 => -1,
        t => (req + (limit - req).max(0) * t / 100) / PAGE * PAGE,
    };
    (min, low, high)
}

/// Node-wide: QoS, pod and container levels.
pub fn updates(states: &States, cgroups: &Cgroups) -> Vec<Vec<Update>> {
    let node_mem = states
        .node
        .as_ref()
        .and_then(|n| n.status.as_ref())
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get(MEMORY))
        .map(crate::api::quantity::q_value)
        .unwrap_or(0);
    let (mut pods, mut containers) = (Vec::new(), Vec::new());
    let mut qos_sums: std::collections::HashMap<KubeQoS, (i64, i64)> = Default::default();
    for pod in states.pods.iter() {
        let Some(spec) = pod.pod.spec.as_ref() else {
            continue;
        };
        let q = pod_qos(states, pod);
        let be = pod_qos_class_with_default(&pod.pod) == QoSClass::Be;
        let mut pod_req = 0;
        for meta in &pod.containers {
            let Some(c) = spec.containers.iter().find(|c| c.name == meta.name) else {
                continue;
            };
            let (req, lim) = mem_of(c, be);
            pod_req += req;
            let (min, low, high) = min_low_high(&q, req, lim.unwrap_or(node_mem));
            for (r, v) in [
                (Resource::MemoryMin, min),
                (Resource::MemoryLow, low),
                (Resource::MemoryHigh, high),
            ] {
                containers.push(Update::new(r, meta.dir.clone(), v.to_string()));
            }
        }
        let (min, low, _) = min_low_high(&q, pod_req, node_mem);
        pods.push(Update::new(
            Resource::MemoryMin,
            pod.dir.clone(),
            min.to_string(),
        ));
        pods.push(Update::new(
            Resource::MemoryLow,
            pod.dir.clone(),
            low.to_string(),
        ));
        for (r, v) in [
            (Resource::MemoryWmarkRatio, q.wmark_ratio),
            (Resource::MemoryWmarkScaleFactor, q.wmark_scale_permill),
            (Resource::MemoryWmarkMinAdj, q.wmark_min_adj),
            (Resource::MemoryUsePriorityOom, q.priority_enable),
            (Resource::MemoryPriority, q.priority),
            (Resource::MemoryOomGroup, q.oom_kill_group),
        ] {
            if let Some(v) = v {
                pods.push(Update::new(r, pod.dir.clone(), v.to_string()));
            }
        }
        let limit = super::pagecache::pod_memory_limit(&pod.pod, be);
        pods.extend(super::pagecache::updates(&q, limit, &pod.dir));
        let e = qos_sums.entry(kube_qos(&pod.pod)).or_insert((0, 0));
        *e = (e.0 + min, e.1 + low);
    }
    let all = qos_sums
        .values()
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let mut qos = Vec::new();
    for (k, dir) in [
        (None, cgroups.kubepods()),
        (
            Some(KubeQoS::Burstable),
            cgroups.qos_dir(KubeQoS::Burstable),
        ),
        (
            Some(KubeQoS::BestEffort),
            cgroups.qos_dir(KubeQoS::BestEffort),
        ),
    ] {
        let (min, low) = match k {
            None => all,
            Some(q) => qos_sums.get(&q).copied().unwrap_or((0, 0)),
        };
        qos.push(Update::new(
            Resource::MemoryMin,
            dir.clone(),
            min.to_string(),
        ));
        qos.push(Update::new(Resource::MemoryLow, dir, low.to_string()));
    }
    vec![qos, pods, containers]
}

/// CgroupReconcile (memory QoS) every second: QoS, pod and container levels at once.
pub struct CgReconcile {
    pub ex: Arc<Executor>,
}

impl Strategy for CgReconcile {
    fn name(&self) -> &'static str {
        "cgreconcile"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        for r in self.ex.leveled(&updates(states, self.ex.cgroups())) {
            match r {
                Ok(super::executor::Outcome::Written(c)) => {
                    count(ctx, "cgreconcile", format!("{:?}", c.resource), 1)
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "memory QoS value rejected"),
            }
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// CgroupReconcile.
pub const ENTRY: Entry = Entry {
    gate: features::CGROUP_RECONCILE,
    build: |d| {
        Box::new(CgReconcile {
            ex: d.executor.clone(),
        })
    },
};

#[cfg(test)]
#[path = "cgreconcile_tests.rs"]
mod tests;
