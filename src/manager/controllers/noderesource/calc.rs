//! Batch and mid overcommit resources of one node (`pkg/slo-controller/noderesource/plugins/batchresource/plugin.go`, `midresource/plugin.go`): a pure
//! function of (node, its pods, its NodeMetric, the colocation config, now), shared by the
//! NodeResource controller and `koord explain noderesource`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Serialize;

use crate::api::extension::keys::ANNOTATION_NODE_RESERVATION;
use crate::api::extension::priority::{PriorityClass, pod_priority_class_with_default};
use crate::api::extension::qos::{QoSClass, pod_qos_class_with_default};
use crate::api::extension::resources::{CPU, MEMORY};
use crate::api::pod::{amount, pod_requests};
use crate::api::slo::nodemetric::{NodeMetric, ResourceMap};
use crate::api::sloconfig::{CalculatePolicy, ColocationCfg, ColocationStrategy};

/// CPU in milli-cores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Res {
    pub cpu: i64,
    pub memory: i64,
}

impl Res {
    fn from_list(list: Option<&BTreeMap<String, Quantity>>) -> Res {
        let get = |n: &str| {
            list.and_then(|l| l.get(n))
                .map(|q| amount(n, q))
                .unwrap_or(0)
        };
        Res {
            cpu: get(CPU),
            memory: get(MEMORY),
        }
    }
    pub(super) fn from_amounts(a: &crate::api::pod::Amounts) -> Res {
        Res {
            cpu: a.get(CPU).copied().unwrap_or(0),
            memory: a.get(MEMORY).copied().unwrap_or(0),
        }
    }
    fn from_map(m: &ResourceMap) -> Res {
        Res::from_list(m.resources.as_ref())
    }
    fn zip(self, o: Res, f: impl Fn(i64, i64) -> i64) -> Res {
        Res {
            cpu: f(self.cpu, o.cpu),
            memory: f(self.memory, o.memory),
        }
    }
    pub(super) fn add(self, o: Res) -> Res {
        self.zip(o, |a, b| a + b)
    }
    fn sub(self, o: Res) -> Res {
        self.zip(o, |a, b| a - b)
    }
    pub(super) fn max(self, o: Res) -> Res {
        self.zip(o, i64::max)
    }
    /// `self / n` per resource, rounded up (Koordinator's `DivideResourceList`).
    pub(super) fn ceil_div(self, n: i64) -> Res {
        if n <= 0 {
            return self;
        }
        let div = |v: i64| v.div_euclid(n) + i64::from(v.rem_euclid(n) != 0);
        Res {
            cpu: div(self.cpu),
            memory: div(self.memory),
        }
    }
    fn at_least_zero(self) -> Res {
        self.max(Res::default())
    }
    /// `self × pct / 100` per resource, truncated.
    pub(super) fn percent(self, cpu_pct: i64, mem_pct: i64) -> Res {
        Res {
            cpu: self.cpu * cpu_pct / 100,
            memory: self.memory * mem_pct / 100,
        }
    }
}

/// The inputs of the batch formula, for humans.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchTerms {
    pub capacity: Res,
    pub reclaim_threshold_percent: Res,
    pub safety_margin: Res,
    pub kubelet_reserved: Res,
    pub annotation_reserved: Res,
    pub node_reserved: Res,
    pub system_used: Res,
    pub system_or_reserved: Res,
    pub hp_request: Res,
    pub hp_used: Res,
    pub hp_max_used_request: Res,
    pub pods_counted: usize,
    pub pods_without_metric: usize,
    pub dangling_metrics: usize,
    pub by_usage: Res,
    pub by_request: Res,
    pub by_max_usage_request: Res,
    pub cpu_policy: CalculatePolicy,
    pub memory_policy: CalculatePolicy,
    pub threshold_cap: Option<Res>,
    pub result: Res,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MidTerms {
    pub mode: &'static str,
    pub capacity: Res,
    pub prod_reclaimable: Res,
    pub system_used: Res,
    pub reserved: Res,
    pub prod_request: Res,
    pub unallocated: Res,
    pub unallocated_percent: i64,
    pub unused: Res,
    pub threshold_cap: Res,
    pub result: Res,
}

/// One NUMA zone's batch resources and the terms that gave them (`zones.rs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneBatch {
    pub zone: String,
    pub terms: BatchTerms,
}

/// What the calculation decided for one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Calculation {
    pub node: String,
    pub colocation_enabled: bool,
    pub degraded: bool,
    pub metric_age_seconds: Option<i64>,
    pub degrade_time_minutes: i64,
    pub batch: Option<BatchTerms>,
    /// Batch resources per NUMA zone of the node's NodeResourceTopology (none without one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub batch_zones: Vec<ZoneBatch>,
    pub mid: Option<MidTerms>,
    pub message: String,
}

pub struct Inputs<'a> {
    pub node: &'a Node,
    /// Pods with `spec.nodeName` equal to the node, any phase.
    pub pods: &'a [&'a Pod],
    pub metric: Option<&'a NodeMetric>,
    pub config: &'a ColocationCfg,
    /// `config.for_node(node)`, resolved once by the caller.
    pub strategy: &'a ColocationStrategy,
    pub now_ms: i64,
}

pub(super) fn is_active(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running" | "Pending")
    )
}

pub(super) fn key(ns: Option<&str>, name: Option<&str>) -> String {
    format!("{}/{}", ns.unwrap_or_default(), name.unwrap_or_default())
}

/// Capacity, kubelet and annotation reservations of the node.
pub(super) fn node_basics(node: &Node) -> (Res, Res, Res) {
    let status = node.status.as_ref();
    let capacity = Res::from_list(status.and_then(|s| s.capacity.as_ref()));
    let allocatable = Res::from_list(status.and_then(|s| s.allocatable.as_ref()));
    let kubelet = capacity.sub(allocatable).at_least_zero();
    (capacity, kubelet, annotation_reserved(node))
}

/// `node.koordinator.sh/reservation`: `{"resources": {...}, "reservedCPUs": "0-3"}`; the
/// CPU count of `reservedCPUs` wins over `resources.cpu`. Unparsable means nothing reserved.
fn annotation_reserved(node: &Node) -> Res {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Reservation {
        resources: Option<BTreeMap<String, Quantity>>,
        #[serde(rename = "reservedCPUs")]
        reserved_cpus: Option<String>,
    }
    let raw = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_RESERVATION));
    let Some(r) = raw.and_then(|r| crate::api::decode::from_str::<Reservation>(r).ok()) else {
        return Res::default();
    };
    let mut res = Res::from_list(r.resources.as_ref());
    if let Some(cpus) = r
        .reserved_cpus
        .as_deref()
        .and_then(|c| crate::api::cpuset::parse(c).ok())
        && !cpus.is_empty()
    {
        res.cpu = cpus.len() as i64 * 1000;
    }
    res
}

/// System usage plus host applications of a class above `above`.
pub(super) fn system_used(metric: &NodeMetric, above: PriorityClass) -> Res {
    let status = metric.status.as_ref();
    let mut used = status
        .and_then(|s| s.node_metric.as_ref())
        .map(|m| Res::from_map(&m.system_usage))
        .unwrap_or_default();
    for app in status
        .and_then(|s| s.host_application_metric.as_ref())
        .into_iter()
        .flatten()
    {
        let class = PriorityClass::from_name(app.priority.as_deref().unwrap_or_default());
        if class.default_value() > above.default_value() {
            used = used.add(Res::from_map(&app.usage));
        }
    }
    used
}

fn metric_age_ms(metric: Option<&NodeMetric>, now_ms: i64) -> Option<i64> {
    let t = metric?.status.as_ref()?.update_time.as_ref()?;
    Some(now_ms - t.0.as_millisecond())
}

/// Runs the calculation for one node.
pub fn calculate(inp: &Inputs<'_>) -> Calculation {
    let node = inp.node.metadata.name.clone().unwrap_or_default();
    let strategy = inp.strategy;
    let degrade_minutes = strategy.degrade_time_minutes.unwrap_or(15);
    let age = metric_age_ms(inp.metric, inp.now_ms);
    let mut calc = Calculation {
        node,
        colocation_enabled: inp.config.enabled_for(strategy),
        degraded: age.is_none_or(|a| a > degrade_minutes * 60_000),
        metric_age_seconds: age.map(|a| a / 1000),
        degrade_time_minutes: degrade_minutes,
        batch: None,
        batch_zones: Vec::new(),
        mid: None,
        message: String::new(),
    };
    if !calc.colocation_enabled {
        calc.message = "node colocation is disabled in Config, reason: DisableInConfig".into();
        return calc;
    }
    let Some(metric) = inp.metric.filter(|_| !calc.degraded) else {
        calc.message = match age {
            None => {
                "degraded: NodeMetric missing or never updated; batch and mid resources removed"
                    .into()
            }
            Some(a) => format!(
                "degraded: NodeMetric updated {}s ago, older than degradeTimeMinutes {}; batch and mid resources removed",
                a / 1000,
                degrade_minutes
            ),
        };
        return calc;
    };
    let batch = batch(inp, metric, strategy);
    let mid = mid(inp, metric, strategy);
    calc.message = format!(
        "batch-cpu {} = capacity {} - safety {} - max(system {}, reserved {}) - HP {} ({:?}); batch-memory {}; mid-cpu {}; mid-memory {}",
        batch.result.cpu,
        batch.capacity.cpu,
        batch.safety_margin.cpu,
        batch.system_used.cpu,
        batch.node_reserved.cpu,
        match batch.cpu_policy {
            CalculatePolicy::MaxUsageRequest => batch.hp_max_used_request.cpu,
            _ => batch.hp_used.cpu,
        },
        batch.cpu_policy,
        batch.result.memory,
        mid.result.cpu,
        mid.result.memory,
    );
    calc.batch = Some(batch);
    calc.mid = Some(mid);
    calc
}

fn batch(inp: &Inputs<'_>, metric: &NodeMetric, s: &ColocationStrategy) -> BatchTerms {
    let (capacity, kubelet, anno) = node_basics(inp.node);
    let reclaim = Res {
        cpu: s.cpu_reclaim_threshold_percent.unwrap_or(60),
        memory: s.memory_reclaim_threshold_percent.unwrap_or(65),
    };
    let mut t = BatchTerms {
        capacity,
        reclaim_threshold_percent: reclaim,
        safety_margin: capacity.percent(100 - reclaim.cpu, 100 - reclaim.memory),
        kubelet_reserved: kubelet,
        annotation_reserved: anno,
        node_reserved: kubelet.max(anno),
        system_used: system_used(metric, PriorityClass::Batch),
        cpu_policy: CalculatePolicy::parse(s.cpu_calculate_policy.as_deref()),
        memory_policy: CalculatePolicy::parse(s.memory_calculate_policy.as_deref()),
        ..Default::default()
    };
    t.system_or_reserved = t.system_used.max(t.node_reserved);
    let pod_metrics = pod_metric_index(metric);
    let mut matched = std::collections::HashSet::new();
    for pod in inp.pods.iter().filter(|p| is_active(p)) {
        let k = key(
            pod.metadata.namespace.as_deref(),
            pod.metadata.name.as_deref(),
        );
        matched.insert(k.clone());
        if matches!(
            pod_priority_class_with_default(pod),
            PriorityClass::Batch | PriorityClass::Free
        ) {
            continue;
        }
        t.pods_counted += 1;
        let request = Res::from_amounts(&pod_requests(pod));
        t.hp_request = t.hp_request.add(request);
        match pod_metrics.get(&k) {
            None => {
                t.pods_without_metric += 1;
                t.hp_used = t.hp_used.add(request);
            }
            Some(usage) => {
                let used = if pod_qos_class_with_default(pod) == QoSClass::Lse {
                    Res {
                        cpu: request.cpu,
                        memory: usage.memory,
                    }
                } else {
                    *usage
                };
                t.hp_used = t.hp_used.add(used);
                t.hp_max_used_request = t.hp_max_used_request.add(request.max(*usage));
            }
        }
    }
    for (usage, class) in dangling(metric, &matched) {
        if !matches!(class, PriorityClass::Batch | PriorityClass::Free) {
            t.dangling_metrics += 1;
            t.hp_used = t.hp_used.add(usage);
            t.hp_max_used_request = t.hp_max_used_request.add(usage);
        }
    }
    by_policy(&mut t, s);
    t
}

/// The three candidates (by usage, by request, by max of both) from the terms gathered,
/// the policy's pick and the threshold caps (Koordinator's `CalculateBatchResourceByPolicy`):
/// for the node, and for each NUMA zone with the zone's share of every term.
pub(super) fn by_policy(t: &mut BatchTerms, s: &ColocationStrategy) {
    let capacity = t.capacity;
    let base = capacity.sub(t.safety_margin);
    t.by_usage = base
        .sub(t.system_or_reserved)
        .sub(t.hp_used)
        .at_least_zero();
    t.by_request = base.sub(t.node_reserved).sub(t.hp_request).at_least_zero();
    t.by_max_usage_request = base
        .sub(t.system_or_reserved)
        .sub(t.hp_max_used_request)
        .at_least_zero();
    let mut result = Res {
        cpu: match t.cpu_policy {
            CalculatePolicy::MaxUsageRequest => t.by_max_usage_request.cpu,
            _ => t.by_usage.cpu,
        },
        memory: match t.memory_policy {
            CalculatePolicy::Request => t.by_request.memory,
            CalculatePolicy::MaxUsageRequest => t.by_max_usage_request.memory,
            CalculatePolicy::Usage => t.by_usage.memory,
        },
    };
    if s.batch_cpu_threshold_percent.is_some() || s.batch_memory_threshold_percent.is_some() {
        let cap = Res {
            cpu: s
                .batch_cpu_threshold_percent
                .map_or(i64::MAX, |p| capacity.cpu * p / 100),
            memory: s
                .batch_memory_threshold_percent
                .map_or(i64::MAX, |p| capacity.memory * p / 100),
        };
        result = result.zip(cap, i64::min);
        t.threshold_cap = Some(cap);
    }
    t.result = result;
}

pub(super) fn pod_metric_index(metric: &NodeMetric) -> std::collections::HashMap<String, Res> {
    metric
        .status
        .iter()
        .flat_map(|s| s.pods_metric.iter().flatten())
        .map(|m| {
            (
                key(m.namespace.as_deref(), m.name.as_deref()),
                Res::from_map(&m.pod_usage),
            )
        })
        .collect()
}

/// Pod metrics without a Running/Pending pod (terminated pods still reported count too).
pub(super) fn dangling<'a>(
    metric: &'a NodeMetric,
    matched: &'a std::collections::HashSet<String>,
) -> impl Iterator<Item = (Res, PriorityClass)> + 'a {
    metric
        .status
        .iter()
        .flat_map(|s| s.pods_metric.iter().flatten())
        .map(|m| (key(m.namespace.as_deref(), m.name.as_deref()), m))
        .filter(|(k, _)| !matched.contains(k))
        .map(|(_, m)| {
            let class = PriorityClass::from_name(m.priority.as_deref().unwrap_or_default());
            (Res::from_map(&m.pod_usage), class)
        })
}

fn mid(inp: &Inputs<'_>, metric: &NodeMetric, s: &ColocationStrategy) -> MidTerms {
    let (capacity, kubelet, anno) = node_basics(inp.node);
    let cap = capacity.percent(
        s.mid_cpu_threshold_percent.unwrap_or(100),
        s.mid_memory_threshold_percent.unwrap_or(100),
    );
    if s.mid_reclaim_mode.as_deref() == Some("static") {
        let reserved = capacity.percent(
            s.mid_static_cpu_reserved_percent.unwrap_or(0),
            s.mid_static_memory_reserved_percent.unwrap_or(0),
        );
        let result = reserved.zip(cap, i64::min).at_least_zero();
        return MidTerms {
            mode: "static",
            capacity,
            reserved,
            threshold_cap: cap,
            result,
            ..Default::default()
        };
    }
    let status = metric.status.as_ref();
    let prod_reclaimable = status
        .and_then(|s| s.prod_reclaimable_metric.as_ref())
        .map(|m| Res::from_map(&m.resource))
        .unwrap_or_default();
    let system = system_used(metric, PriorityClass::Mid);
    let reserved = system.max(kubelet.max(anno));
    let prod_request = inp
        .pods
        .iter()
        .filter(|p| is_active(p))
        .filter(|p| {
            !matches!(
                pod_priority_class_with_default(p),
                PriorityClass::Mid | PriorityClass::Batch | PriorityClass::Free
            )
        })
        .map(|p| Res::from_amounts(&pod_requests(p)))
        .fold(Res::default(), Res::add);
    let unallocated = capacity.sub(reserved).sub(prod_request).at_least_zero();
    let usage = status
        .and_then(|s| s.node_metric.as_ref())
        .and_then(|m| m.node_usage.resources.as_ref());
    let unused = match usage {
        Some(u) if u.contains_key(CPU) && u.contains_key(MEMORY) => {
            capacity.sub(Res::from_list(Some(u)))
        }
        _ => Res::default(),
    };
    let pct = s.mid_unallocated_percent.unwrap_or(0);
    let result = prod_reclaimable
        .zip(unused, i64::min)
        .at_least_zero()
        .add(unallocated.percent(pct, pct))
        .zip(cap, i64::min)
        .at_least_zero();
    MidTerms {
        mode: "dynamic",
        capacity,
        prod_reclaimable,
        system_used: system,
        reserved,
        prod_request,
        unallocated,
        unallocated_percent: pct,
        unused,
        threshold_cap: cap,
        result,
    }
}
